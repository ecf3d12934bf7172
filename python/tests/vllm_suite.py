"""vLLM 0.33.0's own tests with corun's vLLM plugin off and on, then corun's own test
through vLLM's real scheduler, block pool and NIXL connector.

    python python/tests/vllm_suite.py            # every file both ways, then the plugin test
    python python/tests/vllm_suite.py --quick    # a subset (CI when time is short)
    python python/tests/vllm_suite.py --files test_nixl_desc_geometry.py --ways on

Needs vLLM's full install in a venv of its own (``--venv``, default
``target/vllm-venv``: ``pip install vllm==0.33.0 ray tblib pytest-timeout pytest`` and
corun, e.g. ``pip install ./python``); ``VLLM_TARGET_DEVICE=cpu``. vLLM's tests come from
its sdist, downloaded to ``target/`` (its ``tests/`` only are unpacked: the sdist's
``vllm/`` source next to them would shadow the installed package). ``ModelConfig``
resolves model ids offline from a Hugging Face cache this script writes from
``python/tests/vllm_configs/`` (each model's public ``config.json``, nothing else).

Prints, per test file and way, ``vllm-suite file=<name> plugin=<off|on> passed=<n>
failed=<n> skipped=<n>``, the tests that did not pass (with the reason), the plugin's
counters over the ``on`` run, then ``vllm-plugin placed=<n> fallback=<n> errors=<n>
nixl_before=<n> nixl_after=<n>`` from ``tests/test_vllm_plugin.py``'s fragmented-pool
run. Exits non-zero unless every file passes as many tests both ways, at least
``--min-passed`` pass in all, and the plugin line shows placement (placed > 0, errors =
0, nixl_after at least 1.2x below nixl_before).
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

# python/tests/vllm_suite.py: HERE is python/tests (vllm_configs/, test_vllm_plugin.py),
# ROOT the checkout.
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VERSION = "0.33.0"
# The sdist, found on the package index pip is set up with (`pip download` would try to
# build it, which needs torch and CUDA), and checked by its digest.
SDIST = f"vllm-{VERSION}.tar.gz"
SDIST_SHA256 = "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112"

FILES = [
    "tests/v1/core/test_prefix_caching.py",
    "tests/v1/core/test_kv_cache_utils.py",
    "tests/v1/kv_connector/unit/test_remote_prefill_lifecycle.py",
    "tests/v1/kv_connector/unit/test_remote_decode_lifecycle.py",
    "tests/v1/kv_connector/unit/test_nixl_connector.py",
    "tests/v1/kv_connector/unit/test_nixl_desc_geometry.py",
]
# Passes with the plugin off, on this CPU-only install (python/tests/vllm_suite.py --ways off):
# a run of one way is checked against them.
EXPECTED = {
    "test_prefix_caching.py": 213,
    "test_kv_cache_utils.py": 111,
    "test_remote_prefill_lifecycle.py": 16,
    "test_remote_decode_lifecycle.py": 4,
    # 2 fail: test_abort_timeout_on_prefiller[ray], [None] start a real LLM (ray on GPU,
    # vllm._C kernels the CPU wheel lacks).
    "test_nixl_connector.py": 195,
    "test_nixl_desc_geometry.py": 254,
}
# --quick: the files that exercise every hook (allocation in pull mode, NIXL's reads).
QUICK = [
    "tests/v1/kv_connector/unit/test_remote_prefill_lifecycle.py",
    "tests/v1/kv_connector/unit/test_remote_decode_lifecycle.py",
    "tests/v1/kv_connector/unit/test_nixl_connector.py",
    "tests/v1/kv_connector/unit/test_nixl_desc_geometry.py",
]


def sdist_url() -> str:
    """The sdist's address on pip's index (``PIP_INDEX_URL``, else pip's default), from the
    index's simple page for vLLM (PEP 503)."""
    index = os.environ.get("PIP_INDEX_URL", "").rstrip("/")
    if not index:
        from pip._internal.models.index import PyPI

        index = PyPI.simple_url.rstrip("/")
    page_url = f"{index}/vllm/"
    with urllib.request.urlopen(page_url, timeout=60) as r:
        page = r.read().decode()
    for href in re.findall(r'href="([^"]+)"', page):
        href = html.unescape(href)
        if href.split("#")[0].endswith("/" + SDIST):
            return urllib.parse.urljoin(page_url, href.split("#")[0])
    raise SystemExit(f"vllm-suite: {SDIST} is not on {page_url}")


def fetch_tests(target: Path) -> Path:
    """vLLM's test tree, unpacked from its sdist under ``target``: returns the directory
    holding ``tests/`` (and the sdist's ``pyproject.toml``, for pytest's settings)."""
    out = target / f"vllm-{VERSION}-tests"
    if (out / "tests" / "v1").is_dir():
        return out
    tarball = target / f"vllm-{VERSION}.tar.gz"
    if not tarball.exists():
        url = sdist_url()
        print(f"vllm-suite: downloading {url}", flush=True)
        part = tarball.with_suffix(".part")
        with urllib.request.urlopen(url, timeout=300) as r, open(part, "wb") as f:
            while chunk := r.read(1 << 20):
                f.write(chunk)
        part.rename(tarball)
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise SystemExit(f"vllm-suite: {tarball} has sha256 {digest}, expected {SDIST_SHA256}")
    prefix = f"vllm-{VERSION}/"
    with tarfile.open(tarball) as tar:
        members = []
        for m in tar.getmembers():
            if m.name.startswith(prefix + "tests/") or m.name == prefix + "pyproject.toml":
                m.name = m.name[len(prefix) :]
                members.append(m)
        tar.extractall(out, members=members)
    return out


def write_hf_cache(home: Path) -> None:
    """A Hugging Face hub cache holding only each model's config.json (the layout
    ``huggingface_hub`` reads offline: ``refs/main`` names the snapshot)."""
    rev = "0" * 40
    for config in sorted((HERE / "vllm_configs").glob("*/*/config.json")):
        org, name = config.parent.parent.name, config.parent.name
        repo = home / "hub" / f"models--{org}--{name}"
        snap = repo / "snapshots" / rev
        snap.mkdir(parents=True, exist_ok=True)
        (snap / "config.json").write_bytes(config.read_bytes())
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(rev)


def env_for(home: Path, way: str, counters: Path | None) -> dict:
    env = dict(os.environ)
    env.update(
        VLLM_TARGET_DEVICE="cpu",
        HF_HOME=str(home),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    env.pop("CORUN_VLLM", None)
    if way == "on":
        env["CORUN_VLLM"] = "all"
        if counters is not None:
            env["CORUN_VLLM_COUNTERS"] = str(counters)
    return env


def run_file(python: str, tests: Path, file: str, way: str, home: Path, work: Path, timeout: int):
    name = Path(file).name
    xml = work / f"{name}.{way}.xml"
    counters = work / f"{name}.counters.json"
    args = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
            f"--timeout={timeout}", file]
    if way == "on":
        args[3:3] = ["-p", "corun.vllm_pytest"]
    t0 = time.monotonic()
    log = work / f"{name}.{way}.log"
    with open(log, "w") as f:
        rc = subprocess.call(args, cwd=tests, env=env_for(home, way, counters), stdout=f,
                             stderr=subprocess.STDOUT)
    secs = time.monotonic() - t0
    passed = failed = skipped = 0
    others = []
    if xml.exists():
        for case in ET.parse(xml).iter("testcase"):
            test = f"{case.get('classname')}::{case.get('name')}"
            bad = case.find("failure")
            if bad is None:
                bad = case.find("error")
            skip = case.find("skipped")
            if bad is not None:
                failed += 1
                others.append(("failed", test, (bad.get("message") or "").splitlines()[:1]))
            elif skip is not None:
                skipped += 1
                others.append(("skipped", test, (skip.get("message") or "").splitlines()[:1]))
            else:
                passed += 1
    if rc not in (0, 1) and passed == 0:
        # pytest itself failed (usage error, a collection crash): show why.
        print(log.read_text()[-3000:])
    print(f"vllm-suite file={name} plugin={way} passed={passed} failed={failed} "
          f"skipped={skipped} seconds={secs:.0f}", flush=True)
    for outcome, test, why in others:
        print(f"  not passed: {outcome} {test}: {' '.join(why)[:200]}")
    if way == "on" and counters.exists():
        print(f"  corun counters: {json.loads(counters.read_text())}")
    return passed


def main() -> None:
    """The command line: exits 0 when everything passed, 1 otherwise."""
    sys.exit(run())


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", default=str(ROOT / "target" / "vllm-venv"))
    ap.add_argument("--quick", action="store_true", help="only " + ", ".join(Path(f).name for f in QUICK))
    ap.add_argument("--files", nargs="+", help="test file names (or paths under the sdist)")
    ap.add_argument("--ways", default="off,on", help="off,on (default), or one of them")
    ap.add_argument("--min-passed", type=int, default=None,
                    help="fewest passes in all (default: 600 for every file, 0 otherwise)")
    ap.add_argument("--timeout", type=int, default=900, help="per test, seconds")
    args = ap.parse_args()

    python = str(Path(args.venv) / "bin" / "python")
    if not Path(python).exists():
        raise SystemExit(f"vllm-suite: no venv at {args.venv} (see this file's docstring)")
    target = ROOT / "target"
    # A fresh clone has no target/ until cargo builds: the sdist goes there.
    target.mkdir(exist_ok=True)
    tests = fetch_tests(target)
    home = target / "vllm-hf"
    write_hf_cache(home)
    work = target / "vllm-suite"
    work.mkdir(exist_ok=True)

    files = QUICK if args.quick else FILES
    if args.files:
        files = [next((f for f in FILES if Path(f).name == x), x) for x in args.files]
    ways = [w for w in args.ways.split(",") if w]
    if any(w not in ("off", "on") for w in ways):
        raise SystemExit(f"vllm-suite: --ways takes off and on, got {args.ways}")
    ok = True
    total = {w: 0 for w in ways}
    for file in files:
        got = {w: run_file(python, tests, file, w, home, work, args.timeout) for w in ways}
        for w in ways:
            total[w] += got[w]
        want = EXPECTED.get(Path(file).name)
        if len(set(got.values())) > 1 or (len(ways) == 1 and want is not None and got[ways[0]] != want):
            print(f"vllm-suite: {Path(file).name} passes differ: {got}, vLLM alone: {want}")
            ok = False
    floor = args.min_passed if args.min_passed is not None else (600 if files == FILES else 0)
    for w in ways:
        print(f"vllm-suite total plugin={w} passed={total[w]}")
        if total[w] < floor:
            print(f"vllm-suite: fewer than {floor} passed with plugin={w}")
            ok = False

    # corun's own test through vLLM's real stack (the fragmented pool).
    env = env_for(home, "on", None)
    env["CORUN_VLLM_TESTS"] = str(tests)
    # The test runs as a script: sys.path[0] is python/tests, where its peers' loaders are.
    out = subprocess.run([python, str(HERE / "test_vllm_plugin.py")], env=env,
                         cwd=HERE, capture_output=True, text=True)
    sys.stdout.write(out.stdout)
    if out.returncode != 0:
        sys.stdout.write(out.stderr[-4000:])
        ok = False
    print("vllm-suite: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    main()
