//! Replays the fuzz corpora (`fuzz/corpus/<target>/`: the hand-made `seed-*` inputs and
//! the last campaign's minimised corpus; only the seeds with `FUZZ_CORPUS=seeds`, as
//! under emulation, where the whole corpus takes minutes) and every crash the
//! fuzzers found (`tests/fuzz_regressions/<target>/<what it found>`) through the same
//! checks the fuzz targets run.
#![cfg(feature = "alloc")]

use std::path::Path;

const TARGETS: [&str; 8] =
    ["agree", "resume", "max_len", "mismatch", "steps", "descriptors", "gather", "raw"];

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
                corun_testkit::fuzz::replay(target, &bytes);
                replayed += 1;
            }
        }
    }
    replayed
}

#[test]
#[cfg_attr(miri, ignore = "file system access")]
fn corpora_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let seeds_only = std::env::var("FUZZ_CORPUS").is_ok_and(|v| v == "seeds");
    let n = replay_dir(&root.join("fuzz/corpus"), if seeds_only { "seed-" } else { "" });
    assert!(n >= TARGETS.len(), "expected fuzz corpora, found {n} files");
}

#[test]
#[cfg_attr(miri, ignore = "file system access")]
fn found_crashes_stay_fixed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    replay_dir(&root.join("tests/fuzz_regressions"), "");
}
