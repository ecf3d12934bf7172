"""corun inside SGLang 0.5.23, as SGLang loads plugins: the entry point ``corun`` in the
group ``sglang.srt.plugins`` (this distribution declares it), which SGLang's own
``load_plugins()`` runs in every process that matters (the scheduler, the detokenizer,
the data-parallel controller, the engine). Off unless ``CORUN_SGLANG`` names features:

    pip install corun-kv            # next to SGLang 0.5.23
    CORUN_SGLANG=all python -m sglang.launch_server ...

``SGLANG_PLUGINS`` (SGLang's list of the plugins to load) is respected: SGLang itself
skips this one when the list does not name ``corun``. Features (``all``, or a
comma-separated selection):

- ``group``: SGLang's ``group_concurrent_contiguous`` (defined in
  ``sglang/srt/disaggregation/common/utils.py``, imported *by name* into the Mooncake,
  NIXL, MoRI and Ascend backends' ``conn.py``) becomes corun's: a REPLACE hook of
  SGLang's ``HookRegistry``, which rebinds it in the defining module and in every module
  that imported it by name (a backend imported later takes it from the defining module).
  Results are equal (but where ``np.diff`` wraps from the dtype's maximum to its minimum,
  which page indices never do).
- ``place``: at the prefill side's batch allocation, when the decode side's pages of
  every request in the batch are known
  (``req.disagg_kv_sender.kv_mgr.transfer_infos[req.bootstrap_room]``, its
  ``dst_kv_indices``), the front of the allocator's free list is reordered
  (``corun.adapters.sglang_place_batch``) so that SGLang's own ``alloc_extend`` hands
  each request pages that mirror the decode side's runs, never more runs for any
  request than SGLang's own pages (the rule is that function's). Two AROUND hooks: on
  ``allocation.alloc_paged_token_slots_extend`` (it has the batch, and is what
  ``alloc_for_extend`` and ``ALLOC_EXTEND_FUNCS`` call by module lookup), which only
  notes the batch for the thread, and on ``PagedTokenToKVPoolAllocator.alloc_extend``
  (after SGLang's eviction, with the lengths in hand), which places. SGLang's allocator
  and its bookkeeping are untouched; a shortage is left to SGLang (``alloc_extend``
  returns ``None``, as it would). With 1-token pages (SGLang's default page size,
  ``TokenToKVPoolAllocator``), two AROUND hooks the same way: on
  ``allocation.alloc_for_extend`` (it has the batch; ``schedule_batch`` imported it by
  name, and the registry rebinds it there), which notes the batch, and on
  ``TokenToKVPoolAllocator.alloc`` (what ``alloc_token_slots`` calls, after SGLang's
  eviction), which places when the batch's new tokens are exactly what it allocates.

What is done by hand, because ``HookRegistry`` cannot express it: :func:`disable` (the
registry can only forget every plugin's hooks at once, ``reset()``, and never puts an
original back): it removes corun's own entries from the registry, restores the
originals it recorded (through SGLang's own propagation to the modules that imported
them by name) and re-applies any other plugin's hooks on those targets. And
:func:`enable` called outside ``load_plugins()`` (older deployments called
``enable_from_env()`` from a launcher) applies the registry's hooks at once, as
``load_plugins()`` does after running its plugins.

Never breaks serving: every hook goes through ``corun._guard.guarded``: an exception in
corun's part is logged once, counted (``errors``, ``<hook>_errors``) and the call goes
SGLang's own way. On any SGLang other than 0.5.23 nothing is patched (logged once;
``counters()["unsupported_version"]`` is 1). The lifecycle (features, version gate,
patch record, counters, the WARNING line saying which features are on) is
``corun._plugin``'s, shared with the vLLM plugin.

Counters (every key there from the start): ``group_calls`` (groupings corun did),
``placed`` (requests whose pages placement chose), ``fallback`` (requests left to
SGLang's order: their decode pages unknown, a shortage, or placement found nothing
better), ``errors``, ``group_errors``, ``place_errors`` (hooks that failed and went
SGLang's way), ``unsupported_version``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Dict, FrozenSet, Iterable, Optional, Tuple, Union

import corun

from ._guard import guarded
from ._sglang_life import _HOOKS, _UTILS, ENV, FEATURES, GROUP_MODULES, TESTED, registered as _registered
from ._sglang_life import LIFE as _LIFE
from ._sglang_life import counters as _counters
from ._sglang_life import import_module as _import
from ._sglang_life import register as _register
from ._sglang_place import batch_destinations
from ._sglang_place import register_place as _register_place

log = logging.getLogger("corun")

__all__ = [
    "ENV",
    "FEATURES",
    "GROUP_MODULES",
    "TESTED",
    "batch_destinations",
    "counters",
    "disable",
    "enable",
    "enable_from_env",
    "enabled",
    "place_times",
    "reset_counters",
]

def counters() -> Dict[str, int]:
    """A copy of the plugin's counters (see the module docs)."""
    return _counters.snapshot()


def reset_counters() -> None:
    """Sets every counter back to 0, and forgets the placement calls' times."""
    _counters.reset()
    _LIFE.budget.reset()


def place_times() -> Dict[str, float]:
    """The placement calls' CPU times (one a batch) since start or
    :func:`reset_counters`: ``calls``, ``p50_us``, ``p99_us``, ``max_us``. Each call is
    bounded by ``CORUN_SGLANG_BUDGET_US`` (``corun._budget``)."""
    return _LIFE.budget.times()


def enabled() -> FrozenSet[str]:
    """The features now on."""
    return frozenset(_LIFE.on)


def enable(features: Union[None, str, Iterable[str]] = None) -> FrozenSet[str]:
    """SGLang's entry point (``load_plugins()`` calls it with no argument): registers
    corun's hooks for ``features`` (default: those ``CORUN_SGLANG`` names; ``all``,
    ``group``, ``place``, comma-separated; unset or empty: none) with SGLang's
    ``HookRegistry``. A name that is no feature, or ``off`` beside another, is a
    ``ValueError`` naming ``CORUN_SGLANG`` and its value. Idempotent. On
    an SGLang other than 0.5.23, or none, registers nothing and logs it once. Returns
    the features on."""
    wanted = _LIFE.parse(features)
    if not wanted:
        return enabled()
    _LIFE.budget.configure()  # a bad CORUN_SGLANG_BUDGET_US: ValueError, nothing registered
    with _LIFE.lock:
        if not _LIFE.version_ok():
            return enabled()
        hooks = _import(_HOOKS)
        if hooks is None:
            return enabled()
        done = []
        for feature in sorted(wanted - _LIFE.on):
            if _LIFE.without_time(feature):
                continue
            mark = _LIFE.mark(), len(_registered)
            try:
                ok = (_register_group if feature == "group" else _register_place)(hooks)
                why = "a module of SGLang it hooks does not import"
            except Exception as e:
                ok, why = False, f"it could not be registered: {type(e).__name__}: {e}"
            if ok:
                done.append(feature)
            else:
                _forget(hooks, mark)
                _LIFE.turned_off(feature, why, exc_info=True)
        if done and hooks._current_plugin_source.get() is None:
            # Not inside load_plugins(), which applies the hooks after its plugins ran.
            hooks.HookRegistry.apply_hooks()
        _LIFE.turned_on(done)
    return enabled()


def enable_from_env(env: Optional[Dict[str, str]] = None) -> FrozenSet[str]:
    """For deployments that call the plugin themselves (before SGLang loaded it as a
    plugin): :func:`enable` for the features ``CORUN_SGLANG`` names in ``env`` (default:
    the process's environment)."""
    return enable(_LIFE.parse(None, env))


def disable() -> None:
    """Puts back every SGLang function the plugin replaced (counters are kept); other
    plugins' hooks on the same functions stay applied."""
    with _LIFE.lock:
        hooks = sys.modules.get(_HOOKS)
        if hooks is not None:
            _forget(hooks, (0, 0))
        _LIFE.on.clear()


def _forget(hooks: Any, mark: Tuple[int, int]) -> None:
    """Takes back what was registered and applied since ``mark`` (see the module docs)."""
    registry = hooks.HookRegistry
    targets = set()
    while len(_registered) > mark[1]:
        target, hook = _registered.pop()
        registry._hooks[target] = [h for h in registry._hooks.get(target, []) if h[1] is not hook]
        if not registry._hooks[target]:
            del registry._hooks[target]
        targets.add(target)
    for owner, _name, original, applied in _LIFE.restore(mark[0]):
        if applied is not original:
            # SGLang's own propagation, backwards: every module that imported the patched
            # function by name gets the original again.
            hooks._propagate_patch(applied, original, owner)
    registry._patched.difference_update(targets)
    if any(t in registry._hooks for t in targets):
        registry.apply_hooks()  # another plugin's hooks there: applied again, without corun's


# --- group: the drop-in -------------------------------------------------------------


def _register_group(hooks: Any) -> bool:
    utils = _import(_UTILS)
    if utils is None:
        return False
    own = utils.group_concurrent_contiguous

    def corun_group(src_indices: Any, dst_indices: Any) -> Any:
        groups = corun.group_concurrent_contiguous(src_indices, dst_indices)
        _counters.add("group_calls")
        return groups

    drop_in = guarded(_counters, "group", own)(corun_group)
    _register(hooks, f"{_UTILS}.group_concurrent_contiguous", drop_in, "REPLACE", utils, "group_concurrent_contiguous")
    return True


# --- place: placement at the prefill side's batch allocation ------------------------
