"""The replay harness (replay.py) on vLLM's real free queue and SGLang's allocator port:
its report lines, and what the ways must satisfy on any page lists."""

import os
import re

import numpy as np
import pytest

from lab import replay, workloads
from lab.peers import pools, upstream

LINE = re.compile(
    r"^replay allocator=(vllm|sglang) workload=(\S+) requests=(\d+) pages=(\d+) asc=(\d+) "
    r"either=(\d+) orderfree=(\d+) gather_wrs=(\d+) gather_wrs_either=(\d+) "
    r"placed=(\d+) bound=(\d+) hit_rate=(\d\.\d+/\d\.\d+|-/-) prefix_hits=(?:\d+/\d+|-/-) "
    r"adapter_us=(\d+\.\d) saved_us=(-?\d+\.\d) partial=(\d+) budget_kept=(\d\.\d{3}|-) "
    r"place_us_p50=(\d+) place_us_p99=(\d+) place_us_max=(\d+) over_budget=(\d+)$"
)


def vllm_installed():
    try:
        upstream.vllm_queue_classes()
        return True
    except upstream.Missing:
        if os.environ.get("CORUN_REQUIRE_ENGINES") == "1":
            raise
        return False


def test_workloads_by_name_and_the_grid():
    # The grid replay.py has always run (names, parameters), and any name of the form.
    grid = [f"p{pt}-occ{occ}-g0" for pt in (1, 16, 128) for occ in (50, 80, 95)]
    assert workloads.names() == grid + ["p16-occ80-g5", "p16-occ80-g30"]
    assert [w.name for w in workloads.workloads(True)] == ["p16-occ80-g0", "p16-occ80-g30"]
    assert workloads.by_name("p128-occ95-g0") == workloads.Workload("p128-occ95-g0", 128, 0.95, 0.0, 0.3)
    assert workloads.by_name("p16-occ80-g30") == workloads.Workload("p16-occ80-g30", 16, 0.8, 0.3, 0.3)
    assert workloads.by_name("p4-occ60-g10").page_tokens == 4  # not in the grid: parsed
    for bad in ["p16-occ80", "p0-occ80-g0", "p16-occ100-g0", "trace-p1", "", None]:
        with pytest.raises(ValueError, match="p<tokens>-occ<percent>-g<percent>"):
            workloads.by_name(bad)


def test_upstream_missing_ends_with_the_one_hint():
    with pytest.raises(upstream.Missing) as e:
        upstream.path("corun_no_such_distribution", "x.py")
    assert str(e.value).endswith(upstream.HINT)
    with pytest.raises(upstream.Missing, match="is it the tested version"):
        upstream.path("numpy", "no/such/file.py")


def test_ways_on_hand_made_lists():
    # A descending run (vLLM's recycled blocks), an ascending one, a singleton.
    src = np.array([99, 98, 97, 10, 11, 50], np.int32)
    dst = np.array([9, 8, 7, 20, 21, 3], np.int32)
    assert replay.WAYS["asc"](src, dst) == 5  # [99] [98] [97] [10 11] [50]
    assert replay.WAYS["either"](src, dst) == 3
    assert replay.WAYS["orderfree"](src, dst) == 3  # sorted by dst: 3 | 7 8 9 | 20 21
    assert replay.WAYS["gather_wrs"](src, dst) == 5  # dst runs: [9] [8] [7] [20 21] [3]
    assert replay.WAYS["gather_wrs_either"](src, dst) == 3  # [9 8 7] [20 21] [3]


def test_sglang_port_hands_out_sorted_free_pages():
    pool = pools.SglangPool(10)
    a = pool.alloc(4)
    assert a.tolist() == [1, 2, 3, 4]
    pool.free_page_ids([3, 1])
    b = pool.alloc(6)  # exactly what is left unstaged
    assert b.tolist() == [5, 6, 7, 8, 9, 10]
    c = pool.alloc(2)  # short: the staged pages are merged and sorted first
    assert c.tolist() == [1, 3]
    assert pool.alloc(1) is None


@pytest.mark.skipif(not vllm_installed(), reason=f"vLLM not installed ({upstream.HINT})")
def test_vllm_free_queue_is_vllms_own_and_reverses_frees():
    classes = upstream.vllm_queue_classes()
    assert classes[1].__name__ == "FreeKVCacheBlockQueue"
    pool = pools.VllmPool(classes, 16, caching=False)
    first = pool.get_new_blocks(4)
    assert [b.block_id for b in first] == [0, 1, 2, 3]
    pool.free(first)
    # Freed in reverse, at the head: recycled blocks come out descending.
    assert [b.block_id for b in pool.get_new_blocks(4)] == [3, 2, 1, 0]


@pytest.mark.skipif(not vllm_installed(), reason=f"vLLM not installed ({upstream.HINT})")
def test_quick_replay_report(capsys):
    replay.main(["--quick"])
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("replay ")]
    assert len(lines) == 4
    for line in lines:
        m = LINE.match(line)
        assert m, line
        asc, either, orderfree, wrs, wrs_either, placed, bound = map(int, m.groups()[4:11])
        assert either <= asc and orderfree <= asc and wrs_either <= wrs
        # Placement never does worse than the allocator's own pages, nor better than the
        # first side's runs (its lists differ from the unplaced replay's only in pages).
        assert bound <= placed <= either
        if m.group(1) == "vllm":
            without, with_ = map(float, m.group(12).split("/"))
            assert with_ >= without - 0.01  # at most 1 point of hit rate
        else:
            assert m.group(12) == "-/-"
        # The plugin's placement under its budget: its call times' order (their values
        # are the lab's to report, not a test's), and most of what placement saves kept.
        kept, p50, p99, top = m.group(16), *map(int, m.groups()[16:19])
        assert p50 <= p99 <= top
        if kept != "-":
            assert float(kept) >= 0.9, line
    vllm_g0 = LINE.match(lines[0]).groups()
    assert vllm_g0[0] == "vllm" and vllm_g0[1].endswith("-g0")
    # Gather lists over either-direction destination runs: at least 3x fewer requests.
    assert int(vllm_g0[7]) >= 3 * int(vllm_g0[8])
    # Placement at 80% occupancy: at least 1.5x fewer descriptors than either-direction
    # runs of vLLM's own pages.
    assert 2 * int(vllm_g0[5]) >= 3 * int(vllm_g0[9])


@pytest.mark.parametrize("blocks", [64, 128, 256, 1000, 4000])
def test_placement_never_costs_a_prefix_cache_hit(blocks):
    # A prefix-sharing stream (30% of the requests repeat an earlier one's prefix) through
    # vLLM's real free queue with prefix caching on: placement takes past the blocks
    # get_new_blocks takes anyway only blocks holding no cached prefix, so the decode
    # side's hits with it are at least those without (issue 43; the replay's
    # prefix_hits=).
    if not vllm_installed():
        pytest.skip("vLLM 0.33 not installed")
    w = workloads.by_name("p16-occ80-g0")
    requests = 400 if blocks < 1000 else 250
    own = replay.replay("vllm", w, requests, blocks, blocks)
    placed = replay.replay("vllm", w, requests, blocks, blocks, window=None)
    assert own.hits["decode"] > 0
    assert placed.hits["decode"] >= own.hits["decode"], (own.hits, placed.hits)
    assert len(placed.placements) > 0


def test_placement_keeps_the_prefixes_it_would_have_evicted():
    # 1-token pages over the replay's pools: a window of 4n + 64 reaches deep into the
    # LRU tail of cached blocks. Taking from it cost 12% of the decode side's hits here
    # (97,006 -> 84,938 blocks in 1,500 requests); taking only uncached blocks past the
    # ones vLLM takes anyway costs none.
    if not vllm_installed():
        pytest.skip("vLLM 0.33 not installed")
    w = workloads.by_name("p1-occ80-g0")
    own = replay.replay("vllm", w, 1500, 40000, 60000)
    placed = replay.replay("vllm", w, 1500, 40000, 60000, window=None)
    assert placed.hits["decode"] >= own.hits["decode"] > 0, (own.hits, placed.hits)
    saved = sum(st["own"] - st["placed"] for st in placed.placements)
    assert saved > 0  # and placement still places
