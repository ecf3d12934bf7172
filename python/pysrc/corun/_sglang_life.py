"""The SGLang plugin's lifecycle (``corun._plugin.Lifecycle``) and its registrations
with SGLang's ``HookRegistry``: one state, read by the plugin's face
(``corun.sglang_plugin``) and its placement hooks (``corun._sglang_place``), so that
neither imports the other."""

from __future__ import annotations

import importlib
import logging
import threading
from typing import Any, Callable, List, Tuple

from ._plugin import Lifecycle, installed_version

log = logging.getLogger("corun")

#: SGLang versions the plugin was tested with.
TESTED = ("0.5.23",)
#: The features ``CORUN_SGLANG`` can name (or ``all``).
FEATURES = ("group", "place")
#: The environment variable that names the features to turn on.
ENV = "CORUN_SGLANG"

_UTILS = "sglang.srt.disaggregation.common.utils"
#: The modules that import the helper by name (checked in the 0.5.23 wheel).
GROUP_MODULES = (
    _UTILS,
    "sglang.srt.disaggregation.mooncake.conn",
    "sglang.srt.disaggregation.nixl.conn",
    "sglang.srt.disaggregation.mori.conn",
    "sglang.srt.disaggregation.ascend.conn",
)
_ALLOCATION = "sglang.srt.mem_cache.allocation"
_PAGED = "sglang.srt.mem_cache.allocator.paged"
_TOKEN = "sglang.srt.mem_cache.allocator.token"
_HOOKS = "sglang.srt.plugins.hook_registry"

LIFE = Lifecycle(
    "SGLang",
    ENV,
    FEATURES,
    TESTED,
    lambda: installed_version("sglang"),
    # placed / partial (its head, within the budget) / fallback: per request of a batch
    counters=("group_calls", "placed", "partial", "fallback"),
    hooks=FEATURES,
)
counters = LIFE.counters
# (target, hook) of every hook corun registered with SGLang's HookRegistry.
registered: List[Tuple[str, Callable[..., Any]]] = []
# The batch whose allocation is under way in this thread (noted by the allocation hook,
# read by the alloc_extend hook).
current = threading.local()



def register(hooks: Any, target: str, hook: Callable[..., Any], kind: str, owner: Any, name: str) -> None:
    LIFE.record(owner, name, vars(owner)[name])
    registered.append((target, hook))
    hooks.HookRegistry.register(target, hook, getattr(hooks.HookType, kind))


def import_module(modname: str) -> Any:
    """The module, or None (logged once) when it cannot be imported here."""
    try:
        return importlib.import_module(modname)
    except Exception:  # an absent dependency of SGLang's (torch, say): nothing to patch
        if counters.first_time(f"import {modname}"):
            log.warning("corun: cannot import %s: not patched", modname, exc_info=True)
        return None
