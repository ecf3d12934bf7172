"""corun inside vLLM: a vLLM general plugin (entry point ``corun`` in the group
``vllm.general_plugins``), off unless ``CORUN_VLLM`` names its features.

    CORUN_VLLM=all vllm serve ...                # every feature
    CORUN_VLLM=place,nixl_order vllm serve ...   # a selection; unset, "" or "off": nothing

Features (each patches vLLM's own code path; nothing else changes):

- ``place``: placement in NIXL pull mode. When the decode side allocates the blocks a
  request will pull (``KVCacheManager.allocate_slots`` with
  ``num_external_computed_tokens`` and ``kv_transfer_params["remote_block_ids"]``), the
  blocks that pair run for run with the prefill side's are put at the front of the free
  queue (``corun.adapters.vllm_place_front``) right before
  ``SingleTypeKVCacheManager.allocate_external_computed_blocks`` calls
  ``BlockPool.get_new_blocks``, which then hands them out with its own bookkeeping.
- ``nixl_order``: each NIXL transfer's (local, remote) descriptor ids are listed so that
  runs descending on both sides (vLLM's free order makes them) ascend: NIXL merges two
  descriptors only when both sides are adjacent in the same order, so it then merges
  those runs too. The set of pairs is unchanged (:func:`nixl_order`).
- ``mooncake``: the Mooncake connector's grouping (``group_concurrent_contiguous``,
  called by ``MooncakeConnectorWorker._build_transfer_params``, which then posts each
  group as one descriptor) is corun's, which also groups runs that descend on both sides
  (vLLM's free order makes them; their bytes are contiguous on both sides too), each
  listed ascending: the same (local, remote) pairs in fewer groups (:func:`mooncake_groups`).
  With ``place`` on, the decode side allocates once it has the prefill side's blocks
  (``corun._vllm_mooncake``) and places against them.
- ``moriio``: the MoRIIO connector's block merge
  (``MoRIIOConnectorWorker.merge_contiguous_blocks``, which sorts a transfer's blocks
  and merges the neighbours) is ``corun.merge_contiguous_blocks``, which returns the
  same lists.

Only the vLLM versions in :data:`TESTED` are patched; on any other, nothing is patched
and that is logged once. Every hook goes through :func:`corun._guard.guarded`: a failure
inside corun is logged once, counted (``errors``, ``<hook>_errors``) and that call goes
vLLM's own way. :func:`counters` reads what the plugin did. The lifecycle (features,
version gate, patch record, counters, the WARNING line saying which features are on) is
``corun._plugin``'s, shared with the SGLang plugin; ``register`` / ``unregister`` are
the older names of :func:`enable` / :func:`disable`.

Beside other plugins: see ``corun._plugin.Lifecycle.patch`` and ``replace`` (hooks that
wrap run beside another plugin's; ``mooncake`` and ``moriio`` stay off over one).
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Tuple, Union

import numpy as np

from . import _corun, adapters
from ._guard import guarded, stack_way
from ._plugin import Hooked
from ._vllm_life import ENV, FEATURES, LIFE as _LIFE, TESTED
from . import _vllm_nixl, _vllm_place
from ._vllm_place import _install_place, _place, _place_safely, _posted_direction  # noqa: F401

__all__ = [
    "ENV",
    "FEATURES",
    "TESTED",
    "counters",
    "disable",
    "enable",
    "enabled",
    "enabled_features",
    "mooncake_groups",
    "nixl_order",
    "place_times",
    "register",
    "reset_counters",
    "unregister",
]

log = logging.getLogger("corun")

# The lifecycle (features, tested versions, patches, counters, budget) lives in
# `_vllm_life`, placement's hooks in `_vllm_place`: this module is the plugin's face.
_COUNTERS = _LIFE.counters


def counters() -> Dict[str, int]:
    """What the plugin did since start (or :func:`reset_counters`), every key present
    from the start: ``placed`` / ``partial`` / ``fallback`` (allocations placed by corun
    / placed as far as the budget went, their first runs / left to vLLM's order),
    ``errors`` (calls a corun hook failed and vLLM's way served; per
    hook: ``place_errors``, ``nixl_order_errors``, ``mooncake_errors``,
    ``moriio_errors``), ``nixl_transfers`` and ``nixl_before`` / ``nixl_after`` (their
    descriptors after NIXL's merge rule in vLLM's order / in corun's),
    ``mooncake_calls``, ``moriio_calls`` / ``moriio_vllm`` (merges corun answered /
    routed to vLLM's own function), ``unsupported_version`` (1 when vLLM is not a
    tested version)."""
    return _COUNTERS.snapshot()


def reset_counters() -> None:
    """Sets every counter back to 0, and forgets the placement calls' times."""
    _COUNTERS.reset()
    _LIFE.budget.reset()


def place_times() -> Dict[str, float]:
    """The placement calls' CPU times (the scheduler thread's) since start or
    :func:`reset_counters`: ``calls``, ``p50_us``, ``p99_us``, ``max_us``. Each call is
    bounded by ``CORUN_VLLM_BUDGET_US`` (``corun._budget``)."""
    return _LIFE.budget.times()


def enabled_features(value: Union[None, str, Iterable[str]] = None) -> FrozenSet[str]:
    """The features ``value`` (default: the environment's ``CORUN_VLLM``) names: a
    comma-separated list of :data:`FEATURES`, or ``all``; unset, empty, ``0``, ``off``:
    none. An unknown name, or ``off`` beside another, is a ``ValueError`` naming the
    variable and its value (a configuration error, raised before anything is patched)."""
    return _LIFE.parse(value)


def enabled() -> FrozenSet[str]:
    """The features now on."""
    return frozenset(_LIFE.on)


def enable(features: Union[None, str, Iterable[str]] = None) -> FrozenSet[str]:
    """vLLM's entry point: patches vLLM for ``features`` (default: from ``CORUN_VLLM``,
    see :func:`enabled_features`) and returns those of them that are on. Safe to call
    again (vLLM loads plugins in every process, maybe more than once): a feature is
    patched once. On a vLLM version not in :data:`TESTED`, or without vLLM, patches
    nothing and logs that once. A feature turned on is said in one WARNING line."""
    wanted = enabled_features(features)
    if not wanted:
        return frozenset()
    _LIFE.budget.configure()  # a bad CORUN_VLLM_BUDGET_US: ValueError, nothing patched
    _vllm_place.configure()  # a bad CORUN_VLLM_PLACE_CACHED: the same
    with _LIFE.lock:
        if not _LIFE.version_ok():
            return frozenset()
        done = set()
        for feature, install in (
            ("place", _install_place),
            ("nixl_order", lambda: _vllm_nixl.install(_ordered_safely)),
            ("mooncake", _install_mooncake),
            ("moriio", _install_moriio),
        ):
            if feature not in wanted or feature in _LIFE.on:
                continue
            if _LIFE.without_time(feature):
                continue
            mark = _LIFE.mark()
            try:
                install()
            except Hooked as e:  # corun would stand in for another plugin's hook
                _LIFE.restore(mark)
                _LIFE.turned_off(feature, str(e))
                continue
            except Exception as e:
                # A vLLM module the feature needs did not import (e.g. an optional
                # dependency): the feature stays off, vLLM unpatched for it.
                _LIFE.restore(mark)
                _LIFE.turned_off(feature, f"it could not be installed: {type(e).__name__}: {e}", exc_info=True)
                continue
            done.add(feature)
        _LIFE.turned_on(done)
        return wanted & frozenset(_LIFE.on)


def disable() -> None:
    """Restores every patched vLLM function (for tests and harnesses; a server never
    needs it) and takes placement's queue mirrors off the pools it placed in
    (:func:`corun.adapters.forget_mirrors`): no attribute of corun's is left on them
    (they pickle and deep-copy while the plugin is on too, the copy vLLM's own), and
    its ordering off the NIXL agents of connector workers made while it was on (they post
    in vLLM's order again)."""
    with _LIFE.lock:
        _LIFE.restore()
        _LIFE.on.clear()
        adapters.forget_mirrors()
        _vllm_nixl.unwrap_agents()
        _vllm_place.SORTING["moriio"] = False  # a MoRIIO scheduler made later says so again


#: The older names of :func:`enable` and :func:`disable` (vLLM's docs call a general
#: plugin's entry point ``register``).
register = enable
unregister = disable


# -- nixl_order -------------------------------------------------------------------------


def _merged(local: np.ndarray, remote: np.ndarray) -> int:
    """Descriptors after NIXL's merge rule: consecutive entries merge when both ids step
    by +1 (corun's ascending runs)."""
    return _corun.count_runs(local, remote)


def nixl_order(local: Any, remote: Any) -> Tuple[Any, Any]:
    """The same (local, remote) pairs, each run that descends on both sides listed
    ascending (the runs stay in their order): NIXL's merge rule then takes every
    either-direction run as one descriptor. Returns the type given (lists or arrays);
    unequal lengths: ``ValueError`` naming them."""
    lo = np.asarray(local, dtype=np.int64)
    re = np.asarray(remote, dtype=np.int64)
    if lo.shape != re.shape or lo.ndim != 1:
        raise ValueError(f"local and remote must be 1-D of one length, got {lo.shape} and {re.shape}")
    n = len(lo)
    if n < 2:
        return local, remote
    ls, rs, lens = _corun.runs(lo, re, direction="either")
    starts = np.zeros(len(lens), dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    # A run descends when its second entry is one below its first.
    down = (lens > 1) & (lo[np.minimum(starts + 1, n - 1)] == lo[starts] - 1)
    if not down.any():
        return local, remote
    ls = ls.astype(np.int64)
    rs = rs.astype(np.int64)
    step = np.where(down, 1 - lens, 0)  # a descending run's lowest id is start - (len - 1)
    offsets = np.arange(n, dtype=np.int64) - np.repeat(starts, lens)
    new_l = np.repeat(ls + step, lens) + offsets
    new_r = np.repeat(rs + step, lens) + offsets
    if isinstance(local, np.ndarray):
        return new_l.astype(local.dtype, copy=False), new_r.astype(np.asarray(remote).dtype, copy=False)
    return new_l.tolist(), new_r.tolist()


def _ordered(local: Any, remote: Any) -> Tuple[Any, Any]:
    new_l, new_r = nixl_order(local, remote)
    before = _merged(np.asarray(local, dtype=np.int64), np.asarray(remote, dtype=np.int64))
    after = before if new_l is local else _merged(np.asarray(new_l, np.int64), np.asarray(new_r, np.int64))
    _COUNTERS.add("nixl_transfers")
    _COUNTERS.add("nixl_before", before)
    _COUNTERS.add("nixl_after", after)
    return new_l, new_r


_ordered_safely = guarded(_COUNTERS, "nixl_order", lambda local, remote: (local, remote))(_ordered)


# -- mooncake ---------------------------------------------------------------------------


def _install_mooncake() -> None:
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake import mooncake_connector as mc  # type: ignore[import-not-found, unused-ignore]

    own = mc.group_concurrent_contiguous
    vllms = stack_way(own)  # its exceptions are vLLM's: passed on once, not counted

    @functools.wraps(own)
    def corun_group(src_indices: Any, dst_indices: Any) -> Any:
        if len(src_indices) != len(dst_indices):
            return vllms(src_indices, dst_indices)  # outside corun's contract: vLLM's answer
        groups = mooncake_groups(src_indices, dst_indices)
        _COUNTERS.add("mooncake_calls")
        _COUNTERS.add("mooncake_before", _corun.count_runs(src_indices, dst_indices))
        _COUNTERS.add("mooncake_after", len(groups[0]))
        return groups

    _LIFE.replace(mc, "group_concurrent_contiguous", guarded(_COUNTERS, "mooncake", own)(corun_group))


def mooncake_groups(src: Any, dst: Any) -> Tuple[List[List[int]], List[List[int]]]:
    """``(src_groups, dst_groups)`` as vLLM's ``group_concurrent_contiguous`` returns them,
    but with runs that descend on both sides grouped too, each group ascending on both
    sides: every ``(src[i], dst[i])`` pair is in exactly one group, at the same offset of
    its two lists, and the groups are never more than vLLM's (``corun.runs(...,
    direction="either")``). Unequal lengths: ``ValueError``."""
    s_starts, d_starts, lengths = _corun.runs(src, dst, direction="either")
    if len(lengths) == 0:
        return [], []
    s_first = np.asarray(s_starts, dtype=np.int64)
    d_first = np.asarray(d_starts, dtype=np.int64)
    n = np.asarray(lengths, dtype=np.int64)
    pos = np.cumsum(n) - n
    src_arr = np.asarray(src, dtype=np.int64)
    # A run of two or more descends when its second page is below its first.
    nxt = src_arr[np.minimum(pos + 1, len(src_arr) - 1)]
    down = (n > 1) & (nxt < s_first)
    s_lo = np.where(down, s_first - (n - 1), s_first).tolist()
    d_lo = np.where(down, d_first - (n - 1), d_first).tolist()
    counts = n.tolist()
    return ([list(range(a, a + k)) for a, k in zip(s_lo, counts)],
            [list(range(b, b + k)) for b, k in zip(d_lo, counts)])


# -- moriio -----------------------------------------------------------------------------


# vLLM's merge computes in int64 and wraps; corun's is exact. They agree whenever every
# output value (merged local and remote offsets, merged sizes) is below 2^62 in
# magnitude. Why: int64 addition is exact modulo 2^64, so a wrapped merged size is the
# exact one whenever that fits int64 (corun raises where it does not); what wrapping can
# change is a merge: a difference of two neighbours' offsets that is a size plus or minus
# 2^64. Where corun does not merge neighbours i and i+1, offset i+1 starts an output
# segment and offset i is that of the segment before plus its size less size i, so such a
# difference needs an output value of at least 2^62. A bound on the output (short when
# blocks merge) thus replaces a pass over the input.
_EXACT = 2**62


def _is_vllms(merged: Tuple[List[int], List[int], List[int]], local_sorted: bool) -> bool:
    """Whether corun's exact ``merged`` is what vLLM's wrapping int64 code returns.
    ``local_sorted``: the merged local offsets ascend (they are sorted unless
    ``assume_sorted``), so their ends bound them and that column needs no pass."""
    local, remote, sizes = merged
    columns: Tuple[List[int], ...] = merged
    if local_sorted:
        if not (-_EXACT < local[0] and local[-1] < _EXACT):
            return False
        columns = (remote, sizes)
    return all(-_EXACT < min(column) and max(column) < _EXACT for column in columns)


def _moriio_merge(own: Callable[..., Any], worker: Any, offsets_local: Any, offsets_remote: Any, sizes: Any,
                  assume_sorted: Any = False) -> Any:
    """MoRIIO's merge with vLLM's answer on every input: corun's where corun reads the
    input as vLLM does and no int64 wraps in vLLM's code, vLLM's own (``own``) otherwise.

    Only three lists of one length, at least one block, and a bool flag go to corun
    (checks of O(1)); any other input (tuples, arrays, generators, an empty local list
    with the others not) is vLLM's to answer, conversions and exceptions and all. corun
    refuses (``TypeError``, ``OverflowError``) what it does not read as an int: floats,
    ``np.float64``, ``np.bool_``, digit strings, ``Decimal``, ``Fraction``, objects with
    ``__int__`` only, values outside int64, which vLLM converts with ``int()`` or
    refuses its own way. An answer where vLLM's int64 arithmetic wraps is vLLM's too
    (:func:`_is_vllms`, a bound on the output)."""
    if not (
        type(offsets_local) is list
        and type(offsets_remote) is list
        and type(sizes) is list
        and type(assume_sorted) is bool
        and 0 < len(offsets_local) == len(offsets_remote) == len(sizes)
    ):
        merged = None
    else:
        try:
            merged = _corun.merge_contiguous_blocks(offsets_local, offsets_remote, sizes, assume_sorted)
        except (TypeError, OverflowError):
            merged = None
    if merged is None or not _is_vllms(merged, not assume_sorted):
        _COUNTERS.add("moriio_vllm")
        return own(worker, offsets_local, offsets_remote, sizes, assume_sorted)
    _COUNTERS.add("moriio_calls")
    return merged


def _install_moriio() -> None:
    from vllm.distributed.kv_transfer.kv_connector.v1.moriio import moriio_connector as mo  # type: ignore[import-not-found, unused-ignore]

    cls = mo.MoRIIOConnectorWorker
    own = cls.merge_contiguous_blocks
    vllms = stack_way(own)  # its exceptions are vLLM's: passed on once, not counted

    @functools.wraps(own)
    def corun_merge(self: Any, offsets_local: Any, offsets_remote: Any, sizes: Any, assume_sorted: Any = False) -> Any:
        return _moriio_merge(vllms, self, offsets_local, offsets_remote, sizes, assume_sorted)

    _LIFE.replace(cls, "merge_contiguous_blocks", guarded(_COUNTERS, "moriio", own)(corun_merge))
