"""KV pages through the real engines (Mooncake Transfer Engine and NIXL over UCX) on
loopback, at a small size, every byte checked by the decode process (``e2e.py``); and the
corun way's answers to bad input: a page past the registered pool, an engine error
part-way, a peer that is gone.

Skipped when an engine is not installed, unless ``CORUN_REQUIRE_ENGINES=1`` (as in CI).
"""

import importlib.util
import os

import pytest

from lab import e2e, e2e_engines, workloads
from lab.peers import upstream

MODULES = {"mooncake": "mooncake.engine", "nixl": "nixl_cu12"}


def engine(name):
    try:
        found = importlib.util.find_spec(MODULES[name]) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        if os.environ.get("CORUN_REQUIRE_ENGINES") == "1":
            pytest.fail(f"CORUN_REQUIRE_ENGINES=1 but {name} is not installed")
        pytest.skip(f"{name} not installed")
    return name


@pytest.fixture(params=["mooncake", "nixl"])
def session(request):
    s = e2e.Session(engine(request.param), pool_pages=512, page_bytes=64)
    yield s
    s.close()


@pytest.mark.parametrize("name", ["mooncake", "nixl"])
def test_every_workload_every_way_verified(name):
    lines = []
    rows = e2e.run(engine(name), [128], workloads.WORKLOADS, page_bytes=64, rounds=1,
                   limit=10**9, report=lines.append)
    # Every way of every workload ran, and the decode side verified each (a failed
    # check raises).
    assert len(rows) == len(workloads.WORKLOADS)
    ways = {"mooncake": 4, "nixl": 3}[name]  # sglang, per_page, corun_* (Mooncake: two forms)
    assert len(lines) == len(workloads.WORKLOADS) * ways
    assert all(corun_ms > 0 and sglang_ms > 0 and per_page_ms > 0
               for _, _, _, corun_ms, sglang_ms, per_page_ms in rows)


def test_main_prints_the_summary_lines(capsys):
    for name in MODULES:
        engine(name)
    e2e.main(["--pages", "64", "--workloads", "breaks-5pct", "--rounds", "1", "--page-bytes", "64"])
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-2].startswith("e2e engine=mooncake workload=breaks-5pct pages=64 verified=yes corun_ms=")
    assert out[-1].startswith("e2e engine=nixl workload=breaks-5pct pages=64 verified=yes corun_ms=")
    for line in out[-2:]:
        assert " sglang_ms=" in line and " per_page_ms=" in line


def test_a_page_past_the_pool_is_refused_before_anything_is_posted(session):
    src, dst = workloads.make("breaks-5pct", 64, 512)
    bad = dst.copy()
    bad[17] = session.pool.pages  # one past the last page
    ways = e2e.WAYS[type(session.engine).name](session, src, bad, 10**9)
    corun_way = next(w for k, w in ways.items() if k.startswith("corun"))
    with pytest.raises(IndexError, match=f"dst page {session.pool.pages} at position 17 is outside the registered pool of 512 pages"):
        corun_way()
    session.check(src[:0], dst[:0], sent=0)  # nothing was written anywhere


def test_mooncake_error_part_way_stops_there():
    s = e2e.Session(engine("mooncake"), pool_pages=1024, page_bytes=64)
    try:
        n = 256  # singletons: 256 descriptors per buffer, two buffers per batch of 512
        src, dst = workloads.make("singletons", n, 1024)
        sa, da, ln = (list(c) for c in e2e.corun.transfer_descriptors(
            src, dst, s.src_bases, s.dst_bases, s.item_lens, form="lists"))
        da[600] = s.remote_base + s.pool.nbytes  # batch 1: past the decode registration
        with pytest.raises(e2e.TransferError, match=r"batch 1 \(descriptors 512\.\.1023 of 32768\).*descriptors 0\.\.511 were written, none after"):
            s.engine.post(sa, da, ln)
        # Batch 0 (buffers 0 and 1) arrived whole; batch 1 (buffers 2, 3) may be part
        # written; nothing after it was posted.
        s.check(src, dst, sent=2, unknown=(2, 3))
    finally:
        s.close()


def test_a_peer_that_is_gone_is_an_error_not_a_hang(session, monkeypatch):
    monkeypatch.setattr(e2e_engines, "XFER_TIMEOUT", 20.0)
    src, dst = workloads.make("trace-p1", 64, 512)
    session.proc.kill()
    session.proc.join()
    ways = e2e.WAYS[type(session.engine).name](session, src, dst, 10**9)
    corun_way = next(w for k, w in ways.items() if k.startswith("corun"))
    with pytest.raises(e2e.TransferError, match="to (127.0.0.1:[0-9]+|decode)"):
        corun_way()


def vllm_queue():
    """vLLM 0.33's free queue classes, or a skip (a failure where engines are required)."""
    try:
        upstream.vllm_queue_classes()
    except upstream.Missing:
        if os.environ.get("CORUN_REQUIRE_ENGINES") == "1":
            raise
        pytest.skip("vLLM 0.33 not installed")


@pytest.mark.parametrize("name", ["mooncake", "nixl"])
def test_replayed_requests_every_way_verified(name):
    # Requests from the real allocators (vLLM's free queue, SGLang's allocator port), every
    # way, each request checked by the decode side (a failed check raises).

    vllm_queue()
    lines = []
    got = e2e.replayed(engine(name), "vllm", 4, page_bytes=64, limit=10**9, report=lines.append)
    ways = list(e2e.REPLAY_WAYS) + (["vllm_ids", "ordered_ids"] if name == "nixl" else [])
    assert list(got) == ways and len(lines) == len(ways)
    asc, either, orderfree, placed = (got[w][0] for w in e2e.REPLAY_WAYS)
    # vLLM's recycled blocks: either-direction runs merge what ascending runs cannot, and
    # placement pairs the decode side's pages with prefill's runs.
    assert placed < either <= asc and orderfree <= asc
    if name == "nixl":
        # The prepped ways post one id per page and buffer, the same ids both ways; NIXL's
        # own merge leaves vLLM's order at its ascending runs and corun's order at its
        # either-direction runs.
        (ids, _, merged), (ids2, _, merged2) = got["vllm_ids"], got["ordered_ids"]
        assert ids == ids2 and ids >= asc
        assert merged == asc and merged2 == either < asc


def test_merge_order_lists_descending_runs_ascending_and_keeps_the_pairs():
    import numpy as np

    src = np.array([9, 8, 7, 1, 2, 3, 20, 40, 39], np.int64)
    dst = np.array([5, 4, 3, 10, 11, 12, 0, 31, 30], np.int64)
    s, d = e2e.merge_order(src, dst)
    assert s.tolist() == [7, 8, 9, 1, 2, 3, 20, 39, 40]
    assert d.tolist() == [3, 4, 5, 10, 11, 12, 0, 30, 31]
    assert sorted(zip(s.tolist(), d.tolist())) == sorted(zip(src.tolist(), dst.tolist()))
    # vLLM's ids: one per region and block, region-major (10 blocks a region).
    assert e2e.vllm_desc_ids([3, 1], 3, 10).tolist() == [3, 1, 13, 11, 23, 21]


REPLAY_LINE = (r"^e2e-replay engine=nixl allocator=vllm requests=2 verified=yes "
               r"asc=\d+/[\d.]+ms either=\d+/[\d.]+ms orderfree=\d+/[\d.]+ms "
               r"placed=\d+/[\d.]+ms vllm_ids=\d+/[\d.]+ms vllm_ids_nixl=\d+ "
               r"ordered_ids=\d+/[\d.]+ms ordered_ids_nixl=\d+$")


def test_replay_line_carries_the_prepped_ways(capsys):
    import re

    engine("nixl")

    vllm_queue()
    e2e.main(["--replay", "2", "--engines", "nixl", "--page-bytes", "64"])
    out = capsys.readouterr().out.strip().splitlines()
    vllm_line = next(line for line in out if line.startswith("e2e-replay engine=nixl allocator=vllm"))
    assert re.match(REPLAY_LINE, vllm_line), vllm_line
    sglang_line = next(line for line in out if line.startswith("e2e-replay engine=nixl allocator=sglang"))
    assert "vllm_ids" not in sglang_line
