"""Leaving a process that made NIXL agents.

NIXL 1.5's native teardown at interpreter exit crashes the process (SIGSEGV, after
Python's own finalisation; releasing its handles, peer and registration first did not
help). In vLLM's full venv one ``nixl_agent`` in a three-line script is enough, and a
pytest process that made agents failed CI with exit code 139 after every test had
passed. Such a process leaves through :func:`leave` once its output is out.
"""

import os
import sys
from typing import NoReturn


def leave(code: int = 0) -> NoReturn:
    """Flush stdout and stderr, then exit with ``code`` without running the native
    teardown (``os._exit``)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
