"""The vLLM adapter (``corun.adapters.vllm_place_front``) on a free queue changed behind
its mirror's wrappers: it never moves a block vLLM does not hold free, vLLM's own
``get_new_blocks`` never asserts because of it, the queue's links are left as they were
(or, when it moves, consistent), and after the mirror is read again the next placement
is correct.

Everything vLLM here is vLLM 0.33's own code from the installed wheel (``upstream``):
``KVCacheBlock``, ``FreeKVCacheBlockQueue`` and ``BlockPool.get_new_blocks`` (with its
``assert block.ref_cnt == 0``), compiled from their files without the rest of vLLM. The
tests are skipped when vLLM is not installed, unless ``CORUN_REQUIRE_ENGINES=1``.

The queue every test starts from (64 blocks, made by vLLM's own calls; the others held):

    front: 60 2 61 4 62 6 63 8 | 10 11 12 13 | 20 21 22 ... 59

A request of one ascending run of 4 gets ``[60, 2, 61, 4]`` (4 transfers) from vLLM, and
``[10, 11, 12, 13]`` (1 transfer) from placement (the smallest extent that holds it, the
lowest ids on a tie with 60..63). Each test tampers with block 12's place in the queue.
"""

import os

import numpy as np
import pytest

from corun import adapters
import upstream

REQUIRE = os.environ.get("CORUN_REQUIRE_ENGINES") == "1"
BLOCK_POOL = "v1/core/block_pool.py"


def vllm():
    try:
        block, queue = upstream.vllm_queue_classes()
        text, tree = upstream.source("vllm", BLOCK_POOL)
        node = upstream.find(tree, "get_new_blocks", where=BLOCK_POOL)
        get_new_blocks = upstream.compile_def(text, node, {"KVCacheBlock": block})
    except upstream.Missing:
        if REQUIRE:
            raise
        pytest.skip(f"vLLM 0.33 is not installed ({upstream.HINT})")
    return block, queue, get_new_blocks


class Pool:
    """The attributes of vLLM's ``BlockPool`` that the adapter and vLLM's own
    ``get_new_blocks`` read, around the real queue (prefix caching off: the free queue is
    then all ``get_new_blocks`` touches)."""

    def __init__(self, blocks):
        block, queue, self._get_new_blocks = vllm()
        self.blocks = [block(block_id=i) for i in range(blocks)]
        self.free_block_queue = queue(self.blocks)
        self.enable_caching = False
        self.metrics_collector = None
        self._reuse_watchers = {}

    def get_num_free_blocks(self):
        return self.free_block_queue.num_free_blocks

    def get_new_blocks(self, n):
        return self._get_new_blocks(self, n)  # vLLM's own, asserts included


FRONT = [60, 2, 61, 4, 62, 6, 63, 8]
PLACED = [10, 11, 12, 13]
FREE = FRONT + PLACED + list(range(20, 60))
REMOTE = [100, 101, 102, 103]


def pool():
    """The queue of the module doc, made by vLLM's own calls, and its mirror."""
    p = Pool(64)
    p.get_new_blocks(64)
    back = [p.blocks[i] for i in FREE]
    for b in back:  # freed as vLLM frees: the reference count, then the queue
        b.ref_cnt -= 1
    p.free_block_queue.append_n(back)
    adapters._mirror(p)  # read once; the queue's changing methods wrapped
    assert order(p) == FREE and consistent(p)
    return p


def order(p):
    """The queue's block ids, front first, walked by its next links."""
    q = p.free_block_queue
    out, b = [], q.fake_free_list_head.next_free_block
    while b is not q.fake_free_list_tail and len(out) <= len(p.blocks):
        out.append(b.block_id)
        b = b.next_free_block
    return out


def links(p):
    """Every link of every block and of the queue's two ends, by object identity."""
    q = p.free_block_queue
    every = p.blocks + [q.fake_free_list_head, q.fake_free_list_tail]
    return [(id(b), id(b.prev_free_block), id(b.next_free_block)) for b in every]


def consistent(p):
    """The queue as vLLM keeps it: each block's neighbours link back to it from the head
    to the tail, as many blocks as ``num_free_blocks``, each once."""
    q = p.free_block_queue
    b, seen = q.fake_free_list_head, set()
    while b is not q.fake_free_list_tail:
        nxt = b.next_free_block
        if nxt is None or nxt.prev_free_block is not b or id(nxt) in seen:
            return False
        seen.add(id(nxt))
        b = nxt
    return len(seen) - 1 == q.num_free_blocks


def mirror_of(p):
    q = p.free_block_queue
    m = adapters._mirror_of(q)
    m.catch_up(q)
    return m


def request(p, remote):
    """One allocation as the plugin makes it: the adapter (on ``RuntimeError``, vLLM's
    way: the guard's contract), then vLLM's own ``get_new_blocks``."""
    try:
        stats = adapters.vllm_place_front(p, remote)
    except RuntimeError:
        stats = None
    return stats, [b.block_id for b in p.get_new_blocks(len(remote))]


def splice_held(p, held_id, free_id):
    """A held block put where a free one was, the free one's stale links left in place:
    count, first and last unchanged."""
    h, f = p.blocks[held_id], p.blocks[free_id]
    assert h.ref_cnt > 0 and h.prev_free_block is None
    h.prev_free_block, h.next_free_block = f.prev_free_block, f.next_free_block
    f.prev_free_block.next_free_block = h
    f.next_free_block.prev_free_block = h


def test_untampered_the_adapter_places_and_vllm_hands_out_the_placed_blocks():
    p = pool()
    stats, got = request(p, REMOTE)
    assert stats is not None and not stats["fallback"]
    assert (stats["placed"], stats["own"]) == (1, 4)
    assert got == PLACED and consistent(p)


def test_a_held_block_spliced_in_where_a_free_one_was_is_never_moved():
    p = pool()
    splice_held(p, 9, 12)
    assert order(p)[:12] == FRONT + [10, 11, 9, 13] and consistent(p)
    before = links(p)
    with pytest.raises(RuntimeError, match="block 12 is not in the free queue: its previous block's"):
        adapters.vllm_place_front(p, REMOTE)
    assert links(p) == before  # nothing relinked
    # The call goes vLLM's way: its own front, no assert.
    assert [b.block_id for b in p.get_new_blocks(4)] == FRONT[:4] and consistent(p)
    # Read again, the mirror holds the queue as linked, block 9 in 12's place.
    assert mirror_of(p).front(64).tolist() == order(p)
    # 8, 9, 10, 11 are an extent now: block 9 is not moved (its ref_cnt), vLLM's way.
    stats, got = request(p, [300, 301, 302, 303])
    assert stats is None and got == [62, 6, 63, 8] and consistent(p)
    # Placing is no better than vLLM's own 10, 11: a fallback, nothing moved.
    stats, got = request(p, [400, 401])
    assert stats is not None and stats["fallback"] and got == [10, 11]
    # vLLM's own front is now 9, 13, 20 (9 held: vLLM alone would assert); placed, the
    # request gets free blocks only.
    stats, got = request(p, [500, 501, 502])
    assert stats is not None and not stats["fallback"] and got == [57, 58, 59]
    assert consistent(p) and p.blocks[9].ref_cnt == 1 and order(p)[:2] == [9, 13]


def test_a_block_whose_ref_cnt_is_not_0_is_never_moved():
    p = pool()
    p.blocks[12].ref_cnt = 1  # in the queue, links intact, but held by vLLM's state
    before = links(p)
    with pytest.raises(RuntimeError, match="block 12 is not in the free queue: its ref_cnt is not 0"):
        adapters.vllm_place_front(p, REMOTE)
    assert links(p) == before and consistent(p)
    assert [b.block_id for b in p.get_new_blocks(4)] == FRONT[:4]
    p.blocks[12].ref_cnt = 0  # vLLM's state agrees again: the next placement moves it
    stats, got = request(p, REMOTE)
    assert stats is not None and not stats["fallback"] and got == PLACED and consistent(p)


@pytest.mark.parametrize("side", ["prev", "next"])
def test_links_that_disagree_on_either_side_are_never_followed(side):
    p = pool()
    b11, b12, b13 = (p.blocks[i] for i in (11, 12, 13))
    # Each of 12's links still points at its neighbour, but one neighbour skips 12: the
    # first block of 10..13 whose neighbours disagree stops the move, before any relink.
    if side == "prev":
        b11.next_free_block = b13  # going forward 12 is skipped: 11's next disowns 12
        why = "block 11 is not in the free queue: its next block's prev_free_block"
    else:
        b13.prev_free_block = b11  # going back 12 is skipped: 13's prev disowns 12
        why = "block 12 is not in the free queue: its next block's prev_free_block"
    before = links(p)
    with pytest.raises(RuntimeError, match=why):
        adapters.vllm_place_front(p, REMOTE)
    assert links(p) == before  # the queue as the tampering left it, no worse
    assert [b.block_id for b in p.get_new_blocks(4)] == FRONT[:4]  # vLLM's way, no assert
    # Mended, the queue is consistent again and the next placement moves the blocks.
    b11.next_free_block = b13.prev_free_block = b12
    assert consistent(p)
    stats, got = request(p, REMOTE)
    assert stats is not None and not stats["fallback"] and got == PLACED and consistent(p)


def test_count_first_and_last_unchanged_the_mirror_still_checks_every_block():
    p = pool()
    q = p.free_block_queue
    cheap = (q.num_free_blocks, order(p)[0], order(p)[-1])
    splice_held(p, 5, 10)
    splice_held(p, 7, 13)
    assert (q.num_free_blocks, order(p)[0], order(p)[-1]) == cheap and consistent(p)
    assert adapters._mirror_of(q).in_step(q)  # the cheap checks see nothing
    stats, got = request(p, REMOTE)
    assert stats is None and got == FRONT[:4] and consistent(p)
    assert p.blocks[5].ref_cnt == p.blocks[7].ref_cnt == 1
    # The free blocks' stale links are left as they were.
    assert (p.blocks[10].prev_free_block, p.blocks[10].next_free_block) == (p.blocks[8], p.blocks[11])
    assert mirror_of(p).front(64).tolist() == order(p)


def test_a_mirror_out_of_step_moves_only_free_blocks_and_vllm_gets_them():
    # Two free blocks swapped behind the wrappers (12 and 21): every link consistent,
    # count, first and last unchanged, but the mirror's order is not the queue's. The
    # blocks are free by vLLM's state and their links agree: moving them is what remove
    # and prepend_n do, and vLLM hands out exactly the placed blocks.
    p = pool()
    b11, b12, b13, b20, b21, b22 = (p.blocks[i] for i in (11, 12, 13, 20, 21, 22))
    b11.next_free_block, b21.prev_free_block, b21.next_free_block, b13.prev_free_block = b21, b11, b13, b21
    b20.next_free_block, b12.prev_free_block, b12.next_free_block, b22.prev_free_block = b12, b20, b22, b12
    assert consistent(p) and order(p)[8:15] == [10, 11, 21, 13, 20, 12, 22]
    stats, got = request(p, REMOTE)
    assert stats is not None and not stats["fallback"] and got == PLACED and consistent(p)
    # A block taken out and another put at the tail by the class's own methods (not
    # told): the cheap checks see it (the last block), the mirror is read again, and the
    # placement is correct for the queue as it is.
    p = pool()
    q = p.free_block_queue
    type(q).remove(q, p.blocks[12])
    p.blocks[12].ref_cnt, p.blocks[14].ref_cnt = 1, 0
    type(q).append(q, p.blocks[14])
    stats, got = request(p, REMOTE)  # 10..13 is no extent now: 60..63 is
    assert stats is not None and not stats["fallback"] and got == [60, 61, 62, 63]
    assert consistent(p) and mirror_of(p).front(64).tolist() == order(p)


def test_repeated_remote_ids_are_a_fallback_not_an_error():
    p = pool()
    before = links(p)
    stats = adapters.vllm_place_front(p, [100, 101, 101, 102])
    assert stats["fallback"] and stats["placed"] == stats["own"] == 4 and links(p) == before
    assert [b.block_id for b in p.get_new_blocks(4)] == FRONT[:4] and consistent(p)


@pytest.mark.parametrize("kind", ["spliced", "ref_cnt", "prev_link", "next_link"])
def test_random_tampering_never_gets_a_block_moved_that_is_not_free(kind):
    # One tampered block deep in the queue (beyond what vLLM's own pops reach here), then
    # requests of random runs: vLLM never asserts, the tampered block is never handed
    # out, and where the tampering left the links consistent they stay so.
    rng = np.random.default_rng(sum(map(ord, kind)))
    for _ in range(30):
        p = pool()
        victim = p.blocks[int(rng.choice(FREE[30:-1]))]
        if kind == "spliced":
            held = [b for b in p.blocks if b.ref_cnt > 0]
            intruder = held[int(rng.integers(len(held)))]
            splice_held(p, intruder.block_id, victim.block_id)
            bad = {intruder.block_id, victim.block_id}
        elif kind == "ref_cnt":
            victim.ref_cnt = 1
            bad = {victim.block_id}
        elif kind == "prev_link":
            victim.prev_free_block.next_free_block = victim.next_free_block
            bad = {victim.block_id}
        else:
            victim.next_free_block.prev_free_block = victim.prev_free_block
            bad = {victim.block_id}
        for _ in range(5):
            n = int(rng.integers(1, 5))
            start = int(rng.integers(0, 60))
            remote = (start + np.arange(n) * int(rng.choice([1, -1]))).tolist()
            _, got = request(p, remote)  # an assert in vLLM's get_new_blocks fails here
            assert len(set(got)) == n and bad.isdisjoint(got)
            if kind in ("spliced", "ref_cnt"):
                assert consistent(p)


def test_disable_leaves_nothing_of_corun_on_the_pools_it_placed_in():
    import copy

    from corun import vllm_plugin

    pools = [Pool(64), Pool(32)]
    for pool in pools:
        adapters.vllm_place_front(pool, [9, 10, 11, 3])
        assert any("corun" in k or type(v).__name__ == "VllmQueueTold"
                   for k, v in vars(pool.free_block_queue).items())
    vllm_plugin.disable()
    for pool in pools:
        queue = pool.free_block_queue
        assert not [k for k in vars(queue) if "corun" in k]
        assert not [k for k, v in vars(queue).items() if type(v).__module__.startswith("corun")]
        # (The queue class here is compiled from vLLM's source, so it is not importable for
        # pickle; deep-copying needs no import, and corun's Rust wrappers refused it.)
        copy.deepcopy(queue)
        # Placement still works afterwards, on a fresh mirror.
        stats = adapters.vllm_place_front(pool, [20, 21])
        assert stats["placed"] <= stats["own"]
    vllm_plugin.disable()


def test_cached_blocks_past_the_front_are_taken_only_when_asked():
    """With prefix caching on, placement takes past the blocks vLLM hands out now only
    blocks that hold no cached prefix; ``cached=True`` (``CORUN_VLLM_PLACE_CACHED=1``)
    lets it take cached ones from its whole window too."""
    def cached_pool():
        p = Pool(64)
        p.get_new_blocks(64)
        p.enable_caching = True
        back = [p.blocks[i] for i in FREE]
        for b in back:
            b.ref_cnt -= 1
            if b.block_id >= 10:  # every block past the front caches a prefix
                b._block_hash = b"h%d" % b.block_id
        p.free_block_queue.append_n(back)
        adapters._mirror(p)
        return p

    p = cached_pool()
    kept = adapters.vllm_place_front(p, REMOTE)
    # Takeable: the front four, and past them the uncached 6 and 8 (PLACED's blocks cache
    # a prefix): no run of four among them.
    front = lambda: [b.block_id for b in p.free_block_queue.get_all_free_blocks()[:4]]  # noqa: E731
    assert kept["placed"] > 1 and not set(front()) & set(PLACED)
    p = cached_pool()
    taken = adapters.vllm_place_front(p, REMOTE, cached=True)
    assert not taken["fallback"] and taken["placed"] == 1
    assert front() == PLACED  # what get_new_blocks hands out next


def test_the_place_cached_setting_is_read_and_checked(monkeypatch):
    from corun import _vllm_place

    for value, want in (("", False), ("0", False), ("1", True)):
        monkeypatch.setenv("CORUN_VLLM_PLACE_CACHED", value)
        _vllm_place.configure()
        assert _vllm_place.SETTINGS["cached"] is want
    monkeypatch.setenv("CORUN_VLLM_PLACE_CACHED", "yes")
    with pytest.raises(ValueError, match=r"CORUN_VLLM_PLACE_CACHED='yes': expected 0 or 1"):
        _vllm_place.configure()
    monkeypatch.delenv("CORUN_VLLM_PLACE_CACHED")
    _vllm_place.configure()
    assert _vllm_place.SETTINGS["cached"] is False
