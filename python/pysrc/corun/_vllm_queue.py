"""Moving chosen blocks to the front of vLLM's free queue (``FreeKVCacheBlockQueue``, a
doubly linked list of ``KVCacheBlock`` objects), so that ``get_new_blocks`` hands them
out in order.

Written in Python, not in the Rust mirror: this is attribute reads and writes of Python
objects and nothing else, and CPython's specialised attribute access in a Python loop
did them in about half the time of the same calls from Rust through the C API (vLLM
0.33's blocks, 1K-16K of them, when this replaced the Rust loop; in the replay the
relink is still most of a placement call: cache misses on scattered blocks). The
mirror of block ids (``VllmQueueMirror.moved_front``) is told after.
"""

from __future__ import annotations

from typing import Any, List, Sequence

__all__ = ["move_front"]


def move_front(queue: Any, blocks: List[Any], ids: Sequence[int]) -> None:
    """Moves ``blocks[i]`` for ``i`` in ``ids`` (``blocks``: the pool's list of every block,
    by id) to the front of ``queue`` in the given order: what ``queue.remove`` of each then
    ``queue.prepend_n`` do, in one pass over them.

    Each block is checked, by vLLM's own state, just before it is unlinked: its
    ``ref_cnt`` is 0 (``get_new_blocks`` asserts it of every block it pops) and its
    neighbours' links agree that it stands between them (its own links alone are not
    enough: a held block keeps stale ones). If one fails (an id listed twice, or the queue
    changed behind corun's wrappers), the blocks unlinked so far are linked back, in the
    reverse order, each between the neighbours its own links still name, which restores
    the queue exactly; nothing is moved and the call is a ``RuntimeError`` naming the
    block and what failed (as ``remove`` raises)."""
    if ids and min(ids) < 0:
        raise RuntimeError(f"corun: block {min(ids)} is not one of the pool's {len(blocks)}")
    try:
        moved = [blocks[i] for i in ids]
    except IndexError:
        bad = next(i for i in ids if i >= len(blocks))
        raise RuntimeError(f"corun: block {bad} is not one of the pool's {len(blocks)}") from None
    for at, b in enumerate(moved):
        p, n = b.prev_free_block, b.next_free_block
        if b.ref_cnt != 0 or p is None or n is None or p.next_free_block is not b or n.prev_free_block is not b:
            _link_back(moved[:at])
            raise RuntimeError(_why(ids, at, b))
        p.next_free_block = n
        n.prev_free_block = p
    head = queue.fake_free_list_head
    first, last = head.next_free_block, head
    for b in moved:
        b.prev_free_block = last
        last.next_free_block = b
        last = b
    last.next_free_block = first
    first.prev_free_block = last


def _link_back(unlinked: List[Any]) -> None:
    """Undoes the unlinking of ``unlinked`` (in that order): an unlinked block keeps its
    own links, so linking each back, last first, between them restores every link."""
    for b in reversed(unlinked):
        b.prev_free_block.next_free_block = b
        b.next_free_block.prev_free_block = b


def _why(ids: Sequence[int], at: int, b: Any) -> str:
    """The error for ``ids[at]`` (block ``b``), which failed the check."""
    block = ids[at]
    if block in ids[:at]:
        return f"corun: block {block} is listed twice"
    if b.ref_cnt != 0:
        why = "its ref_cnt is not 0"
    elif b.prev_free_block is None or b.next_free_block is None:
        why = "its links are None"
    elif b.prev_free_block.next_free_block is not b:
        why = "its previous block's next_free_block is another block"
    else:
        why = "its next block's prev_free_block is another block"
    return (f"corun: block {block} is not in the free queue: {why}; the queue was changed "
            "behind corun's wrappers, nothing was moved")
