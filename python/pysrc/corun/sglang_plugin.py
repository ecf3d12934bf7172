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
  returns ``None``, as it would).

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

import functools
import importlib
import inspect
import logging
import sys
import threading
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

import corun

from . import adapters
from ._budget import now_ns
from ._guard import guarded
from ._plugin import Lifecycle, installed_version

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
_HOOKS = "sglang.srt.plugins.hook_registry"

_LIFE = Lifecycle(
    "SGLang",
    ENV,
    FEATURES,
    TESTED,
    lambda: installed_version("sglang"),
    # placed / partial (its head, within the budget) / fallback: per request of a batch
    counters=("group_calls", "placed", "partial", "fallback"),
    hooks=FEATURES,
)
_counters = _LIFE.counters
# (target, hook) of every hook corun registered with SGLang's HookRegistry.
_registered: List[Tuple[str, Callable[..., Any]]] = []
# The batch whose allocation is under way in this thread (noted by the allocation hook,
# read by the alloc_extend hook).
_current = threading.local()


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
            mark = _LIFE.mark(), len(_registered)
            try:
                ok = (_register_group if feature == "group" else _register_place)(hooks)
            except Exception:
                ok = False
                log.warning("corun: the %s feature could not be registered; it is off", feature, exc_info=True)
            if ok:
                done.append(feature)
            else:
                _forget(hooks, mark)
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


def _register(hooks: Any, target: str, hook: Callable[..., Any], kind: str, owner: Any, name: str) -> None:
    _LIFE.record(owner, name, vars(owner)[name])
    _registered.append((target, hook))
    hooks.HookRegistry.register(target, hook, getattr(hooks.HookType, kind))


def _import(modname: str) -> Any:
    """The module, or None (logged once) when it cannot be imported here."""
    try:
        return importlib.import_module(modname)
    except Exception:  # an absent dependency of SGLang's (torch, say): nothing to patch
        if _counters.first_time(f"import {modname}"):
            log.warning("corun: cannot import %s: not patched", modname, exc_info=True)
        return None


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


def _register_place(hooks: Any) -> bool:
    allocation, paged = _import(_ALLOCATION), _import(_PAGED)
    if allocation is None or paged is None:
        return False
    cls = paged.PagedTokenToKVPoolAllocator
    slots_signature = inspect.signature(allocation.alloc_paged_token_slots_extend)
    find_batch = guarded(_counters, "place", lambda *a, **k: None)(
        lambda args, kwargs: slots_signature.bind(*args, **kwargs).arguments.get("batch")
    )

    def note_batch(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # Only notes the batch for alloc_extend below.
        previous = getattr(_current, "batch", None)
        _current.batch = find_batch(args, kwargs)
        try:
            return original(*args, **kwargs)
        finally:
            _current.batch = previous

    signature = inspect.signature(cls.alloc_extend)

    def place_batch(allocator: Any, batch: Any, args: Any, kwargs: Any) -> None:
        given = signature.bind(allocator, *args, **kwargs).arguments
        _place_batch(allocator, batch, given["prefix_lens_cpu"], given["seq_lens_cpu"], given["extend_num_tokens"])

    place = guarded(_counters, "place", lambda *a, **k: None)(place_batch)

    def place_then_alloc(original: Callable[..., Any], allocator: Any, *args: Any, **kwargs: Any) -> Any:
        batch = getattr(_current, "batch", None)
        # Only SGLang's own class: a subclass (interleaved, SWA) may hand pages out its way.
        if batch is None or type(allocator) is not cls:
            return original(allocator, *args, **kwargs)
        place(allocator, batch, args, kwargs)
        # SGLang's own allocation of the batch: what the budget is a share of.
        start, pages = now_ns(), getattr(_current, "pages", 0)
        try:
            return original(allocator, *args, **kwargs)
        finally:
            _LIFE.budget.stack(pages, now_ns() - start)

    _register(hooks, f"{_ALLOCATION}.alloc_paged_token_slots_extend", functools.wraps(
        allocation.alloc_paged_token_slots_extend)(note_batch), "AROUND", allocation, "alloc_paged_token_slots_extend")
    _register(hooks, f"{_PAGED}.PagedTokenToKVPoolAllocator.alloc_extend", place_then_alloc, "AROUND", cls, "alloc_extend")
    return True


def _decode_pages(req: Any) -> Optional[npt.NDArray[Any]]:
    """The decode side's pages for ``req`` (``dst_kv_indices`` of its room's transfer
    infos), or None when they are not known yet or the infos disagree."""
    kv_mgr = getattr(getattr(req, "disagg_kv_sender", None), "kv_mgr", None)
    infos = getattr(kv_mgr, "transfer_infos", {}).get(getattr(req, "bootstrap_room", None))
    pages = [np.asarray(i.dst_kv_indices) for i in (infos or {}).values() if not i.is_dummy]
    if not pages or any(not np.array_equal(p, pages[0]) for p in pages[1:]):
        return None
    return pages[0]


def batch_destinations(batch: Any, prefix_lens_cpu: Any, seq_lens_cpu: Any, page_size: int) -> Optional[List[npt.NDArray[np.int64]]]:
    """Per request of ``batch`` (in batch order), the decode pages that pair with the new
    pages ``alloc_extend`` takes for it, in the order it takes them (an empty array for
    a request that takes none), or None when some request's pairs are unknown.

    Request ``i`` takes new pages for its positions ``ceil(prefix/ps) .. ceil(seq/ps) - 1``
    (as ``alloc_extend_naive`` counts them); the decode side's list starts at the page of
    its own prefix (``req.disagg_decode_prefix_len``), as the prefill side sends it."""
    reqs = list(getattr(batch, "reqs", ()))
    prefix, seq = np.asarray(prefix_lens_cpu).tolist(), np.asarray(seq_lens_cpu).tolist()
    if len(reqs) != len(prefix) or len(seq) != len(prefix):
        return None
    parts = []
    for req, p, s in zip(reqs, prefix, seq):
        first, end = -(-int(p) // page_size), -(-int(s) // page_size)
        if end <= first:
            parts.append(np.zeros(0, np.int64))
            continue
        dst = _decode_pages(req)
        if dst is None:
            return None
        skip = int(getattr(req, "disagg_decode_prefix_len", 0) or 0) // page_size
        if first - skip < 0 or end - skip > len(dst):
            return None
        parts.append(dst[first - skip : end - skip].astype(np.int64))
    return parts


def _place_batch(allocator: Any, batch: Any, prefix_lens_cpu: Any, seq_lens_cpu: Any, extend_num_tokens: int) -> None:
    """Reorders ``allocator.free_pages`` for ``batch`` (see the module docs); raises only
    before changing it, but for the merge of staged frees that SGLang's ``alloc_extend``
    makes in this same call under the same condition."""
    _current.pages = 0
    _LIFE.budget.run(lambda: _place_within(allocator, batch, prefix_lens_cpu, seq_lens_cpu, extend_num_tokens))


def _place_within(allocator: Any, batch: Any, prefix_lens_cpu: Any, seq_lens_cpu: Any, extend_num_tokens: int) -> int:
    """:func:`_place_batch`'s work; returns the pages it read."""
    n_reqs = len(batch.reqs)
    parts = batch_destinations(batch, prefix_lens_cpu, seq_lens_cpu, allocator.page_size)
    if parts is None or not sum(len(p) for p in parts):
        _counters.add("fallback", n_reqs)
        return 0
    sizes = [len(p) for p in parts]
    total = sum(sizes)
    _current.pages = total
    # Each placed page is read twice (the request's, its own), the batch together twice more.
    pages = _LIFE.budget.pages(total, lambda k: 4 * k)
    if pages == 0:
        _counters.add("fallback", n_reqs)  # no budget for even one page (or 0: placement off)
        return 0
    # alloc_extend merges and sorts the staged frees when this bound exceeds the free
    # list (which would undo placement); make that merge first, as it would.
    bound = int(extend_num_tokens) // allocator.page_size + n_reqs + 1
    if bound > len(allocator.free_pages):
        allocator.merge_and_sort_free()
    runs = adapters.sglang_place_batch(allocator, parts, pages=None if pages >= total else pages)
    if runs is None:
        _counters.add("fallback", n_reqs)  # a shortage: SGLang's alloc_extend returns None
        return 4 * pages
    # The requests placed whole lie before the budget's end; the one across it, by its head.
    ends = np.cumsum(sizes).tolist()
    for (own, placed), end, size in zip(runs, ends, sizes):
        if placed >= own:
            _counters.add("fallback")
        else:
            _counters.add("placed" if end <= pages or not size else "partial")
    return 4 * pages
