"""corun inside SGLang 0.5.23: off unless enabled; two features, each selectable.

    import corun.sglang_plugin
    corun.sglang_plugin.enable_from_env()   # CORUN_SGLANG=all (or group, place, group,place)

or ``corun.sglang_plugin.enable(features=("group", "place"))``; ``disable()`` puts SGLang's
own code back; ``counters()`` says what the plugin did. Call it in every process that runs
SGLang's scheduler (SGLang starts its schedulers in processes of their own: the
environment variable reaches them, the call must be made there too, e.g. from the
launcher script or a ``sitecustomize``).

- ``group``: SGLang's ``group_concurrent_contiguous`` (defined in
  ``sglang/srt/disaggregation/common/utils.py``, imported *by name* into the Mooncake,
  NIXL, MoRI and Ascend backends' ``conn.py``) becomes corun's, rebound in the defining
  module and in every backend module already imported; a backend imported later takes it
  from the defining module. Results are equal (but where ``np.diff`` wraps from the
  dtype's maximum to its minimum, which page indices never do).
- ``place``: at the prefill side's batch allocation (``alloc_for_extend`` ->
  ``alloc_paged_token_slots_extend`` -> ``PagedTokenToKVPoolAllocator.alloc_extend``),
  when the decode side's pages of every request in the batch are known
  (``req.disagg_kv_sender.kv_mgr.transfer_infos[req.bootstrap_room]``, its
  ``dst_kv_indices``), the front of the allocator's free list is reordered
  (``corun.adapters.sglang_place_front``, the batch's destination pages in batch order)
  so that SGLang's own ``alloc_extend`` hands each request pages that mirror the decode
  side's runs. SGLang's allocator and its bookkeeping are untouched; a shortage is left to
  SGLang (``alloc_extend`` returns ``None``, as it would).

Never breaks serving: every hook goes through ``corun._guard.guarded``: an exception in
corun's part is logged once, counted (``errors``, ``<hook>_errors``) and the call goes
SGLang's own way. On any SGLang other than 0.5.23 nothing is patched (logged once;
``counters()["unsupported_version"]`` is 1).

Counters: ``rebinds`` (modules whose ``group_concurrent_contiguous`` is corun's now),
``placed`` (requests whose pages were placed), ``fallback`` (requests left to SGLang's
order: their decode pages unknown, a shortage, or placement found nothing better),
``errors`` (hooks that failed and went SGLang's way).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import logging
import os
import sys
import threading
from typing import Any, Dict, Iterable, List, Optional

import numpy as np

import corun

from . import adapters
from ._guard import Counters, guarded

__all__ = ["FEATURES", "SUPPORTED", "counters", "disable", "enable", "enable_from_env", "enabled"]

log = logging.getLogger("corun")

SUPPORTED = ("0.5.23",)
FEATURES = ("group", "place")
ENV = "CORUN_SGLANG"

_UTILS = "sglang.srt.disaggregation.common.utils"
# The modules that import the helper by name (checked in the 0.5.23 wheel).
GROUP_MODULES = (
    _UTILS,
    "sglang.srt.disaggregation.mooncake.conn",
    "sglang.srt.disaggregation.nixl.conn",
    "sglang.srt.disaggregation.mori.conn",
    "sglang.srt.disaggregation.ascend.conn",
)
_ALLOCATION = "sglang.srt.mem_cache.allocation"
_PAGED = "sglang.srt.mem_cache.allocator.paged"

_counters = Counters("rebinds", "placed", "fallback", "unsupported_version")
_lock = threading.Lock()
# What enable() replaced: (module or class, attribute name, SGLang's own value).
_patched: List[tuple] = []
_features: set = set()
# The batch whose allocation is under way in this thread (set by the allocation hook,
# read by the alloc_extend hook).
_current = threading.local()


def counters() -> Dict[str, int]:
    """A copy of the plugin's counters (see the module docs)."""
    return _counters.snapshot()


def enabled() -> frozenset:
    """The features now enabled."""
    return frozenset(_features)


def _sglang_version() -> Optional[str]:
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return None


def _parse(features) -> set:
    if isinstance(features, str):
        features = [f for f in features.replace(" ", "").lower().split(",") if f]
    elif not isinstance(features, (list, tuple, set, frozenset)):
        raise TypeError(f"features must be a string or a list of strings, got {type(features).__name__}")
    chosen: set[str] = set()
    for f in features:
        if f == "all":
            chosen.update(FEATURES)
        elif f in FEATURES:
            chosen.add(f)
        else:
            raise ValueError(f"features: unknown feature {f!r}; expected some of {FEATURES} or 'all'")
    return chosen


def enable_from_env(env: Optional[Dict[str, str]] = None) -> frozenset:
    """Enables the features named in ``CORUN_SGLANG`` (``all``, ``group``, ``place``,
    comma-separated); unset or empty: nothing. Returns the features enabled."""
    value = (os.environ if env is None else env).get(ENV, "")
    return enable(features=value) if value.strip() else enabled()


def enable(features: Iterable[str] = FEATURES) -> frozenset:
    """Patches SGLang for ``features`` (any of ``"group"``, ``"place"``, or ``"all"``; a
    comma-separated string too). Idempotent. On an SGLang other than 0.5.23, or none,
    patches nothing and logs it once. Returns the features enabled."""
    chosen = _parse(features)
    with _lock:
        version = _sglang_version()
        if version not in SUPPORTED:
            _counters.add("unsupported_version", 1 - _counters.get("unsupported_version"))
            if _counters.first_time("version"):
                log.warning("corun: SGLang %s is not one corun was tested with (%s): nothing patched",
                            version or "(not installed)", ", ".join(SUPPORTED))
            return enabled()
        for feature in sorted(chosen - _features):
            if (_enable_group if feature == "group" else _enable_place)():
                _features.add(feature)
    return enabled()


def disable() -> None:
    """Puts back every SGLang function the plugin replaced (counters are kept)."""
    with _lock:
        ours = {id(new) for _, _, _, new in _patched}
        own = {name: old for _, name, old, _ in _patched}
        for owner, name, old, _ in reversed(_patched):
            setattr(owner, name, old)
        # Backends imported while the drop-in was on took corun's from the defining module.
        for modname in GROUP_MODULES:
            mod = sys.modules.get(modname)
            f = getattr(mod, "group_concurrent_contiguous", None)
            if mod is not None and id(f) in ours:
                setattr(mod, "group_concurrent_contiguous", own["group_concurrent_contiguous"])
        _patched.clear()
        _features.clear()


def _patch(owner, name, new) -> None:
    _patched.append((owner, name, getattr(owner, name), new))
    setattr(owner, name, new)


def _import(modname: str):
    """The module, or None (logged once) when it cannot be imported here."""
    try:
        return importlib.import_module(modname)
    except Exception:  # an absent dependency of SGLang's (torch, say): nothing to patch
        if _counters.first_time(f"import {modname}"):
            log.warning("corun: cannot import %s: not patched", modname, exc_info=True)
        return None


# --- group: the drop-in -------------------------------------------------------------


def _enable_group() -> bool:
    utils = _import(_UTILS)
    if utils is None:
        return False
    own = utils.group_concurrent_contiguous
    drop_in = guarded(_counters, "group", own)(corun.group_concurrent_contiguous)
    for modname in GROUP_MODULES:
        mod = utils if modname == _UTILS else sys.modules.get(modname)
        if mod is not None and getattr(mod, "group_concurrent_contiguous", None) is own:
            _patch(mod, "group_concurrent_contiguous", drop_in)
            _counters.add("rebinds")
    return True


# --- place: placement at the prefill side's batch allocation ------------------------


def _enable_place() -> bool:
    allocation, paged = _import(_ALLOCATION), _import(_PAGED)
    if allocation is None or paged is None:
        return False
    cls = paged.PagedTokenToKVPoolAllocator
    own_slots, own_extend = allocation.alloc_paged_token_slots_extend, cls.alloc_extend

    slots_signature = inspect.signature(own_slots)
    find_batch = guarded(_counters, "place", lambda *a, **k: None)(
        lambda args, kwargs: slots_signature.bind(*args, **kwargs).arguments.get("batch"))

    @functools.wraps(own_slots)
    def alloc_paged_token_slots_extend(*args, **kwargs):
        # Only records the batch for alloc_extend below.
        previous = getattr(_current, "batch", None)
        _current.batch = find_batch(args, kwargs)
        try:
            return own_slots(*args, **kwargs)
        finally:
            _current.batch = previous

    signature = inspect.signature(own_extend)

    def place_batch(self, batch, args, kwargs):
        given = signature.bind(self, *args, **kwargs).arguments
        _place_batch(self, batch, given["prefix_lens_cpu"], given["seq_lens_cpu"],
                     given["extend_num_tokens"])

    place = guarded(_counters, "place", lambda *a, **k: None)(place_batch)

    @functools.wraps(own_extend)
    def alloc_extend(self, *args, **kwargs):
        batch = getattr(_current, "batch", None)
        if batch is not None and type(self) is cls:
            place(self, batch, args, kwargs)
        return own_extend(self, *args, **kwargs)

    # ALLOC_EXTEND_FUNCS and alloc_for_extend look the function up in the module at call time.
    _patch(allocation, "alloc_paged_token_slots_extend", alloc_paged_token_slots_extend)
    _patch(cls, "alloc_extend", alloc_extend)
    return True


def _decode_pages(req) -> Optional[np.ndarray]:
    """The decode side's pages for ``req`` (``dst_kv_indices`` of its room's transfer
    infos), or None when they are not known yet or the infos disagree."""
    kv_mgr = getattr(getattr(req, "disagg_kv_sender", None), "kv_mgr", None)
    infos = getattr(kv_mgr, "transfer_infos", {}).get(getattr(req, "bootstrap_room", None))
    pages = [np.asarray(i.dst_kv_indices) for i in (infos or {}).values() if not i.is_dummy]
    if not pages or any(not np.array_equal(p, pages[0]) for p in pages[1:]):
        return None
    return pages[0]


def batch_destinations(batch, prefix_lens_cpu, seq_lens_cpu, page_size) -> Optional[np.ndarray]:
    """The decode pages that pair with the new pages ``alloc_extend`` takes for ``batch``,
    in the order it takes them (batch order, each request's pages in sequence order), or
    None when some request's pairs are unknown.

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
            continue
        dst = _decode_pages(req)
        if dst is None:
            return None
        skip = int(getattr(req, "disagg_decode_prefix_len", 0) or 0) // page_size
        if first - skip < 0 or end - skip > len(dst):
            return None
        parts.append(dst[first - skip:end - skip].astype(np.int64))
    return np.concatenate(parts) if parts else None


def _place_batch(allocator, batch, prefix_lens_cpu, seq_lens_cpu, extend_num_tokens) -> None:
    """Reorders ``allocator.free_pages`` for ``batch`` (see the module docs); raises only
    before changing it, but for the merge of staged frees that SGLang's ``alloc_extend``
    makes in this same call under the same condition."""
    n_reqs = len(batch.reqs)
    dst = batch_destinations(batch, prefix_lens_cpu, seq_lens_cpu, allocator.page_size)
    if dst is None:
        _counters.add("fallback", n_reqs)
        return
    # alloc_extend merges and sorts the staged frees when this bound exceeds the free
    # list (which would undo placement); make that merge first, as it would.
    bound = int(extend_num_tokens) // allocator.page_size + n_reqs + 1
    if bound > len(allocator.free_pages):
        allocator.merge_and_sort_free()
    if len(dst) > len(allocator.free_pages):
        _counters.add("fallback", n_reqs)  # a shortage: SGLang's alloc_extend returns None
        return
    stats = adapters.sglang_place_front(allocator, dst)
    _counters.add("fallback" if stats is None or stats.get("fallback") else "placed", n_reqs)
