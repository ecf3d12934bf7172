"""Placement's budget per call (``corun._budget``): the setting, what a call may place,
and placement of a request's head (``pages=``) through the adapters, never worse than
the allocator's own pages. Times are never asserted: the estimates are driven with
recorded figures."""

import numpy as np
import pytest

from corun import adapters, count_runs
from corun._budget import DEFAULT_US, SHARE, Budget
from pools import SglangPool
from test_place import queue_ids, vllm_pool


def test_the_setting_is_read_and_a_bad_one_names_the_variable():
    b = Budget("CORUN_TEST_BUDGET_US")
    assert b.configure({}) == DEFAULT_US == 2000
    assert b.configure({"CORUN_TEST_BUDGET_US": " "}) == DEFAULT_US
    assert b.configure({"CORUN_TEST_BUDGET_US": "500"}) == 500
    assert b.configure({"CORUN_TEST_BUDGET_US": "0"}) == 0
    for bad in ("-1", "1.5", "2ms", "lots"):
        with pytest.raises(ValueError, match=f"CORUN_TEST_BUDGET_US='{bad}' is not a budget"):
            b.configure({"CORUN_TEST_BUDGET_US": bad})


def test_zero_places_nothing_and_a_small_request_is_placed_whole():
    b = Budget("X")
    b.us = 0
    assert b.pages(10, lambda k: k) == 0 and b.limit_ns(10) == 0
    b.us = DEFAULT_US
    assert b.pages(0, lambda k: k) == 0
    assert b.pages(100, lambda k: 5 * k + 64) == 100  # first estimates: 400 ns an item


def test_a_request_past_the_budget_is_cut_to_what_fits():
    b = Budget("X")
    items = lambda k: 5 * k + 64  # noqa: E731
    k = b.pages(1_000_000, items)
    assert 0 < k < 1_000_000
    assert b.estimate_ns(items(k)) <= 0.9 * b.limit_ns(1_000_000) < b.estimate_ns(items(k + 1))
    # Calls measured cheaper than the first estimate let more through (at sizes seen).
    for _ in range(50):
        b.placed(200_000, 200_000 * 40)  # 40 ns an item
    assert b.pages(1_000_000, items) > k
    # A larger call than any measured is estimated at a higher rate: 1.25x a doubling.
    assert b.item_ns(800_000) == pytest.approx(1.25**2 * b.item_ns(200_000))
    assert b.item_ns(200_001) == pytest.approx(b.item_ns(200_000), rel=1e-4)  # no step at a size class's edge
    # What fits aims at 90% of the budget, the rest left to a shared machine's noise.
    k = b.pages(1_000_000, items)
    assert b.estimate_ns(items(k)) <= 0.9 * b.limit_ns(1_000_000) < b.estimate_ns(items(k + 1))


def test_a_call_past_its_limit_is_counted_over():
    import time

    b = Budget("X")
    b.us = 1  # 1 µs: a call that spins for a millisecond of CPU is past it
    def spin():
        b.pages(10, lambda k: k)
        end = time.thread_time_ns() + 1_000_000
        while time.thread_time_ns() < end:
            pass
        return 10
    b.run(spin)
    b.us = 10_000_000  # 10 s: an empty call is within it
    b.run(lambda: b.pages(10, lambda k: k))
    assert b.times()["over"] == 1 and b.times()["calls"] == 2
    b.reset()
    assert b.times()["over"] == 0


def test_a_collection_never_falls_in_a_call_and_every_call_is_timed():
    import gc

    b = Budget("X")
    seen = []
    b.run(lambda: seen.append(gc.isenabled()) or 7)
    assert seen == [False] and gc.isenabled()
    assert b.times()["calls"] == 1
    with pytest.raises(KeyError):  # a failing call is timed too, and the collector back
        b.run(lambda: {}["x"])
    assert b.times()["calls"] == 2 and gc.isenabled()


def test_the_budget_is_a_quarter_of_the_stacks_own_allocation_when_that_is_larger():
    b = Budget("X")
    assert b.limit_ns(1_000_000) == DEFAULT_US * 1000
    b.stack(1000, 1000 * 800)  # the stack: 800 ns a page
    b.stack(10, 1)  # too small to tell a rate: ignored
    assert b.limit_ns(1_000_000) == pytest.approx(SHARE * 800 * 1_000_000)
    assert b.limit_ns(100) == DEFAULT_US * 1000
    b.stack(1000, 1000 * 100)  # a cheaper one: the lowest rate stands
    assert b.limit_ns(1_000_000) == pytest.approx(SHARE * 100 * 1_000_000)


def test_times_are_percentiles_of_the_calls():
    b = Budget("X")
    assert b.times() == {"calls": 0, "p50_us": 0.0, "p99_us": 0.0, "max_us": 0.0, "over": 0}
    for us in range(1, 101):
        b.placed(10, us * 1000)
    t = b.times()
    assert (t["calls"], t["p50_us"], t["p99_us"], t["max_us"]) == (100, 51.0, 100.0, 100.0)
    b.reset()
    assert b.times()["calls"] == 0


def test_head_cuts_at_the_last_run_boundary():
    first = np.array([10, 11, 12, 50, 51, 52, 53, 9, 8, 7], np.int64)
    assert adapters.head(first, 99, "ascending") == 10
    assert adapters.head(first, 0, "ascending") == 0
    assert adapters.head(first, 5, "ascending") == 3  # inside the run 50..53
    assert adapters.head(first, 8, "ascending") == 8  # 9 and 8: two runs of one page ascending
    assert adapters.head(first, 9, "either") == 7
    assert adapters.head(first, 2, "ascending") == 2  # one run longer than the head


def test_a_vllm_request_placed_by_its_head_is_never_worse_than_the_queue():
    pool = vllm_pool(256, caching=True)
    taken = pool.get_new_blocks(200)
    for a, b in ((5, 25), (40, 41), (60, 90), (100, 103), (150, 190)):
        pool.free(taken[a:b])
    remote = list(range(500, 520)) + list(range(700, 730))
    for pages in (0, 7, 20, 35, 50):
        before = queue_ids(pool)
        stats = adapters.vllm_place_front(pool, remote, direction="ascending", pages=pages)
        after = queue_ids(pool)
        assert sorted(after) == sorted(before)
        own = count_runs(remote, before[: len(remote)])
        got = after[: len(remote)]
        assert stats["own"] == own and stats["placed"] == count_runs(remote, got)
        if stats["fallback"]:
            assert after == before
        else:
            assert stats["placed"] < own
    # A queue in a shuffled order: a head of 20 (the first run) placed is better already.
    pool2 = vllm_pool(256, caching=True)
    t2 = pool2.get_new_blocks(pool2.free_block_queue.num_free_blocks)
    for i in np.random.default_rng(5).permutation(len(t2)):
        pool2.free([t2[i]])
    stats = adapters.vllm_place_front(pool2, remote, direction="ascending", pages=20)
    assert not stats["fallback"] and stats["placed"] < stats["own"]
    got = [b.block_id for b in pool2.get_new_blocks(len(remote))]
    assert count_runs(remote, got) == stats["placed"]


def test_an_sglang_batch_placed_as_far_as_the_budget_goes():
    dst = [np.arange(100, 108), np.arange(300, 312), np.arange(500, 506)]

    def fresh():
        alloc = SglangPool(80)
        a = alloc.alloc(60)
        for lo, hi in ((2, 10), (20, 34), (40, 47)):
            alloc.free_page_ids(a[lo:hi][::-1])
        alloc.merge_and_sort_free()
        return alloc

    whole = adapters.sglang_place_batch(fresh(), dst)
    for pages in (0, 5, 8, 14, 20, 26, None):
        alloc = fresh()
        front = alloc.free_pages[:26].copy()
        runs = adapters.sglang_place_batch(alloc, dst, pages=pages)
        new = alloc.free_pages[:26]
        assert sorted(new.tolist()) == sorted(front.tolist())  # the same pages leave
        assert all(p <= o for o, p in runs)
        if pages == 0:
            assert runs == [(o, o) for o, _ in whole] and new.tolist() == front.tolist()
        # Requests past the budget keep SGLang's own pages.
        ends = np.cumsum([len(d) for d in dst])
        for (o, p), end, start in zip(runs, ends, ends - [len(d) for d in dst]):
            if pages is not None and start >= pages:
                assert p == o
    assert adapters.sglang_place_batch(fresh(), dst, pages=None) == whole
