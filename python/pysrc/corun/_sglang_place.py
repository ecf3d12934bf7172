"""The SGLang plugin's ``place`` feature (the module docs of ``corun.sglang_plugin``):
its hooks on SGLang's batch allocation, paged (``alloc_paged_token_slots_extend`` notes
the batch, ``PagedTokenToKVPoolAllocator.alloc_extend`` places) and with 1-token pages
(``alloc_for_extend`` notes it, ``TokenToKVPoolAllocator.alloc`` places), within the
budget per call (``corun._budget``); the free list's reordering is
``corun.adapters.sglang_place_batch``'s. Its state is the plugin's lifecycle
(``_sglang_life.LIFE``)."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, List, Optional

import numpy as np
import numpy.typing as npt

from . import adapters
from ._budget import now_ns
from ._guard import guarded
from ._sglang_life import _ALLOCATION, _PAGED, _TOKEN, LIFE, counters, current, import_module, register

__all__ = ["batch_destinations", "register_place", "register_tokens"]


def _noting(function: Callable[..., Any], slot: str) -> Callable[..., Any]:
    """An AROUND hook on ``function`` (which takes the batch) that only notes its
    ``batch`` argument for this thread in ``current.<slot>`` while it runs."""
    signature = inspect.signature(function)
    find_batch = guarded(counters, "place", lambda *a, **k: None)(
        lambda args, kwargs: signature.bind(*args, **kwargs).arguments.get("batch")
    )

    @functools.wraps(function)
    def note(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        previous = getattr(current, slot, None)
        setattr(current, slot, find_batch(args, kwargs))
        try:
            return original(*args, **kwargs)
        finally:
            setattr(current, slot, previous)

    return note


def _placing(cls: Any, slot: str, place_batch: Callable[[Any, Any, Any, Any], None], once: bool) -> Callable[..., Any]:
    """An AROUND hook on ``cls``'s allocation method: with a batch noted in
    ``current.<slot>`` and an allocator of ``cls`` itself (a subclass, interleaved or
    SWA, may hand pages out its way), ``place_batch(allocator, batch, args, kwargs)``
    (guarded) before SGLang's own allocation, which is timed for the budget; ``once``:
    the batch is forgotten at its first allocation (any other goes SGLang's way)."""
    place = guarded(counters, "place", lambda *a, **k: None)(place_batch)

    def place_then_alloc(original: Callable[..., Any], allocator: Any, *args: Any, **kwargs: Any) -> Any:
        batch = getattr(current, slot, None)
        if batch is None:
            return original(allocator, *args, **kwargs)
        if once:
            setattr(current, slot, None)
        if type(allocator) is not cls:
            # Not inert in silence: said once per class, each request counted.
            LIFE.turned_off("place", f"{type(allocator).__name__} is not {cls.__name__}: its batches go SGLang's way")
            counters.add("fallback", len(getattr(batch, "reqs", ())))
            return original(allocator, *args, **kwargs)
        place(allocator, batch, args, kwargs)
        # SGLang's own allocation of the batch: what the budget is a share of.
        start, pages = now_ns(), getattr(current, "pages", 0)
        try:
            return original(allocator, *args, **kwargs)
        finally:
            LIFE.budget.stack(pages, now_ns() - start)

    return place_then_alloc


def register_place(hooks: Any) -> bool:
    allocation, paged = import_module(_ALLOCATION), import_module(_PAGED)
    if allocation is None or paged is None:
        return False
    cls = paged.PagedTokenToKVPoolAllocator
    signature = inspect.signature(cls.alloc_extend)

    def place_batch(allocator: Any, batch: Any, args: Any, kwargs: Any) -> None:
        given = signature.bind(allocator, *args, **kwargs).arguments
        # alloc_extend merges and sorts the staged frees when this bound exceeds the free
        # list (which would undo placement); the same merge first, as it would.
        bound = int(given["extend_num_tokens"]) // allocator.page_size + len(batch.reqs) + 1
        _place_batch(allocator, batch, given["prefix_lens_cpu"], given["seq_lens_cpu"], bound)

    register(hooks, f"{_ALLOCATION}.alloc_paged_token_slots_extend",
             _noting(allocation.alloc_paged_token_slots_extend, "batch"), "AROUND", allocation,
             "alloc_paged_token_slots_extend")
    register(hooks, f"{_PAGED}.PagedTokenToKVPoolAllocator.alloc_extend",
             _placing(cls, "batch", place_batch, once=False), "AROUND", cls, "alloc_extend")
    register_tokens(hooks, allocation)
    return True


def register_tokens(hooks: Any, allocation: Any) -> None:
    """Placement with 1-token pages (``TokenToKVPoolAllocator``): see the module docs."""
    token = import_module(_TOKEN)
    if token is None:
        return
    cls = token.TokenToKVPoolAllocator
    signature = inspect.signature(cls.alloc)

    def place_tokens(allocator: Any, batch: Any, args: Any, kwargs: Any) -> None:
        need = int(signature.bind(allocator, *args, **kwargs).arguments["need_size"])
        # alloc merges the staged frees when short (with need_sort): the same merge first.
        bound = need if allocator.need_sort else -1
        _place_batch(allocator, batch, batch.prefix_lens, batch.seq_lens_cpu, bound, need)

    register(hooks, f"{_ALLOCATION}.alloc_for_extend", _noting(allocation.alloc_for_extend, "tokens"),
             "AROUND", allocation, "alloc_for_extend")
    register(hooks, f"{_TOKEN}.TokenToKVPoolAllocator.alloc", _placing(cls, "tokens", place_tokens, once=True),
             "AROUND", cls, "alloc")


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


def _place_batch(allocator: Any, batch: Any, prefix_lens_cpu: Any, seq_lens_cpu: Any, bound: int,
                 need: Optional[int] = None) -> None:
    """Reorders ``allocator.free_pages`` for ``batch`` (see the module docs); raises only
    before changing it, but for the merge of staged frees that SGLang's allocation makes
    in this same call under the same condition (``bound`` pages more than the free list
    holds). ``need``: the pages the allocation takes, when it must equal the batch's."""
    current.pages = 0
    LIFE.budget.run(lambda: _place_within(allocator, batch, prefix_lens_cpu, seq_lens_cpu, bound, need))


def _place_within(allocator: Any, batch: Any, prefix_lens_cpu: Any, seq_lens_cpu: Any, bound: int,
                  need: Optional[int]) -> int:
    """:func:`_place_batch`'s work; returns the pages it read."""
    n_reqs = len(batch.reqs)
    parts = batch_destinations(batch, prefix_lens_cpu, seq_lens_cpu, allocator.page_size)
    if parts is None or not sum(len(p) for p in parts) or (need is not None and sum(len(p) for p in parts) != need):
        counters.add("fallback", n_reqs)
        return 0
    sizes = [len(p) for p in parts]
    total = sum(sizes)
    current.pages = total
    # Each placed page is read twice (the request's, its own), the batch together twice more.
    pages = LIFE.budget.pages(total, lambda k: 4 * k)
    if pages == 0:
        counters.add("fallback", n_reqs)  # no budget for even one page (or 0: placement off)
        return 0
    if bound > len(allocator.free_pages):
        allocator.merge_and_sort_free()
    runs = adapters.sglang_place_batch(allocator, parts, pages=None if pages >= total else pages)
    if runs is None:
        counters.add("fallback", n_reqs)  # a shortage: SGLang's alloc_extend returns None
        return 4 * pages
    # The requests placed whole lie before the budget's end; the one across it, by its head.
    ends = np.cumsum(sizes).tolist()
    for (own, placed), end, size in zip(runs, ends, sizes):
        if placed >= own:
            counters.add("fallback")
        else:
            counters.add("placed" if end <= pages or not size else "partial")
    return 4 * pages
