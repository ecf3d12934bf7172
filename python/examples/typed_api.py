"""Every public function of corun and of corun.adapters, called as a typed program would:
`mypy --strict` checks the types (`assert_type` fails the check where a result's type is
not exactly the one written), and running it checks the values. The adapters run on small
stand-ins for vLLM's block pool and SGLang's allocator, with only the attributes the
adapters use.

    mypy --strict python/examples/typed_api.py
    python python/examples/typed_api.py      # prints "typed_api: ok"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

import corun
from corun import adapters

if TYPE_CHECKING:
    from typing_extensions import assert_type

    from corun._corun import PlaceStats
else:
    # `typing.assert_type` is 3.11+; at run time it only returns its value.
    def assert_type(value, _type):
        return value


U64 = npt.NDArray[np.uint64]
FromList = npt.NDArray[Union[np.int64, np.uint64]]


def core() -> None:
    assert_type(corun.__version__, str)
    src = np.array([4, 5, 6, 9, 10], np.int32)
    dst = np.array([0, 1, 2, 7, 8], np.int32)

    groups = corun.group_concurrent_contiguous(src, dst)
    assert_type(groups, Tuple[list[list[int]], list[list[int]]])
    assert groups == ([[4, 5, 6], [9, 10]], [[0, 1, 2], [7, 8]])

    # Starts in each input's own dtype (int16 is read as int32 and given back as int16).
    s_starts, d_starts, lengths = corun.runs(src, dst.astype(np.int16), max_len=2)
    assert_type(s_starts, npt.NDArray[np.int32])
    assert_type(d_starts, npt.NDArray[np.int16])
    assert_type(lengths, npt.NDArray[np.int64])
    assert d_starts.dtype == np.int16 and lengths.dtype == np.int64
    assert (s_starts.tolist(), d_starts.tolist(), lengths.tolist()) == ([4, 6, 9], [0, 2, 7], [2, 1, 2])
    l_starts, _, l_lengths = corun.runs([9, 8, 7], [3, 2, 1], direction="either")
    assert_type(l_starts, FromList)
    assert l_starts.dtype == np.int64 and (l_starts.tolist(), l_lengths.tolist()) == ([9], [3])

    # One layer at 0x1000 (src) / 0x9000 (dst), 64 bytes an item.
    bases = ([0x1000], [0x9000], [64])
    src_addrs, dst_addrs, byte_lens = corun.transfer_descriptors(src, dst, *bases)
    assert_type(src_addrs, U64)
    assert src_addrs.dtype == np.uint64
    assert src_addrs.tolist() == [0x1000 + 4 * 64, 0x1000 + 9 * 64]
    assert dst_addrs.tolist() == [0x9000, 0x9000 + 7 * 64] and byte_lens.tolist() == [192, 128]

    mooncake = corun.transfer_descriptors(src, dst, *bases, form="lists", max_bytes=128)
    assert_type(mooncake, Tuple[list[int], list[int], list[int]])
    assert mooncake[2] == [128, 64, 128]

    local, remote = corun.transfer_descriptors(src, dst, *bases, form="nixl", src_dev_id=1)
    assert_type(local, U64)
    assert local.shape == (2, 3) and local[:, 2].tolist() == [1, 1] and remote[:, 2].tolist() == [0, 0]

    form: str = "nixl"  # known at run time only: any of the three forms
    either = corun.transfer_descriptors(src, dst, *bases, form=form)
    assert_type(
        either,
        Union[Tuple[U64, U64, U64], Tuple[list[int], list[int], list[int]], Tuple[U64, U64]],
    )
    assert len(either) == 2

    by_dst = corun.sort_by_destination(np.array([5, 6, 7], np.int64), np.array([12, 10, 11], np.int64))
    assert_type(by_dst, Tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]])
    assert by_dst[0].tolist() == [6, 7, 5] and by_dst[1].tolist() == [10, 11, 12]

    chosen, rest, stats = corun.place(
        np.array([10, 11, 12, 13], np.uint32), np.array([2, 5, 6, 7, 8, 11], np.uint32)
    )
    assert_type(chosen, npt.NDArray[np.uint32])
    assert_type(stats, "PlaceStats")
    assert chosen.dtype == np.uint32 and chosen.tolist() == [5, 6, 7, 8] and rest.tolist() == [2, 11]
    assert stats == {"bound": 1, "placed": 1, "own": 2, "split": 0, "fallback": False}
    # A pair of two dtypes: the general overload.
    mixed, _, _ = corun.place(np.array([10, 11], np.int32), [3, 4, 5])
    assert_type(mixed, npt.NDArray[np.integer[Any]])
    assert mixed.tolist() == [3, 4]


class Block:
    """vLLM's KVCacheBlock: an id, its reference count (0 while free: the mirror moves only
    free blocks), its prefix-cache hash (None: it caches nothing) and the free queue's links."""

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        self.block_hash: Optional[bytes] = None
        self.prev_free_block: Optional[Block] = None
        self.next_free_block: Optional[Block] = None


class FreeQueue:
    """vLLM's FreeKVCacheBlockQueue: a doubly linked list between two sentinels."""

    def __init__(self, blocks: list[Block]) -> None:
        self.fake_free_list_head, self.fake_free_list_tail = Block(-1), Block(-1)
        self.fake_free_list_head.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = self.fake_free_list_head
        self.num_free_blocks = 0
        for b in reversed(blocks):
            self._after(self.fake_free_list_head, b)

    def _after(self, prev: Block, b: Block) -> None:
        b.prev_free_block, b.next_free_block = prev, prev.next_free_block
        assert prev.next_free_block is not None
        prev.next_free_block.prev_free_block = b
        prev.next_free_block = b
        self.num_free_blocks += 1

    def remove(self, b: Block) -> None:
        assert b.prev_free_block is not None and b.next_free_block is not None
        b.prev_free_block.next_free_block = b.next_free_block
        b.next_free_block.prev_free_block = b.prev_free_block
        b.prev_free_block = b.next_free_block = None
        self.num_free_blocks -= 1

    def prepend_n(self, blocks: list[Block]) -> None:
        for b in reversed(blocks):
            self._after(self.fake_free_list_head, b)

    def popleft(self) -> Block:
        b = self.fake_free_list_head.next_free_block
        assert b is not None and b is not self.fake_free_list_tail
        self.remove(b)
        return b


class BlockPool:
    """vLLM's BlockPool: the blocks by id, the free queue, and `get_new_blocks`."""

    def __init__(self, free_order: list[int]) -> None:
        self.blocks = [Block(i) for i in range(max(free_order) + 1)]
        self.free_block_queue = FreeQueue([self.blocks[i] for i in free_order])

    def get_new_blocks(self, n: int) -> list[Block]:
        return [self.free_block_queue.popleft() for _ in range(n)]


class Allocator:
    """SGLang's paged allocator, as a numpy port: the free pages, and `alloc` from their front."""

    def __init__(self, free_pages: npt.NDArray[np.int64]) -> None:
        self.free_pages = free_pages

    def alloc(self, n: int) -> npt.NDArray[np.int64]:
        out, self.free_pages = self.free_pages[:n], self.free_pages[n:]
        return out


def stacks() -> None:
    assert_type(adapters.default_window(8), int)
    assert adapters.default_window(8) == 96

    # vLLM: remote blocks 20..23 are one run; the queue's front (0, 3, 4, 5) would be two.
    pool = BlockPool([0, 3, 4, 5, 6, 9, 1, 2])
    stats = adapters.vllm_place_front(pool, [20, 21, 22, 23])
    assert_type(stats, "PlaceStats")
    assert (stats["own"], stats["placed"], stats["fallback"]) == (2, 1, False)
    assert [b.block_id for b in pool.get_new_blocks(4)] == [3, 4, 5, 6]
    assert pool.free_block_queue.num_free_blocks == 4

    # SGLang: dst pages 40..43 in one run; free[:4] = (2, 5, 6, 7) would be two.
    alloc = Allocator(np.array([2, 5, 6, 7, 8, 11], np.int64))
    placed = adapters.sglang_place_front(alloc, np.arange(40, 44), window=lambda n: n + 2)
    assert_type(placed, "Optional[PlaceStats]")  # None: a shortage, SGLang's alloc then fails
    assert placed is not None and (placed["own"], placed["placed"]) == (2, 1)
    assert adapters.sglang_place_front(alloc, np.arange(50, 99)) is None
    assert adapters.sglang_window(7) == 7
    assert alloc.alloc(4).tolist() == [5, 6, 7, 8] and alloc.free_pages.tolist() == [2, 11]


if __name__ == "__main__":
    core()
    stacks()
    print("typed_api: ok")
