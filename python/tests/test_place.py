"""``corun.place`` against the pure-Python reference (``reference_place``) and the
contract any placement keeps, on every integer dtype and array layout; and the adapters
(``corun.adapters``) on vLLM's real free queue and the SGLang allocator's port, as the
replay drives them."""

import os
import random
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import corun
from corun import adapters
import upstream
from pools import SglangPool, VllmPool
from reference import reference_place, spans
from strategies import INT_DTYPES, LAYOUTS, SWAPPED, build, values

REQUIRE = os.environ.get("CORUN_REQUIRE_ENGINES") == "1"


@st.composite
def free_lists(draw, dtype):
    """Distinct pages of `dtype` in stretches (some reversed), the stretches shuffled: a
    free list as allocators hold one. Near the dtype's limits half of the time."""
    info = np.iinfo(dtype)
    span = draw(st.integers(0, 60))
    base = draw(st.sampled_from([int(info.min), int(info.max) - span + 1, 0, 100]))
    base = max(int(info.min), min(base, int(info.max) - span + 1))
    ids = [base + k for k in range(span) if draw(st.booleans()) or span < 4]
    stretches, cur = [], []
    for v in ids:
        if cur and (v != cur[-1] + 1 or draw(st.integers(0, 5)) == 0):
            stretches.append(cur)
            cur = []
        cur.append(v)
    if cur:
        stretches.append(cur)
    stretches = [s[::-1] if draw(st.booleans()) else s for s in stretches]
    order = draw(st.permutations(range(len(stretches))))
    return [v for k in order for v in stretches[k]]


@st.composite
def requests(draw):
    """(first, free) laid out in drawn layouts, dtypes and byte orders."""
    fdt, rdt = draw(st.sampled_from(INT_DTYPES)), draw(st.sampled_from(INT_DTYPES))
    free = draw(free_lists(rdt))
    n = draw(st.integers(0, len(free)))
    first = draw(values(fdt, n))

    def lay(vals, dt):
        layout = draw(st.sampled_from([x for x in LAYOUTS if x not in ("overlapping", "broadcast")]))
        order = draw(st.sampled_from(["=", SWAPPED]))
        return build(vals, dt, layout, order, draw(st.integers(0, 7)), draw(st.integers(0, 3)))

    return lay(first, fdt), lay(free, rdt)


def check(first, free, direction):
    f, fr = first.tolist(), free.tolist()
    if (min(f + fr, default=0) < 0 and max(f + fr, default=0) >= 2**63):
        with pytest.raises(ValueError, match="no common index type"):
            corun.place(first, free, direction=direction)
        return
    try:
        want = reference_place(f, fr, direction)
    except ValueError as e:  # a page twice in first or free
        with pytest.raises(ValueError, match=re.escape(str(e))):
            corun.place(first, free, direction=direction)
        return
    chosen, rest, stats = corun.place(first, free, direction=direction)
    assert (chosen.tolist(), rest.tolist(), stats) == want
    # The contract, whatever the rule.
    assert sorted(chosen.tolist() + rest.tolist()) == sorted(fr)
    assert len(chosen) == len(f)
    assert stats["bound"] <= stats["placed"] <= stats["own"]
    assert stats["placed"] == len(spans(f, chosen.tolist(), direction=direction))


@settings(max_examples=500, deadline=None)
@given(requests(), st.sampled_from(["ascending", "either"]))
def test_place_matches_reference(req, direction):
    check(*req, direction)


def test_place_every_small_case():
    pool = list(range(5))
    import itertools

    frees = [list(p) for k in range(5) for p in itertools.permutations(pool, k)]
    for n in range(4):
        for first in itertools.product([0, 1, 2, 4], repeat=n):
            for free in frees:
                if len(free) >= n:
                    for direction in ("ascending", "either"):
                        check(np.array(first, np.int64), np.array(free, np.int64), direction)


def test_place_by_example():
    chosen, rest, stats = corun.place(np.array([9, 8, 7, 20, 21, 5], np.int32),
                                      np.array([40, 61, 60, 59, 30, 31, 32, 33, 99], np.int64))
    assert chosen.tolist() == [61, 60, 59, 32, 33, 40] and chosen.dtype == np.int64
    assert rest.tolist() == [30, 31, 99]
    assert stats == dict(bound=3, placed=3, own=5, split=0, fallback=False)


def test_place_errors():
    with pytest.raises(ValueError, match="free holds 1 pages, fewer than the 2"):
        corun.place([1, 2], [5])
    with pytest.raises(ValueError, match="direction"):
        corun.place([1], [5], direction="up")
    with pytest.raises(TypeError):
        corun.place([1.5], [5])
    # The type of direction is named too, for every function that takes it.
    for bad in (None, 1, b"either"):
        for call in (lambda d: corun.place([1], [5], direction=d),
                     lambda d: corun.runs([1], [5], direction=d),
                     lambda d: corun.transfer_descriptors([1], [5], [0], [0], [8], direction=d)):
            with pytest.raises(TypeError, match="^direction must be the str"):
                call(bad)


def test_a_page_twice_is_never_handed_out_twice():
    # The case: 7 and 8 twice in free; placed, they went out twice.
    with pytest.raises(ValueError, match="^free holds one page at positions 0 and 3"):
        corun.place([1, 2, 10, 11, 20], [7, 8, 50, 7, 8, 30])
    with pytest.raises(ValueError, match="^first holds one page at positions 1 and 3"):
        corun.place([9, 5, 6, 5], [1, 2, 3, 4])


# --- the adapters ----------------------------------------------------------------------


def vllm_pool(blocks, caching):
    try:
        classes = upstream.vllm_queue_classes()
    except upstream.Missing:
        if REQUIRE:
            raise
        pytest.skip("vLLM 0.33 is not installed")
    return VllmPool(classes, blocks, caching)


def queue_ids(pool):
    out, b = [], pool.free_block_queue.fake_free_list_head.next_free_block
    while b is not pool.free_block_queue.fake_free_list_tail:
        out.append(b.block_id)
        b = b.next_free_block
    return out


def test_vllm_adapter_puts_the_placed_blocks_first():
    pool = vllm_pool(64, caching=True)
    # Fragment the queue: take blocks, give some back in vLLM's free order.
    taken = pool.get_new_blocks(40)
    pool.free(taken[3:9])
    pool.free(taken[20:31])
    before = queue_ids(pool)
    remote = [17, 16, 15, 14, 30, 31, 32]
    stats = adapters.vllm_place_front(pool, remote)
    after = queue_ids(pool)
    assert sorted(after) == sorted(before) and pool.free_block_queue.num_free_blocks == len(before)
    got = [b.block_id for b in pool.get_new_blocks(len(remote))]
    assert got == after[:len(remote)]
    assert stats == reference_place(remote, before[:adapters.default_window(7)], "either")[2]
    assert stats["placed"] < stats["own"] and not stats["fallback"]
    assert len(spans(remote, got, direction="either")) == stats["placed"]


def check_queue(pool, free_ids):
    """vLLM's free queue is a well-formed doubly linked list holding exactly `free_ids`."""
    q = pool.free_block_queue
    ids, b = [], q.fake_free_list_head
    while b.next_free_block is not None:
        nxt = b.next_free_block
        assert nxt.prev_free_block is b, "broken back link"
        b = nxt
        if b is not q.fake_free_list_tail:
            ids.append(b.block_id)
    assert b is q.fake_free_list_tail
    assert len(ids) == q.num_free_blocks == len(set(ids))
    assert set(ids) == free_ids
    return ids


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_vllm_adapter_keeps_the_real_queue_whole_on_every_path(data):
    """Placement through vLLM's real FreeKVCacheBlockQueue, between BlockPool's own paths:
    allocations (evicting cached blocks), prefix hits (touch: removal from the middle),
    frees of many blocks in vLLM's order (hashed to the tail, the rest to the head). The
    queue stays a well-formed list of exactly the free blocks, no block is handed out
    twice, and get_new_blocks returns the placed blocks."""
    blocks = data.draw(st.integers(8, 80))
    # Without caching, frees go to the head (prepend_n); with it, to the tail.
    pool = vllm_pool(blocks, caching=data.draw(st.booleans()))
    live, free, cached = [], set(range(blocks)), []
    for step in range(data.draw(st.integers(1, 30))):
        op = data.draw(st.sampled_from(["alloc", "place", "touch", "free"]))
        if op in ("alloc", "place") and free:
            n = data.draw(st.integers(1, len(free)))
            if op == "place":
                remote = data.draw(st.lists(st.integers(0, 4 * blocks), min_size=n, max_size=n, unique=True))
                before = check_queue(pool, free)
                stats = adapters.vllm_place_front(pool, remote, window=data.draw(st.integers(n, n + 20)))
                after = check_queue(pool, free)
                if stats["fallback"]:
                    assert after == before
            got = pool.get_new_blocks(n)
            if op == "place":
                assert [b.block_id for b in got] == after[:n]
            ids = [b.block_id for b in got]
            assert set(ids) <= free and len(set(ids)) == n, "a block handed out twice"
            free -= set(ids)
            hashes = [(step, i) for i in range(n)]
            pool.cache(got, hashes)
            cached.append(hashes)
            live.append(got)
        elif op == "touch" and cached:
            hit = pool.touch_prefix(data.draw(st.sampled_from(cached)))
            free -= {b.block_id for b in hit}
            if hit:
                live.append(hit)
        elif op == "free" and live:
            k = data.draw(st.integers(0, len(live) - 1))
            gone = live.pop(k)
            pool.free(gone)
            free |= {b.block_id for b in gone if b.ref_cnt == 0}
        ids = check_queue(pool, free)
        check_mirror(pool, ids)


def check_mirror(pool, ids):
    """The adapter's mirror (once placement has run) holds the real queue's order."""
    mirror = adapters._mirror_of(pool.free_block_queue)
    if mirror is not None:
        # Pops since the last told change are caught up with at the check, as the
        # adapter reads the mirror.
        assert mirror.in_step(pool.free_block_queue)
        assert not mirror.broken and mirror.count == len(ids)
        assert mirror.front(len(ids) + 5).tolist() == ids
        assert mirror.in_step(pool.free_block_queue)


def test_vllm_mirror_follows_each_queue_method_and_rebuilds_when_out_of_step():
    """Every method of vLLM's queue that changes it tells the mirror; a mirror out of
    step (here: told of a move that did not happen) is seen and read again."""
    pool = vllm_pool(32, caching=True)
    adapters.vllm_place_front(pool, [5, 6, 7])  # installs the mirror
    q = pool.free_block_queue
    got = pool.get_new_blocks(3)  # popleft_n
    one = q.popleft()
    q.remove(pool.blocks[20])
    q.append(pool.blocks[20])
    q.append_n([one, got[0]])
    q.prepend_n([got[2], got[1]])
    check_mirror(pool, queue_ids(pool))
    mirror = adapters._mirror_of(q)
    mirror.moved_front([9])  # the queue did not move: out of step, and seen
    assert not mirror.in_step(q) or mirror.front(1).tolist() != queue_ids(pool)[:1]
    mirror.removed(pool.blocks[9])
    mirror.removed(pool.blocks[9])  # not held any more: broken, never an exception
    assert mirror.broken and not mirror.in_step(q)
    before = queue_ids(pool)
    stats = adapters.vllm_place_front(pool, [40, 41, 42, 43])
    assert adapters._mirror_of(q) is mirror and not mirror.broken  # read again
    after = queue_ids(pool)
    check_mirror(pool, after)
    assert stats == reference_place([40, 41, 42, 43], before[:adapters.default_window(4)], "either")[2]
    assert [b.block_id for b in pool.get_new_blocks(4)] == after[:4]
    check_mirror(pool, queue_ids(pool))


def test_vllm_move_front_checks_before_it_relinks():
    from corun._vllm_queue import move_front

    pool = vllm_pool(8, caching=False)
    taken = pool.get_new_blocks(2)  # blocks 0 and 1 leave the queue
    before = queue_ids(pool)
    q = pool.free_block_queue
    mirror = corun._corun.VllmQueueMirror(q, len(pool.blocks))
    assert mirror.front(99).tolist() == before == [2, 3, 4, 5, 6, 7]
    links = [(b.prev_free_block, b.next_free_block) for b in pool.blocks]
    for bad, why in [([5, taken[1].block_id], "block 1 is not in the free queue: its ref_cnt is not 0"),
                     ([5, 8], "block 8 is not one of the pool's 8"),
                     ([5, -1], "block -1 is not one of the pool's 8"),
                     ([5, 3, 5], "block 5 is listed twice"),
                     ([4, 3, 2, 6, 5, 3], "block 3 is listed twice")]:
        with pytest.raises(RuntimeError, match=why):
            move_front(q, pool.blocks, bad)
        assert queue_ids(pool) == before, "nothing relinked"
        assert [(b.prev_free_block, b.next_free_block) for b in pool.blocks] == links, "every link as it was"
    # Blocks 3 and 4 unlinked, then block 5 fails (its ref_cnt, as if held behind the
    # wrappers): the two are linked back between their neighbours, last first.
    pool.blocks[5].ref_cnt = 1
    with pytest.raises(RuntimeError, match="block 5 is not in the free queue: its ref_cnt"):
        move_front(q, pool.blocks, [4, 3, 5])
    pool.blocks[5].ref_cnt = 0
    assert queue_ids(pool) == before and [(b.prev_free_block, b.next_free_block) for b in pool.blocks] == links
    move_front(q, pool.blocks, [5, 3])
    mirror.moved_front([5, 3])
    assert queue_ids(pool) == [5, 3, 2, 4, 6, 7] == mirror.front(99).tolist()
    check_queue(pool, set(before))
    move_front(q, pool.blocks, [7, 5, 3, 2])  # the tail, and blocks already in front
    mirror.moved_front([7, 5, 3, 2])
    assert queue_ids(pool) == [7, 5, 3, 2, 4, 6] == mirror.front(99).tolist()
    check_queue(pool, set(before))
    move_front(q, pool.blocks, [])
    assert queue_ids(pool) == [7, 5, 3, 2, 4, 6]
    assert mirror.front(2).tolist() == [7, 5] and mirror.in_step(q)
    assert [b.block_id for b in pool.get_new_blocks(6)] == [7, 5, 3, 2, 4, 6]


def test_vllm_move_front_moves_stretches_and_restores_on_any_failure():
    # Blocks asked in the order they already stand in the queue are unlinked as one
    # stretch (their inner links kept): every order, stretch or not, against a list.
    from corun._vllm_queue import move_front

    rng = random.Random(44)
    for trial in range(300):
        size = rng.randint(1, 24)
        pool = vllm_pool(size + 1, caching=False)
        held = pool.get_new_blocks(size)
        pool.free(rng.sample(held, rng.randint(0, size)))  # a shuffled queue
        q = pool.free_block_queue
        before = queue_ids(pool)
        if not before:
            continue
        # Slices of the queue's order (stretches), forward or not, and lone blocks.
        ids: list = []
        while rng.random() < 0.7:
            at = rng.randrange(len(before))
            part = before[at:at + rng.randint(1, 5)]
            ids += [x for x in (part if rng.random() < 0.7 else part[::-1]) if x not in ids]
        links = [(b.prev_free_block, b.next_free_block) for b in pool.blocks]
        bad = rng.random() < 0.3 and len(ids) > 0
        if bad:  # one block asked for taken behind the wrappers' back: nothing moves
            victim = pool.blocks[rng.choice(ids)]
            victim.ref_cnt = 1
            with pytest.raises(RuntimeError, match=f"block {victim.block_id} is not in the free queue"):
                move_front(q, pool.blocks, ids)
            victim.ref_cnt = 0
            assert [(b.prev_free_block, b.next_free_block) for b in pool.blocks] == links, (trial, ids)
            continue
        move_front(q, pool.blocks, ids)
        want = ids + [x for x in before if x not in ids]
        assert queue_ids(pool) == want, (trial, before, ids)
        check_queue(pool, set(before))
        assert [b.block_id for b in pool.get_new_blocks(len(want))] == want


def test_vllm_adapter_leaves_the_queue_alone_on_fallback():
    pool = vllm_pool(16, caching=False)
    before = queue_ids(pool)
    stats = adapters.vllm_place_front(pool, [3, 4, 5])  # the queue's front is one run already
    assert stats["fallback"] and queue_ids(pool) == before
    with pytest.raises(ValueError, match="Cannot get 17 free blocks"):
        adapters.vllm_place_front(pool, list(range(17)))


class StandInBlock:
    """A block with vLLM's queue links and no ``block_hash`` (a stand-in, as a user's test
    might write one): it caches no prefix, and the mirror must not need the attribute."""

    def __init__(self, block_id):
        self.block_id, self.ref_cnt = block_id, 0
        self.prev_free_block = self.next_free_block = None


def test_vllm_adapter_takes_blocks_without_a_prefix_hash():
    blocks = [StandInBlock(i) for i in range(8)]
    head, tail = StandInBlock(-1), StandInBlock(-1)
    order = [blocks[i] for i in (0, 3, 4, 5, 6, 7, 1, 2)]
    chain = [head, *order, tail]
    for a, b in zip(chain, chain[1:]):
        a.next_free_block, b.prev_free_block = b, a
    queue = type("Q", (), {})()
    queue.fake_free_list_head, queue.fake_free_list_tail = head, tail
    queue.num_free_blocks = len(order)
    pool = type("P", (), {})()
    pool.blocks, pool.free_block_queue = blocks, queue
    stats = adapters.vllm_place_front(pool, [20, 21, 22, 23])
    assert (stats["own"], stats["placed"], stats["fallback"]) == (2, 1, False)
    after = queue_ids(pool)
    assert sorted(after) == list(range(8)) and after[:4] == list(range(after[0], after[0] + 4))


def test_sglang_adapter_reorders_the_front_of_free_pages():
    alloc = SglangPool(40)
    a = alloc.alloc(30)  # pages 1..30; 31..40 stay free
    alloc.free_page_ids(a[2:6])  # 3..6, staged
    alloc.free_page_ids(a[10:20][::-1])  # 11..20, staged
    # An ascending run of 8 and a descending one of 4; 12 pages > the 10 unstaged, so the
    # adapter merges and sorts first, as alloc would: free = 3..6, 11..20, 31..40.
    # Ascending is the default (SGLang's backends merge only ascending runs); "either"
    # also places the descending run descending.
    dst = np.array([100, 101, 102, 103, 104, 105, 106, 107, 205, 204, 203, 202], np.int64)
    stats = adapters.sglang_place_front(alloc, dst, direction="either")
    assert stats == dict(bound=2, placed=2, own=6, split=0, fallback=False)
    got = alloc.alloc(len(dst))
    assert got.tolist() == [11, 12, 13, 14, 15, 16, 17, 18, 6, 5, 4, 3]
    assert alloc.free_pages.tolist() == [19, 20, *range(31, 41)]
    assert len(spans(dst, got.tolist(), direction="either")) == 2
    with pytest.raises(ValueError, match="window must be at least"):
        adapters.sglang_place_front(alloc, dst[:4], window=3)
    # A shortage changes nothing: SGLang's alloc then returns None, as without placement.
    before = alloc.free_pages.tolist()
    assert adapters.sglang_place_front(alloc, np.arange(100, 113)) is None
    assert alloc.free_pages.tolist() == before and alloc.alloc(13) is None


def test_either_runs_are_greedy_and_capped_pieces_set_their_own_direction():
    # The rule the README's contract states: 1, 2, 3, 2, 1 is [1 2 3] [2 1], and capped at 2
    # [1 2] [3 2] [1] (not a cut of the uncapped runs).
    a = [1, 2, 3, 2, 1]
    assert corun.runs(a, a, direction="either")[2].tolist() == [3, 2]
    s, _, lens = corun.runs(a, a, direction="either", max_len=2)
    assert (s.tolist(), lens.tolist()) == ([1, 3, 1], [2, 2, 1])


def test_vllm_mirror_tells_a_nested_change_once():
    """A port of the queue whose ``popleft`` goes through its own ``remove``: the change
    is told once (by the outer call), and the mirror stays in step."""
    pool = vllm_pool(16, caching=False)
    q = pool.free_block_queue

    def popleft():
        b = q.fake_free_list_head.next_free_block
        q.remove(b)
        return b

    q.popleft = popleft
    adapters.vllm_place_front(pool, [3, 4, 5])
    for _ in range(4):
        q.popleft()
        check_mirror(pool, queue_ids(pool))
    assert adapters._mirror_of(q).told == 4
