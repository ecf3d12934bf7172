"""A pytest plugin that turns corun's vLLM plugin on for a whole test session:
``pytest -p corun.vllm_pytest ...``. vLLM's unit tests build the ``Scheduler`` and the
connectors directly and never call ``load_general_plugins()``, so a harness that runs
them with the plugin on must register it itself (``python/tests/vllm_suite.py`` does).

The features are ``CORUN_VLLM``'s (default: ``all``). If the plugin patches nothing (a
vLLM version it was not tested with, or vLLM absent) the session stops with a usage
error: a run meant to be "with corun" must not quietly run without it. With
``CORUN_VLLM_COUNTERS=<path>`` the plugin's counters are written there as JSON at the
end of the session.

pytest is imported only when pytest calls in: importing the package's modules (as
``python -m mypy.stubtest corun`` does) must not need it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from . import vllm_plugin


def pytest_configure(config: Any) -> None:  # a pytest.Config
    import pytest  # type: ignore[import-not-found, unused-ignore]

    wanted = vllm_plugin.enabled_features(os.environ.get("CORUN_VLLM") or "all")
    done = vllm_plugin.enable(sorted(wanted))
    if done != wanted:
        raise pytest.UsageError(
            f"corun.vllm_pytest: the vLLM plugin patched {sorted(done)} of {sorted(wanted)} "
            "(see the corun warning above)"
        )


def pytest_unconfigure(config: Any) -> None:
    path = os.environ.get("CORUN_VLLM_COUNTERS")
    if path:
        with open(path, "w") as f:
            json.dump(vllm_plugin.counters(), f)
