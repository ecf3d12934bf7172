"""Real bytes through a serving stack's own KV connector, corun's plugin off and on.

    python lab/stack_e2e.py --stack vllm            # lab.stack_vllm: vLLM 0.33.0's NIXL connector
    python lab/stack_e2e.py --stack sglang          # lab.stack_sglang
    python lab/stack_e2e.py --stack vllm --quick    # CI's short form
    python lab/stack_e2e.py --grid [--quick]        # lab.stack_grid: every stack, model, block size

Each stack's module says what it builds, what it measures and which lines it shims; both
print one line per mode and way (``lab.stack_common.stack_line``):
``stack-e2e stack=<name> connector=<name> mode=<m> plugin=<off|on> requests=<n>
bytes_checked=<n> bytes_bad=<n> descriptors=<n> xfer_ms_p50=<x> xfer_ms_p99=<x> placed=<n>
fallback=<n> errors=<n> ...``. A full run's output also goes to the results folder
(``stack-e2e-<stack>.txt``); ``--quick`` and ``--help`` write nothing.
"""

import importlib
import os
import sys

if not __package__:  # run as a file (python lab/stack_e2e.py): the checkout first on sys.path
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STACKS = {"vllm": "lab.stack_vllm", "sglang": "lab.stack_sglang"}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--grid" in argv:
        return importlib.import_module("lab.stack_grid").main(argv) or 0
    stack = None
    for i, a in enumerate(argv):
        if a == "--stack" and i + 1 < len(argv):
            stack = argv[i + 1]
            del argv[i:i + 2]
            break
        if a.startswith("--stack="):
            stack = a.split("=", 1)[1]
            del argv[i]
            break
    if stack not in STACKS:
        if "-h" in argv or "--help" in argv:
            print(__doc__)
            return 0
        sys.exit(f"stack_e2e.py: --stack must be one of {', '.join(STACKS)} (got {stack!r})")
    # A stack's main returns non-zero when a line misses its contract.
    return importlib.import_module(STACKS[stack]).main(argv) or 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.exit(code)
