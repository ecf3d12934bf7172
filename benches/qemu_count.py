#!/usr/bin/env python3
"""Instructions per 64-position block on aarch64 (NEON), where timing under qemu means
nothing: runs the profile_probe example under qemu-user with every executed translation
block logged (``-d in_asm,exec,nochain``), multiplies each block's executions by its
instruction count, and subtracts an idle run (the workload built, no call). Deterministic.

    python3 benches/qemu_count.py             # needs the aarch64 target, its gcc and
                                              # qemu-user (what .ci/setup installs)
    python3 benches/qemu_count.py mean-16     # some workloads only

Prints the same table as benches/callgrind.sh (instructions only: qemu has no branch
predictor to simulate), and writes it to results/<machine>/<run>/qemu-neon.txt.
"""
import importlib.util
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = "aarch64-unknown-linux-gnu"
CALLS = 2
LEN = 65_536
# Not the allocator trace: building it under qemu with every block logged takes over
# ten minutes (callgrind.sh has it for x86).
WORKLOADS = ["no-breaks", "mean-256", "mean-16", "mean-4", "singletons"]
FUNCTIONS = ["group_into", "count_runs", "scalar"]


def lab_results():
    """The lab's one results writer, ``lab/results.py``, loaded from its file: this
    script runs from benches/, where the lab package is not importable, and the module
    imports nothing of the lab itself."""
    spec = importlib.util.spec_from_file_location(
        "lab.results", os.path.join(ROOT, "lab", "results.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build():
    env = dict(os.environ, CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER="aarch64-linux-gnu-gcc")
    subprocess.run(["cargo", "build", "-q", "--release", "--example", "profile_probe",
                    "--target", TARGET, "--target-dir", "target/qemu-count"],
                   cwd=ROOT, env=env, check=True)
    return os.path.join(ROOT, "target/qemu-count", TARGET, "release/examples/profile_probe")


def instructions(probe, workload, function):
    """Guest instructions executed by one run of the probe. The log is read as qemu
    writes it (to a pipe: a run logs up to hundreds of megabytes)."""
    proc = subprocess.Popen(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", "-d",
                             "in_asm,exec,nochain", probe, workload, function],
                            env=dict(os.environ, PROBE_CALLS=str(CALLS)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, errors="replace")
    sizes, total, tb, count = {}, 0, None, 0
    trace = re.compile(r"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")
    insn = re.compile(r"^0x([0-9a-f]+):\s")
    for line in proc.stderr:
        m = insn.match(line)
        if m:
            if tb is None:
                tb, count = int(m.group(1), 16), 0
            count += 1
            continue
        if tb is not None:  # the end of one block's listing
            sizes[tb], tb = count, None
        m = trace.match(line)
        if m:
            total += sizes.get(int(m.group(1), 16), 0)
    if proc.wait() != 0:
        sys.exit(f"qemu-aarch64 failed on {workload} {function}")
    return total


def main():
    if "--help" in sys.argv:
        sys.exit(print(__doc__))
    lab_results().tee("qemu-neon.txt")
    probe = build()
    blocks = LEN * CALLS // 64
    print(f"qemu-aarch64 instruction counts, u32 (NEON, {TARGET} release): per 64-position "
          f"block ({CALLS} calls x {LEN:,} positions)\n")
    print("| workload | group_into instr | count_runs instr | scalar instr |")
    print("|---|---|---|---|")
    for w in sys.argv[1:] or WORKLOADS:
        idle = instructions(probe, w, "idle")
        row = [str((instructions(probe, w, f) - idle) // blocks) for f in FUNCTIONS]
        print(f"| {w} | " + " | ".join(row) + " |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
