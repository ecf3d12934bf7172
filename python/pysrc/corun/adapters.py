"""Placement (``corun.place``) plugged into the serving stacks' allocators, as a
deployment would patch them: the second side to allocate chooses pages that mirror the
first side's runs, so that a request moves in about as many transfers as the first side
has runs.

Each adapter only *reorders the front of the allocator's free list*: it puts the placed
pages first, in the order they pair with the first side's, and the allocator's own
allocation call (vLLM's ``BlockPool.get_new_blocks``, SGLang's ``alloc`` /
``alloc_extend``) then hands them out with its own bookkeeping (reference counts, cache
eviction, metrics) untouched. Placement reaches at most ``window`` pages deep into the
free list (a number, or a function of the request's pages; default:
:func:`default_window`), which bounds both its cost and how far it
departs from the allocator's order; where that order is also an eviction order (vLLM's
free queue is LRU), that is the knob for the cache hit rate.

- vLLM (NIXL pull mode: prefill returns ``remote_block_ids``, the decode side allocates
  after): ``vllm_place_front(block_pool, remote_block_ids)`` then
  ``block_pool.get_new_blocks(len(remote_block_ids))``.
- SGLang (the decode side allocates first and sends its pages; the prefill side
  allocates later, with ``dst_kv_indices`` known): ``sglang_place_front(allocator,
  dst_pages)`` then ``allocator.alloc(len(dst_pages) * page_size)`` (or
  ``alloc_extend``, which takes new pages from the front of ``free_pages`` in order);
  for a batch, ``sglang_place_batch(allocator, dst_pages_per_request)``, never worse
  for any request of it.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

from ._corun import VllmQueueMirror, VllmQueueTold, count_runs, place
from ._vllm_queue import move_front

if TYPE_CHECKING:
    from typing import Any, Callable, List, Literal, Optional, Sequence, Tuple, Union

    import numpy.typing as npt

    from ._corun import PlaceStats, _IndexArray

    # How deep placement reaches: a number of pages, or a function of the request's.
    _Window = Optional[Union[int, Callable[[int], int]]]

__all__ = ["default_window", "forget_mirrors", "head", "sglang_place_batch", "sglang_place_front", "sglang_window", "vllm_place_front"]


def default_window(n: int) -> int:
    """How deep into the free list placement reaches for a request of ``n`` pages: ``4n +
    64``. Deeper windows place more runs but cost more (reading vLLM's free queue, a
    linked list of Python objects, block by block, and sorting what was read). On vLLM's replays (``lab/replay.py
    --window``, the results files in ``python/README.md``): ``n + 64`` placed 100,362
    descriptors at p16 where ``4n + 64`` placed 82,657 (bound 72,802), and with 1-token
    pages it gained almost nothing (1.01x against 1.5x)."""
    return 4 * n + 64


def sglang_window(n: int) -> int:
    """SGLang's default window: exactly the request's ``n`` pages, so that placement only
    pairs the pages SGLang's own ``alloc`` would hand out. SGLang's P/D free list is sorted
    and taken from its front, an address-ordered sweep that keeps free pages contiguous;
    reaching deeper (``4n + 64``) fragmented it, and whole replays ended 2-10% *worse* than
    not placing with 1-token pages (``lab/replay.py``, issue 30). Within the front
    ``n`` pages the same pages leave the free list as without placement (its staged frees
    are sorted before reuse, so their order does not matter) and the allocator's state
    evolves exactly as it would."""
    return n


def _window(n: int, free: int, window: _Window, default: Callable[[int], int] = default_window) -> int:
    if window is None:
        window = default
    w = int(window(n)) if callable(window) else int(window)
    if w < n:
        raise ValueError(f"window must be at least the request's {n} pages, got {w}")
    return min(w, free)


# The stacks' objects (vLLM's ``BlockPool``, SGLang's allocator, a torch tensor) are `Any`:
# corun imports neither stack, and duck-types only the attributes it uses.
def vllm_place_front(
    block_pool: Any,
    remote_block_ids: _IndexArray,
    *,
    window: _Window = None,
    direction: Literal["ascending", "either"] = "either",
    pages: Optional[int] = None,
    cached: bool = False,
) -> PlaceStats:
    """Moves to the front of ``block_pool.free_block_queue`` (vLLM's
    ``FreeKVCacheBlockQueue``) the blocks that pair with ``remote_block_ids`` run for
    run, so that ``block_pool.get_new_blocks(len(remote_block_ids))`` returns them in
    order. Reads at most ``window`` blocks from the queue's front and, with prefix caching
    on, takes past the first ``len(remote_block_ids)`` only blocks that hold no cached
    prefix (so vLLM's prefix-cache hits are never fewer); the blocks stay free (and
    cached) until ``get_new_blocks`` takes them. Returns ``corun.place``'s stats;
    with ``fallback`` the queue is left as it was (so too when ``remote_block_ids``
    repeats an id: nothing to pair run for run). Not enough free blocks: ``ValueError``
    (as ``get_new_blocks`` raises).

    ``pages`` (default: all) places only the request's head, cut back to its last run
    boundary within that many ids (a time budget: see ``corun._budget``); the rest of the
    request takes the queue's own order after the placed blocks, and the whole request
    is kept so only when it has fewer runs (in ``direction``) than with the queue's own
    blocks; ``placed`` and ``own`` count the whole request either way.

    ``cached=True`` takes cached blocks past the first ``len(remote_block_ids)`` too (all
    of the window): more room where the prefix cache is worth little (the blocks vLLM
    would have evicted stay cached instead of those taken, so its hits can fall).

    A block is moved only if vLLM's own state says it is free: its ``ref_cnt`` is 0 and
    both neighbours link to it. If any chosen block fails that (the queue was relinked
    behind the mirror's wrappers), nothing is relinked, the mirror is read again from
    the queue, and the call raises ``RuntimeError``: ``get_new_blocks`` then serves the
    request from the queue as vLLM left it (the plugin's guard counts it in
    ``place_errors``)."""
    queue = block_pool.free_block_queue
    first = np.asarray(remote_block_ids, dtype=np.int64)
    n = len(first)
    if n > queue.num_free_blocks:
        raise ValueError(f"Cannot get {n} free blocks from the pool")
    k = head(first, n if pages is None else pages, direction)
    if k == 0:
        return _unplaced(first, _mirror(block_pool).front(n), direction)
    w = _window(k, queue.num_free_blocks, window)
    # The queue is a linked list of Python objects; its order is read from a mirror of
    # block ids kept in step with it (see `_mirror`); the chosen blocks are relinked in
    # the queue by `_vllm_queue.move_front` (each checked first), then in the mirror.
    mirror = _mirror(block_pool)
    front = mirror.front(max(w, n))
    # The candidates: the n blocks get_new_blocks takes anyway and, past them, only those
    # holding no cached prefix (a cached one vLLM would have kept stays where it is).
    keep_cached = getattr(block_pool, "enable_caching", False) and not cached
    takeable = mirror.window(n, w) if keep_cached else front[:w]
    try:
        chosen, _, stats = place(first[:k], takeable, direction=direction)
    except ValueError:
        # The mirror's ids are distinct and at least n: a repeat in the request's ids is
        # the one way placing fails here, and it is vLLM's order, not an error.
        if len(np.unique(first)) < n:
            return _unplaced(first, front[:n], direction)
        raise
    if k < n:
        # What get_new_blocks hands out after the move: the placed head, then the queue
        # in its order without it.
        own = _runs(first, front[:n], direction)
        # (By a table of the pool's ids, not np.isin: a sort of the front, too slow here.)
        moved = np.zeros(len(block_pool.blocks), dtype=bool)
        moved[chosen] = True
        whole = np.concatenate([chosen, front[~moved[front]]])[:n]
        runs = _runs(first, whole, direction)
        stats = {**stats, "own": own, "placed": min(runs, own), "bound": _runs(first, first, direction)}
        stats["fallback"] = runs >= own
    if not stats["fallback"]:
        try:
            ids = chosen.tolist()
            move_front(queue, block_pool.blocks, ids)
            mirror.moved_front(ids)
        except RuntimeError:
            mirror.reread(queue)  # the queue as it is now, for the next placement
            raise
    return stats


def head(first: npt.NDArray[np.int64], pages: int, direction: Literal["ascending", "either"]) -> int:
    """How many of ``first``'s pages a placement of at most ``pages`` of them takes: all
    when they fit, else up to the last run boundary (a step other than +1, or -1 too
    ``either`` way) within ``pages``, or ``pages`` when one run is longer."""
    n = len(first)
    if pages >= n:
        return n
    if pages <= 0:
        return 0
    steps = np.diff(first[: pages + 1])
    cut = steps != 1 if direction == "ascending" else np.abs(steps) != 1
    ends = np.flatnonzero(cut)
    return int(ends[-1]) + 1 if len(ends) else pages


def _unplaced(
    first: npt.NDArray[np.int64], own: npt.NDArray[np.int64], direction: Literal["ascending", "either"]
) -> PlaceStats:
    """``place``'s stats for a request left to the allocator's own pages ``own``."""
    own_runs = _runs(first, own, direction)
    return {"bound": _runs(first, first, direction), "placed": own_runs, "own": own_runs, "split": 0, "fallback": True}


# The methods of vLLM 0.33's ``FreeKVCacheBlockQueue`` that change it other than by
# popping its front (``popleft``, ``popleft_n``: the mirror catches up with those, see
# ``VllmQueueMirror.catch_up``).
_CHANGES = ("remove", "append", "append_n", "prepend_n")
# Each queue's mirror, held here, not in the queue's ``__dict__``, so that a pool pickles
# and deep-copies while placement is on (the copy is vLLM's own: the queue's
# ``VllmQueueTold`` wrappers reduce to the methods they wrap); weakly keyed, so that a
# pool vLLM drops is not kept alive by corun. A queue that takes no weak reference (a
# port with ``__slots__``) keeps its mirror under ``_MIRROR`` in its ``__dict__``.
_MIRRORS: "weakref.WeakKeyDictionary[Any, VllmQueueMirror]" = weakref.WeakKeyDictionary()
_MIRROR = "_corun_mirror"
_UNTRACKED: List[Any] = []


def forget_mirrors() -> None:
    """Takes corun's mirror and its ``VllmQueueTold`` wrappers off every queue
    :func:`vllm_place_front` gave them to, so that no attribute of corun's stays on a
    pool. A later placement mirrors afresh."""
    queues = [*_MIRRORS, *_UNTRACKED]
    _MIRRORS.clear()
    _UNTRACKED.clear()
    for queue in queues:
        attrs = queue.__dict__
        attrs.pop(_MIRROR, None)
        for name in _CHANGES:
            if isinstance(attrs.get(name), VllmQueueTold):
                del attrs[name]


def _mirror_of(queue: Any) -> Optional[VllmQueueMirror]:
    """The mirror :func:`vllm_place_front` keeps of vLLM free queue ``queue``, or
    ``None`` (none made yet, or taken off by :func:`forget_mirrors`)."""
    try:
        return _MIRRORS.get(queue)
    except TypeError:  # takes no weak reference
        return queue.__dict__.get(_MIRROR)


def _mirror(block_pool: Any) -> VllmQueueMirror:
    """The mirror of ``block_pool.free_block_queue``'s order: block ids in Rust arrays,
    so that reading the window does not walk the queue's Python objects (a cache miss or
    two per block once vLLM has shuffled it; that walk was most of the adapter's time).
    The first call reads the queue once and wraps, on this queue object only, each of its
    methods that change it but by popping its front (``VllmQueueTold``: the method, then
    the same change applied to the mirror, in Rust); pops only shorten the front, and the
    mirror drops what the queue no longer starts with before each told change and each
    check. vLLM changes its queue only through these methods. Each later call checks the
    mirror against the queue where that is cheap (count, first and last block) and reads
    the queue again on any difference, as after a failed relink."""
    queue = block_pool.free_block_queue
    mirror = _mirror_of(queue)
    if mirror is None:
        mirror = VllmQueueMirror(queue, len(block_pool.blocks))
        try:
            _MIRRORS[queue] = mirror
        except TypeError:
            queue.__dict__[_MIRROR] = mirror
            _UNTRACKED.append(queue)
        for name in _CHANGES:
            if hasattr(queue, name):  # a port of the queue may lack some
                queue.__dict__[name] = VllmQueueTold(mirror, name, getattr(queue, name))
    elif not mirror.in_step(queue):
        mirror.reread(queue)
    return mirror


def sglang_place_front(
    allocator: Any,
    dst_pages: Any,
    *,
    window: _Window = None,
    direction: Literal["ascending", "either"] = "ascending",
) -> Optional[PlaceStats]:
    """Reorders the front of ``allocator.free_pages`` (SGLang's
    ``PagedTokenToKVPoolAllocator``; a torch tensor or, in a port, a numpy array) so that
    its first ``len(dst_pages)`` pages pair with ``dst_pages`` run for run; the
    allocator's next ``alloc`` / ``alloc_extend`` of that many pages takes them. Merges
    the staged frees first when the free list is short, as ``alloc`` does. Reaches
    ``window`` pages deep (default :func:`sglang_window`: the request's own pages).
    ``direction`` is ``"ascending"`` by default because SGLang's transfer backends group
    with ``group_concurrent_contiguous``, which merges only runs that ascend on both
    sides: a run placed descending would still be one transfer per page there.
    Returns ``corun.place``'s stats, or ``None`` when the free list holds fewer pages than
    the request: then nothing is changed, and SGLang's ``alloc`` returns ``None`` as it
    would without placement (its out-of-memory path is untouched). A batch of requests
    allocated at once: :func:`sglang_place_batch`."""
    first = _host(dst_pages)
    n = len(first)
    host = _free_host(allocator, n)
    if host is None:
        return None
    w = _window(n, len(host), window, sglang_window)
    chosen, rest, stats = place(first, host[:w], direction=direction)
    if not stats["fallback"]:
        _set_front(allocator, [chosen, rest], host, w)
    return stats


def sglang_place_batch(
    allocator: Any,
    dst_pages: Sequence[Any],
    *,
    direction: Literal["ascending", "either"] = "ascending",
    pages: Optional[int] = None,
) -> Optional[List[Tuple[int, int]]]:
    """Placement for a batch SGLang allocates at once (``alloc_extend`` hands request
    ``i`` the next ``len(dst_pages[i])`` pages of the free list's front, in batch
    order): reorders the front ``N = sum(len)`` pages of ``allocator.free_pages`` so
    that each request's pages pair with its decode side's ``dst_pages[i]``.

    The rule, never worse for any request: runs are counted within each request only
    (a request boundary is never one transfer), and the front ``N`` pages are handed out
    either (a) *per request*: each request's own ``n_i`` pages, those SGLang would give
    it, reordered by ``corun.place`` (which keeps their order unless that is strictly
    better), or (b) *as a batch*: all ``N`` placed together, request ``i`` taking the
    ``i``-th slice of the result, used only when no request gets more runs than with
    SGLang's own pages and the batch has fewer runs in all than (a) (never when a decode
    page id is in two requests: several decode instances' pools). Either way exactly
    the ``N`` pages SGLang's ``alloc_extend`` would take leave the free list, the rest of
    it stays as it was, and no request is worse than SGLang alone.

    ``pages`` (default: all) bounds the request pages placed (a time budget: see
    ``corun._budget``): requests in batch order while they fit, the first that does not
    by its head (:func:`head`; kept only with fewer runs than SGLang's own pages), the
    rest SGLang's own pages; (b) only when the whole batch fits twice.

    Returns, per request, ``(own, placed)``: its runs with SGLang's pages and with the
    pages it gets now; ``None`` (nothing changed) when the free list, after merging the
    staged frees as ``alloc_extend`` would, holds fewer than ``N`` pages."""
    parts = [_host(p) for p in dst_pages]
    sizes = [len(p) for p in parts]
    total = sum(sizes)
    host = _free_host(allocator, total)
    if host is None:
        return None
    front = host[:total]
    ends = np.cumsum(sizes, dtype=np.int64)
    bounds = list(zip((ends - sizes).tolist(), ends.tolist()))
    own = [front[a:b] for a, b in bounds]
    own_runs = [_runs(d, o, direction) for d, o in zip(parts, own)]
    # (a) each request within its own pages, as far as `pages` goes.
    left = total if pages is None else max(0, pages)
    apart = []
    for d, o, o_runs in zip(parts, own, own_runs):
        k = head(d, left, direction)
        left -= k
        if k == len(d) and k:
            apart.append(place(d, o, direction=direction)[0])
        elif k:
            # The head placed among its own first pages, the rest of its own after them.
            mine = np.concatenate([place(d[:k], o[:k], direction=direction)[0], o[k:]])
            apart.append(mine if _runs(d, mine, direction) < o_runs else o)
        else:
            apart.append(o)
    apart_runs = [_runs(d, c, direction) for d, c in zip(parts, apart)]
    chosen, got = apart, apart_runs
    # (b) the batch together, where it is no worse for anyone and better in all.
    if len(parts) > 1 and (pages is None or pages >= 2 * total):
        try:
            together, _, stats = place(np.concatenate(parts), front, direction=direction)
            as_one = not stats["fallback"]
        except ValueError:
            # A decode page in two requests (several decode instances, each its own
            # pool, in one batch): no pairing of the batch as one; each request apart.
            as_one = False
        if as_one:
            pieces = [together[a:b] for a, b in bounds]
            piece_runs = [_runs(d, c, direction) for d, c in zip(parts, pieces)]
            if sum(piece_runs) < sum(apart_runs) and all(p <= o for p, o in zip(piece_runs, own_runs)):
                chosen, got = pieces, piece_runs
    if got != own_runs:
        _set_front(allocator, chosen, host, total)
    return list(zip(own_runs, got))


def _runs(first: npt.NDArray[np.int64], second: npt.NDArray[Any], direction: Literal["ascending", "either"]) -> int:
    """Concurrent runs of one request's pairs (0 for none)."""
    return count_runs(first, second.astype(np.int64, copy=False), direction=direction)


def _host(pages: Any) -> npt.NDArray[np.int64]:
    """A request's pages (a torch tensor, an array, a list) as an int64 numpy array."""
    return np.asarray(pages.cpu() if hasattr(pages, "cpu") else pages, dtype=np.int64)


def _free_host(allocator: Any, n: int) -> Optional[npt.NDArray[np.integer[Any]]]:
    """``allocator.free_pages`` on the host, after merging the staged frees when it
    holds fewer than ``n`` pages (as SGLang's ``alloc`` does); ``None`` if still short."""
    if n > len(allocator.free_pages) and getattr(allocator, "staged_pages", None):
        allocator.merge_and_sort_free()
    free = allocator.free_pages
    host: npt.NDArray[np.integer[Any]] = free.cpu().numpy() if hasattr(free, "cpu") else np.asarray(free)
    return None if n > len(host) else host


def _set_front(allocator: Any, front: List[Any], host: npt.NDArray[np.integer[Any]], depth: int) -> None:
    """``allocator.free_pages`` becomes ``front`` (arrays, concatenated) then its own
    pages past ``depth``, in the free list's dtype and on its device."""
    free = allocator.free_pages
    out = np.concatenate([*front, host[depth:]]).astype(host.dtype, copy=False)
    if hasattr(free, "cpu"):
        import torch  # type: ignore[import-not-found, unused-ignore]

        allocator.free_pages = torch.from_numpy(out).to(free.device)
    else:
        allocator.free_pages = out
