//! Replays the hand-made fuzz seeds (`tests/fuzz_seeds/<target>/`), every crash the
//! fuzzers found (`tests/fuzz_regressions/<target>/<what it found>`) and, where a local
//! campaign left one, the fuzzer's own corpus (`fuzz/corpus/<target>/`, not in git; skipped
//! with `FUZZ_CORPUS=seeds`, as under emulation, where it takes minutes) through the same
//! checks the fuzz targets run. Without corun's feature `alloc`, every target but the two
//! held to `corun::scalar::desc` (see `kit::fuzz::TARGETS`).

mod kit;

use std::collections::BTreeSet;
use std::path::Path;

use kit::fuzz::TARGETS;

/// Runs every file under `dir/<target>/` whose name starts with `prefix`.
fn replay_dir(dir: &Path, prefix: &str) -> usize {
    let mut replayed = 0;
    for &target in TARGETS {
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

/// The `unordered` seeds steer the sort down every way it takes (`kit::unordered::path`),
/// so that each replay of them, and each campaign started from them, covers all.
#[test]
#[cfg_attr(miri, ignore = "file system access")]
fn unordered_seeds_reach_every_sort_path() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_seeds/unordered");
    let mut reached = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let input: kit::fuzz::Unordered = kit::fuzz::decode(&bytes).expect("a seed decodes");
        reached.insert(input.path());
    }
    let every = [
        "by runs: one run",
        "by runs",
        "radix-1",
        "radix-2",
        "radix-3",
        "radix-4",
        "introsort (wide)",
        "introsort (wide): sorted",
        "introsort (wide): descending",
        "introsort (few)",
        "introsort (few): sorted",
        "introsort (few): descending",
        "repeated destination",
    ];
    let missing: Vec<_> = every.iter().filter(|p| !reached.contains(*p)).collect();
    assert!(missing.is_empty(), "no seed takes {missing:?} (reached {reached:?})");
}
