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
  ``alloc_extend``, which takes new pages from the front of ``free_pages`` in order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._corun import VllmQueueMirror, VllmQueueTold, place

if TYPE_CHECKING:
    from typing import Any, Callable, Literal, Optional, Union

    import numpy.typing as npt

    from ._corun import PlaceStats, _IndexArray

    # How deep placement reaches: a number of pages, or a function of the request's.
    _Window = Optional[Union[int, Callable[[int], int]]]

__all__ = ["default_window", "sglang_place_front", "sglang_window", "vllm_place_front"]


def default_window(n: int) -> int:
    """How deep into the free list placement reaches for a request of ``n`` pages: ``4n +
    64``. Deeper windows place more runs but cost more (reading vLLM's free queue, a
    linked list of Python objects, block by block, and sorting what was read). On vLLM's replays (``python/replay.py
    --window``, the results files in ``python/README.md``): ``n + 64`` placed 100,362
    descriptors at p16 where ``4n + 64`` placed 82,657 (bound 72,802), and with 1-token
    pages it gained almost nothing (1.01x against 1.5x)."""
    return 4 * n + 64


def sglang_window(n: int) -> int:
    """SGLang's default window: exactly the request's ``n`` pages, so that placement only
    pairs the pages SGLang's own ``alloc`` would hand out. SGLang's P/D free list is sorted
    and taken from its front, an address-ordered sweep that keeps free pages contiguous;
    reaching deeper (``4n + 64``) fragmented it, and whole replays ended 2-10% *worse* than
    not placing with 1-token pages (``python/replay.py``, issue 30). Within the front ``n``
    pages the same pages leave the free list as without placement (its staged frees are
    sorted before reuse, so their order does not matter), the allocator's state evolves
    exactly as it would, and each request is placed no worse than its own pages: a whole
    run cannot end worse."""
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
) -> PlaceStats:
    """Moves to the front of ``block_pool.free_block_queue`` (vLLM's
    ``FreeKVCacheBlockQueue``) the blocks that pair with ``remote_block_ids`` run for
    run, so that ``block_pool.get_new_blocks(len(remote_block_ids))`` returns them in
    order. Reads at most ``window`` blocks from the queue's front; the blocks stay free
    (and cached) until ``get_new_blocks`` takes them. Returns ``corun.place``'s stats;
    with ``fallback`` the queue is left as it was. Not enough free blocks:
    ``ValueError`` (as ``get_new_blocks`` raises)."""
    queue = block_pool.free_block_queue
    first = np.asarray(remote_block_ids, dtype=np.int64)
    n = len(first)
    if n > queue.num_free_blocks:
        raise ValueError(f"Cannot get {n} free blocks from the pool")
    w = _window(n, queue.num_free_blocks, window)
    # The queue is a linked list of Python objects; its order is read from a mirror of
    # block ids kept in step with it (see `_mirror`), and the chosen blocks are relinked
    # through it in Rust, checked in the queue before any link changes.
    mirror = _mirror(block_pool)
    chosen, _, stats = place(first, mirror.front(w), direction=direction)
    if not stats["fallback"]:
        try:
            mirror.move_front(queue, block_pool.blocks, chosen.tolist())
        except RuntimeError:
            mirror.set_broken()  # out of step: read the queue again next time
            raise
    return stats


# The methods of vLLM 0.33's ``FreeKVCacheBlockQueue`` that change it other than by
# popping its front (``popleft``, ``popleft_n``: the mirror catches up with those, see
# ``VllmQueueMirror.catch_up``); the queue's ``__dict__`` key that holds its mirror.
_CHANGES = ("remove", "append", "append_n", "prepend_n")
_MIRROR = "_corun_mirror"


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
    mirror = queue.__dict__.get(_MIRROR)
    if mirror is None:
        mirror = queue.__dict__[_MIRROR] = VllmQueueMirror(queue, len(block_pool.blocks))
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
    direction: Literal["ascending", "either"] = "either",
) -> Optional[PlaceStats]:
    """Reorders the front of ``allocator.free_pages`` (SGLang's
    ``PagedTokenToKVPoolAllocator``; a torch tensor or, in a port, a numpy array) so that
    its first ``len(dst_pages)`` pages pair with ``dst_pages`` run for run; the
    allocator's next ``alloc`` / ``alloc_extend`` of that many pages takes them. Merges
    the staged frees first when the free list is short, as ``alloc`` does. Reaches
    ``window`` pages deep (default :func:`sglang_window`: the request's own pages).
    Returns ``corun.place``'s stats, or ``None`` when the free list holds fewer pages than
    the request: then nothing is changed, and SGLang's ``alloc`` returns ``None`` as it
    would without placement (its out-of-memory path is untouched)."""
    first = np.asarray(dst_pages.cpu() if hasattr(dst_pages, "cpu") else dst_pages, dtype=np.int64)
    n = len(first)
    if n > len(allocator.free_pages) and getattr(allocator, "staged_pages", None):
        allocator.merge_and_sort_free()
    free = allocator.free_pages
    torch_like = hasattr(free, "cpu")
    host: npt.NDArray[np.integer[Any]] = free.cpu().numpy() if torch_like else np.asarray(free)
    if n > len(host):
        return None
    w = _window(n, len(host), window, sglang_window)
    chosen, rest, stats = place(first, host[:w], direction=direction)
    if not stats["fallback"]:
        out = np.concatenate([chosen, rest, host[w:]]).astype(host.dtype, copy=False)
        if torch_like:
            import torch  # type: ignore[import-not-found, unused-ignore]

            out = torch.from_numpy(out).to(free.device)
        allocator.free_pages = out
    return stats
