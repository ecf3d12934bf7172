"""What a stack test needs installed, said once: a skip naming the missing module, or a
failure where the environment variable that CI sets says the stack is there."""

import importlib.util
import os

import pytest


def need(modules, require_env, what):
    """Returns when every module of ``modules`` is importable; else skips naming the first
    missing one and ``what`` the run needs, or fails with ``require_env=1``."""
    for mod in modules:
        if importlib.util.find_spec(mod) is None:
            if os.environ.get(require_env) == "1":
                pytest.fail(f"{require_env}=1 but {mod} is not importable")
            pytest.skip(f"{mod} is not installed ({what} needed)")
