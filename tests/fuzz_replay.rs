//! Replays the hand-made fuzz seeds (`tests/fuzz_seeds/<target>/`), every crash the
//! fuzzers found (`tests/fuzz_regressions/<target>/<what it found>`) and, where a local
//! campaign left one, the fuzzer's own corpus (`fuzz/corpus/<target>/`, not in git; skipped
//! with `FUZZ_CORPUS=seeds`, as under emulation, where it takes minutes) through the same
//! checks the fuzz targets run.
#![cfg(feature = "alloc")]

mod kit;

use std::path::Path;

const TARGETS: [&str; 9] =
    ["agree", "resume", "max_len", "mismatch", "steps", "descriptors", "gather", "raw", "place"];

/// Runs every file under `dir/<target>/` whose name starts with `prefix`.
fn replay_dir(dir: &Path, prefix: &str) -> usize {
    let mut replayed = 0;
    for target in TARGETS {
        let Ok(entries) = std::fs::read_dir(dir.join(target)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if name.starts_with(prefix) {
                let bytes = std::fs::read(&path).unwrap();
                eprintln!("replaying {}", path.display());
                kit::fuzz::replay(target, &bytes);
                replayed += 1;
            }
        }
    }
    replayed
}

#[test]
#[cfg_attr(miri, ignore = "file system access")]
fn seeds_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let n = replay_dir(&root.join("tests/fuzz_seeds"), "seed-");
    assert!(n >= 8 * TARGETS.len(), "expected the fuzz seeds, found {n} files");
}

#[test]
#[cfg_attr(miri, ignore = "file system access")]
fn local_corpora_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if std::env::var("FUZZ_CORPUS").is_ok_and(|v| v == "seeds") {
        return;
    }
    replay_dir(&root.join("fuzz/corpus"), "");
}

#[test]
#[cfg_attr(miri, ignore = "file system access")]
fn found_crashes_stay_fixed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    replay_dir(&root.join("tests/fuzz_regressions"), "");
}
