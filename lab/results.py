"""Where the Python measurements write: ``results/<machine>/<date>-<commit>/`` (made by
``benches/results-dir``, which also records the CPU, SIMD level and toolchains)."""

import atexit
import os
import subprocess
import sys

# lab/ -> the checkout.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def directory():
    """The results folder of this machine and commit (created)."""
    out = subprocess.run(["bash", os.path.join(ROOT, "benches", "results-dir")],
                         check=True, capture_output=True, text=True).stdout.strip()
    return os.path.join(ROOT, out)


class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, s):
        for st in self.streams:
            if not st.closed:
                st.write(s)
        return len(s)

    def flush(self):
        for st in self.streams:
            if not st.closed:
                st.flush()


def tee(name):
    """From now on, what this process prints also goes to ``<results folder>/<name>``;
    returns that path."""
    path = os.path.join(directory(), name)
    # Line-buffered, and closed at exit: a report cut short still has every line printed.
    f = open(path, "w", buffering=1)
    atexit.register(f.close)
    sys.stdout = _Tee(sys.stdout, f)
    print(f"(written to {os.path.relpath(path, ROOT)})")
    return path
