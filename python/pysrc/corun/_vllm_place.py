"""The vLLM plugin's ``place`` feature: placement in NIXL pull mode, hooked where vLLM's
decode side allocates the blocks a request will pull (``KVCacheManager.allocate_slots``
notes the request, ``allocate_external_computed_blocks`` its KV cache group,
``BlockPool.get_new_blocks`` places and allocates; ``BlockPool.__init__`` mirrors the
new pool's free queue, so that no step pays for that), within the budget per call
(``corun._budget``); the queue side (the mirror of vLLM's free queue and the relinking)
is ``corun.adapters.vllm_place_front``'s. The whole of vLLM placement on the Python side
is these two modules; its state is the plugin's lifecycle (``_vllm_life.LIFE``: counters,
budget) and, per queue, its mirror."""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Literal, Optional

import numpy as np

from . import _vllm_mooncake, adapters
from ._budget import now_ns
from ._guard import guarded
from ._vllm_life import LIFE as _LIFE

_COUNTERS = _LIFE.counters
# The request whose external blocks are being allocated on this thread (set by the
# allocate_slots hook, read where get_new_blocks is called).
_local = threading.local()


def _remote_for(request: Any) -> Optional[Any]:
    params = getattr(request, "kv_transfer_params", None)
    if not params or not params.get("do_remote_prefill"):
        return None
    return params.get("remote_block_ids") or None


def _remote_group(remote: Any, group_id: int) -> Optional[Any]:
    """The remote ids of KV cache group ``group_id`` (as given: not copied, a request's
    list can hold a million ids): ``remote_block_ids`` is one list per group, or (vLLM's
    tests, one group) a flat list."""
    if len(remote) and isinstance(remote[0], (list, tuple, np.ndarray)):
        return remote[group_id] if group_id < len(remote) else None
    return remote if group_id == 0 else None


def _place(block_pool: Any, remote_block_ids: Any, group_id: int, num_blocks: int,
           mooncake: bool = False) -> None:
    """Puts the blocks that pair with the request's remote ids first in the free queue,
    for the ``num_blocks`` that ``get_new_blocks`` is about to take, within the budget;
    the call's CPU time is recorded (:func:`place_times`). ``mooncake``: the request is
    the Mooncake connector's (see :func:`_posted_direction`)."""
    if num_blocks == 0:
        return
    _LIFE.budget.run(lambda: _place_within(block_pool, remote_block_ids, group_id, num_blocks, mooncake))


def _place_within(block_pool: Any, remote_block_ids: Any, group_id: int, num_blocks: int,
                  mooncake: bool = False) -> int:
    """:func:`_place`'s work; returns the blocks it read (request and window)."""
    remote = _remote_group(remote_block_ids, group_id)
    free = block_pool.get_num_free_blocks()
    if remote is None or num_blocks > len(remote) or num_blocks > free:
        # Not an allocation placement can pair (or one get_new_blocks refuses): vLLM's way.
        _COUNTERS.add("fallback")
        return 0

    def items(k: int, window: Callable[[int], int] = adapters.default_window) -> int:
        # In window ids' worth of CPU (measured here, per request block: 40 ns reading the
        # window, 180 placing in it, 350-750 relinking the block, 25 turning vLLM's ids
        # into an array): a placed block costs seven window ids, every block of the
        # request half of one; a partial call also counts the whole request (about
        # 140 ns a block left unplaced).
        return int(7 * k + min(window(k), free) + num_blocks // 2 + (3 * num_blocks if k < num_blocks else 0))

    window = adapters.default_window
    k = _LIFE.budget.pages(num_blocks, items)
    if k < num_blocks:
        # Past the budget, a shallower window places a longer head, and a longer head
        # saves more than the deeper window would (on vLLM's replays 2n + 64 kept 80-99%
        # of 4n + 64's saving): the one that places more blocks.
        shallow = _LIFE.budget.pages(num_blocks, lambda j: items(j, _shallow_window))
        if shallow > k:
            k, window = shallow, _shallow_window
    if k == 0:
        _COUNTERS.add("fallback")  # no budget for even one block (or 0: placement off)
        return 0
    # The new blocks are the request's last ones; the connector pairs the blocks it pulls
    # into with the remote ids' tail (a local prefix hit covers the head). (A remote block
    # twice gives no one-to-one pairing: vllm_place_front then leaves the queue as it is,
    # a plain fallback.)
    tail = np.asarray(remote[len(remote) - num_blocks :], dtype=np.int64)
    stats = adapters.vllm_place_front(block_pool, tail, direction=_posted_direction(mooncake), pages=k,
                                      window=window, cached=SETTINGS["cached"])
    _COUNTERS.add("fallback" if stats["fallback"] else "partial" if k < num_blocks else "placed")
    return items(k, window)


#: ``CORUN_VLLM_PLACE_CACHED`` (read by :func:`configure` at ``enable()``): ``1`` lets
#: placement take blocks that hold a cached prefix from its whole window
#: (``adapters.vllm_place_front(cached=True)``); unset, ``""`` or ``0`` (the default):
#: past the blocks vLLM hands out now only uncached ones, so prefix-cache hits are never
#: fewer than vLLM's.
CACHED_ENV = "CORUN_VLLM_PLACE_CACHED"
SETTINGS = {"cached": False}


def configure() -> None:
    """Reads :data:`CACHED_ENV`; any other value than unset, ``""``, ``0`` or ``1`` is a
    ``ValueError`` naming the variable and its value (raised before anything is patched)."""
    import os

    value = os.environ.get(CACHED_ENV, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"{CACHED_ENV}={value!r}: expected 0 or 1")
    SETTINGS["cached"] = value == "1"


def _shallow_window(n: int) -> int:
    """The window of a request placed past its budget: ``2n + 64``."""
    return 2 * n + 64


#: Set when this process builds vLLM's MoRIIO connector (its scheduler side) with
#: ``place`` on: the engine's one connector then sorts each transfer's blocks before it
#: merges neighbours (``disable()`` clears it).
SORTING = {"moriio": False}


def _posted_direction(mooncake: bool = False) -> Literal["ascending", "either"]:
    """The runs the connector will post for a placed request, by which placement judges
    it (kept only when it gives fewer than vLLM's own blocks): NIXL merges neighbours
    that ascend on both sides, and only with ``nixl_order`` on are runs that descend on
    both sides listed ascending for it to merge; the Mooncake connector's grouping
    (vLLM's) ascends too, corun's (``mooncake`` on) takes either direction; MoRIIO's
    merge (vLLM's and corun's alike) sorts the blocks first, so a run descending on both
    sides is one segment there too: either direction."""
    if mooncake:
        return "either" if "mooncake" in _LIFE.on else "ascending"
    return "either" if SORTING["moriio"] or "nixl_order" in _LIFE.on else "ascending"


def _note_moriio() -> None:
    """Marks MoRIIO's scheduler side being built (:data:`SORTING`), where vLLM's MoRIIO
    connector imports (its optional packages absent: no MoRIIO engine here)."""
    try:
        from vllm.distributed.kv_transfer.kv_connector.v1.moriio import moriio_connector as mo  # type: ignore[import-not-found, unused-ignore]
    except Exception:
        return
    init = mo.MoRIIOConnectorScheduler.__dict__["__init__"]

    @functools.wraps(init)
    def corun_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        SORTING["moriio"] = True

    _LIFE.patch(mo.MoRIIOConnectorScheduler, "__init__", corun_init)


def _is_mooncake(request: Any) -> bool:
    """Whether the request is the Mooncake connector's (its parameters name the prefill
    side's bootstrap server; NIXL's its host and port)."""
    params = getattr(request, "kv_transfer_params", None) or {}
    return "remote_bootstrap_addr" in params


def prepare(block_pool: Any) -> None:
    """Mirrors ``block_pool``'s free queue now (``adapters._mirror``), when vLLM makes the
    pool at the engine's start: the first placement would otherwise read the whole queue
    inside a scheduler step (4 ms for 60,000 blocks, measured here; 70 ms a million)."""
    adapters._mirror(block_pool)


# The stack's own way for a step that only reorders the free queue: leave it as it is.
_place_safely = guarded(_COUNTERS, "place", lambda *args: None)(_place)
_prepare_safely = guarded(_COUNTERS, "place", lambda block_pool: None)(prepare)
_remote_safely = guarded(_COUNTERS, "place", lambda request: None)(_remote_for)


def _install_place() -> None:
    from vllm.v1.core import single_type_kv_cache_manager as stm  # type: ignore[import-not-found, unused-ignore]
    from vllm.v1.core.block_pool import BlockPool  # type: ignore[import-not-found, unused-ignore]
    from vllm.v1.core.kv_cache_manager import KVCacheManager  # type: ignore[import-not-found, unused-ignore]

    allocate_slots = KVCacheManager.__dict__["allocate_slots"]
    allocate_external = stm.SingleTypeKVCacheManager.__dict__["allocate_external_computed_blocks"]
    get_new_blocks = BlockPool.__dict__["get_new_blocks"]
    pool_init = BlockPool.__dict__["__init__"]

    @functools.wraps(pool_init)
    def corun_pool_init(self: Any, *args: Any, **kwargs: Any) -> None:
        pool_init(self, *args, **kwargs)
        _prepare_safely(self)

    @functools.wraps(allocate_slots)
    def corun_allocate_slots(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        # The request is in hand only here; the managers below see its id alone.
        remote = _remote_safely(request)
        if remote is None:
            return allocate_slots(self, request, *args, **kwargs)
        outer = getattr(_local, "request", None)
        _local.request = (request.request_id, remote, _is_mooncake(request))
        try:
            return allocate_slots(self, request, *args, **kwargs)
        finally:
            _local.request = outer

    @functools.wraps(allocate_external)
    def corun_allocate_external(self: Any, request_id: str, *args: Any, **kwargs: Any) -> Any:
        pending = getattr(_local, "request", None)
        if pending is None or pending[0] != request_id:
            return allocate_external(self, request_id, *args, **kwargs)
        outer = getattr(_local, "group", None)
        _local.group = (self.block_pool, pending[1], self.kv_cache_group_id, pending[2])
        try:
            return allocate_external(self, request_id, *args, **kwargs)
        finally:
            _local.group = outer

    @functools.wraps(get_new_blocks)
    def corun_get_new_blocks(self: Any, num_blocks: int) -> Any:
        group = getattr(_local, "group", None)
        if group is not None and group[0] is self:
            # One allocation per group: later calls (e.g. a subclass's own) go vLLM's way.
            _local.group = None
            _place_safely(self, group[1], group[2], num_blocks, group[3])
            # vLLM's own allocation of the request: what the budget is a share of.
            start = now_ns()
            try:
                return get_new_blocks(self, num_blocks)
            finally:
                _LIFE.budget.stack(num_blocks, now_ns() - start)
        return get_new_blocks(self, num_blocks)

    _LIFE.patch(KVCacheManager, "allocate_slots", corun_allocate_slots)
    _LIFE.patch(stm.SingleTypeKVCacheManager, "allocate_external_computed_blocks", corun_allocate_external)
    _LIFE.patch(BlockPool, "get_new_blocks", corun_get_new_blocks)
    _LIFE.patch(BlockPool, "__init__", corun_pool_init)
    _note_moriio()
    try:
        _vllm_mooncake.install()
    except Exception:
        # vLLM's Mooncake connector does not import here (its optional packages: mooncake,
        # httpx, fastapi): placement serves the NIXL connector alone.
        pass
