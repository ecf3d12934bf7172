"""The SGLang plugin's ``place`` in the deployments beside the paged one: 1-token pages
(SGLang's default page size, ``TokenToKVPoolAllocator``) and several decode instances in
one batch, through SGLang 0.5.23's own classes and hook registry."""

import copy
import importlib

import numpy as np
import pytest

from corun import _sglang_life
from corun import sglang_plugin as plugin
from test_sglang_plugin import batch_for, clean, decode_side, extend, fragmented, stack, transfers  # noqa: F401 (clean: the fixture)


def token_allocator(need_sort, size=2000, seed=3):
    """A real ``TokenToKVPoolAllocator`` whose free list is fragmented by requests
    allocated until it is full and 60% of them freed in a random order."""
    import torch

    token = importlib.import_module("sglang.srt.mem_cache.allocator.token")
    alloc = token.TokenToKVPoolAllocator(size, torch.float16, "cpu", kvcache=None, need_sort=need_sort)
    rng = np.random.default_rng(seed)
    held = []
    while (got := alloc.alloc(int(rng.integers(1, 60)))) is not None:  # the whole pool
        held.append(got)
    for k in rng.permutation(len(held))[: len(held) * 3 // 5]:  # then 60% back, in any order
        alloc.free(held[k])
    return alloc


def free_set(alloc):
    return np.concatenate([alloc.free_pages.numpy(), alloc.release_pages.numpy()])


def one_token_batch(s, dst, tokens=None, backend="mooncake"):
    """:func:`batch_for` with the lengths the 1-token path reads (``tokens``, default
    one a decode page), no prefix."""
    import torch

    tokens = [len(d) for d in dst] if tokens is None else tokens
    batch = batch_for(s, dst, tokens, backend=backend)
    batch.prefix_lens = [0] * len(tokens)
    batch.seq_lens_cpu = torch.tensor(tokens, dtype=torch.int64)
    return batch


@pytest.mark.parametrize("need_sort", [True, False])
def test_one_token_pages_are_placed_through_sglangs_alloc(need_sort):
    s = stack()
    rng = np.random.default_rng(5)
    sizes = [37, 52, 18, 41]
    dst = decode_side(rng, sizes, descending=0)
    own_alloc = token_allocator(need_sort)
    alloc = copy.deepcopy(own_alloc)
    total_free = len(free_set(own_alloc))
    own = own_alloc.alloc(sum(sizes)).numpy()  # SGLang alone

    plugin.enable(features="place")
    before = plugin.counters()
    # As the alloc_for_extend hook notes the batch (its wiring: the test below).
    _sglang_life.current.tokens = one_token_batch(s, dst)
    got = alloc.alloc(sum(sizes)).numpy()  # SGLang's own alloc, hooked
    after = plugin.counters()
    assert after["errors"] == before["errors"]
    assert sum(after[k] - before[k] for k in ("placed", "partial", "fallback")) == len(sizes)
    assert getattr(_sglang_life.current, "tokens", None) is None  # one allocation a batch

    cuts = np.cumsum(sizes)[:-1]
    per_own = [transfers(p, d) for p, d in zip(np.split(own, cuts), dst)]
    per_got = [transfers(p, d) for p, d in zip(np.split(got, cuts), dst)]
    assert all(g <= o for g, o in zip(per_got, per_own)), (per_got, per_own)
    if not need_sort:  # freed stretches come back unsorted: placement pairs them better
        assert sum(per_got) < sum(per_own) and after["placed"] > before["placed"]
    # No page handed out twice; the books hold every other page once; SGLang's count.
    left = free_set(alloc)
    assert len(np.unique(got)) == len(got) == sum(sizes)
    assert not np.intersect1d(got, left).size and len(got) + len(left) == total_free
    assert set(got.tolist()) | set(left.tolist()) == set(own.tolist()) | set(free_set(own_alloc).tolist())
    assert alloc.available_size() == own_alloc.available_size()


def test_a_batch_whose_tokens_differ_from_the_allocation_is_left_to_sglang():
    s = stack()
    alloc = token_allocator(False)
    own = copy.deepcopy(alloc)
    plugin.enable(features="place")
    before = plugin.counters()
    _sglang_life.current.tokens = one_token_batch(s, [list(range(9000, 9020))])
    got = alloc.alloc(25).numpy()  # 25 tokens for a batch of 20: not the batch's allocation
    assert np.array_equal(got, own.alloc(25).numpy())
    assert plugin.counters()["fallback"] - before["fallback"] == 1
    assert plugin.counters()["errors"] == before["errors"]


class _Stop(Exception):
    pass


def test_alloc_for_extend_notes_its_batch_where_the_scheduler_calls_it():
    stack()
    schedule_batch = importlib.import_module("sglang.srt.managers.schedule_batch")
    sglangs = schedule_batch.alloc_for_extend
    plugin.enable(features="place")
    assert schedule_batch.alloc_for_extend is not sglangs  # rebound where it was imported
    errors = plugin.counters()["errors"]
    seen = []

    class Batch:
        def maybe_evict_swa(self):  # the first thing SGLang's alloc_for_extend does
            seen.append(_sglang_life.current.tokens)
            raise _Stop

    batch = Batch()
    with pytest.raises(_Stop):  # SGLang's own exception passes through, once
        schedule_batch.alloc_for_extend(batch)
    assert seen == [batch] and getattr(_sglang_life.current, "tokens", None) is None
    assert plugin.counters()["errors"] == errors  # SGLang's exception is not corun's
    plugin.disable()
    assert schedule_batch.alloc_for_extend is sglangs


def test_two_decode_instances_in_one_batch_are_placed_each_apart(caplog):
    # Two decode instances, each its own pool: their page ids overlap, so one batch can
    # hold the same decode page ids twice. No error, no traceback: each request apart.
    s = stack()
    rng = np.random.default_rng(8)
    sizes = [12, 9]
    first = decode_side(rng, sizes[:1], descending=0)[0]
    dst = [first, first[:9]]  # the second instance's pages repeat the first's ids
    seq = [n * 4 - 1 for n in sizes]
    own_alloc = fragmented(s, False)
    alloc = copy.deepcopy(own_alloc)
    own = extend(s, own_alloc, batch_for(s, dst, seq), seq)
    plugin.enable(features="place")
    before = plugin.counters()
    with caplog.at_level("WARNING", logger="corun"):
        got = extend(s, alloc, batch_for(s, dst, seq), seq)
    after = plugin.counters()
    assert after["errors"] == before["errors"] and "Traceback" not in caplog.text
    assert sum(after[k] - before[k] for k in ("placed", "partial", "fallback")) == 2
    assert all(transfers(g, d) <= transfers(o, d) for g, o, d in zip(got, own, dst))
    handed = np.concatenate(got)
    assert len(np.unique(handed)) == len(handed) == sum(sizes)


def test_placement_that_cannot_act_says_off_and_why(monkeypatch, caplog):
    s = stack()
    monkeypatch.setattr(plugin._counters, "_logged", set())
    # A budget of 0: no time to place in, so place is off (said), never "on".
    monkeypatch.setenv("CORUN_SGLANG_BUDGET_US", "0")
    with caplog.at_level("WARNING", logger="corun"):
        assert "place" not in plugin.enable(features="place")
    assert "SGLang plugin place: off (CORUN_SGLANG_BUDGET_US=0 gives placement no time)" in caplog.text
    assert "plugin on" not in caplog.text
    monkeypatch.delenv("CORUN_SGLANG_BUDGET_US")
    # An allocator placement does not know (a subclass that hands pages out its own way):
    # its batches go SGLang's way, each request counted, and the plugin says so once.
    assert plugin.enable(features="place") == {"place"}

    class Interleaved(type(fragmented(s, False))):
        pass

    alloc = fragmented(s, False)
    alloc.__class__ = Interleaved
    dst = decode_side(np.random.default_rng(2), [6, 5], descending=0)
    seq = [n * 4 - 1 for n in (6, 5)]
    before = plugin.counters()
    caplog.clear()
    with caplog.at_level("WARNING", logger="corun"):
        for _ in range(2):
            extend(s, alloc, batch_for(s, dst, seq), seq)
    after = plugin.counters()
    assert after["fallback"] - before["fallback"] == 4 and after["placed"] == before["placed"]
    assert caplog.text.count("SGLang plugin place: off (Interleaved is not PagedTokenToKVPoolAllocator") == 1


# --- one deployment matrix ----------------------------------------------------------
#
# Backend (Mooncake, NIXL: each its own TransferInfo and its module's grouping) x page
# size (1: TokenToKVPoolAllocator, SGLang's default; 16, 64: paged) x decode instances
# (1, 2: the second's page ids repeat the first's) x features (each alone, all), through
# SGLang's own allocators (need_sort, as P/D runs them) and its hook registry. Batches
# follow one another on one fragmented pool; each request's transfers with the plugin
# are no more than SGLang alone makes for the pages it would have taken at that moment.

MATRIX = [(b, p, i, f) for b in ("mooncake", "nixl") for p in (1, 16, 64) for i in (1, 2)
          for f in (("group",), ("place",), ("group", "place"))]


def matrix_allocator(s, page, rng):
    """SGLang's allocator for ``page`` (need_sort, as P/D makes it), fragmented by
    requests allocated and given back in a random order."""
    import torch

    if page == 1:
        token = importlib.import_module("sglang.srt.mem_cache.allocator.token")
        alloc = token.TokenToKVPoolAllocator(6000, torch.float16, "cpu", kvcache=None, need_sort=True)
        sizes = lambda: int(rng.integers(1, 60))  # noqa: E731
    else:
        alloc = s.paged.PagedTokenToKVPoolAllocator(600 * page, page, torch.float16, "cpu", kvcache=None,
                                                    need_sort=True)
        sizes = lambda: int(rng.integers(1, 8)) * page  # noqa: E731
    held = []
    while (got := alloc.alloc(sizes())) is not None and len(held) < 400:
        held.append(got)
    for k in rng.permutation(len(held))[: len(held) * 3 // 5]:
        alloc.free(held[k])
    alloc.merge_and_sort_free()
    return alloc


def matrix_alloc(s, alloc, batch, tokens, noted):
    """The batch's allocation, each request's new pages: through SGLang's own calls,
    the batch noted as SGLang's scheduler notes it (``noted``) or not (SGLang alone)."""
    if alloc.page_size > 1:
        return extend(s, alloc, batch if noted else None, tokens)
    _sglang_life.current.tokens = batch if noted else None  # as alloc_for_extend notes it
    got = alloc.alloc(sum(tokens)).numpy()
    return np.split(got, np.cumsum(tokens)[:-1])


@pytest.mark.parametrize("backend,page,instances,features", MATRIX,
                         ids=[f"{b}-p{p}-x{i}-{'+'.join(f)}" for b, p, i, f in MATRIX])
def test_the_plugin_holds_in_the_deployment(backend, page, instances, features, caplog):
    s = stack()
    conn = importlib.import_module(f"sglang.srt.disaggregation.{backend}.conn")
    sglangs = s.utils.group_concurrent_contiguous  # before the plugin: SGLang's own
    rng = np.random.default_rng(page * 10 + instances)
    alloc = matrix_allocator(s, page, rng)
    assert plugin.enable(features=",".join(features)) == set(features)
    plugin.reset_counters()
    alone = posted = requests = 0
    held = []
    with caplog.at_level("WARNING", logger="corun"):
        for _ in range(6):
            sizes = [int(rng.integers(2, 24 if page > 1 else 90)) for _ in range(int(rng.integers(2, 6)))]
            dst = decode_side(rng, sizes, descending=0)
            if instances == 2:  # the second instance's pages: ids the first's also uses
                dst[1::2] = [list(range(10_000 + 7 * k, 10_000 + 7 * k + n)) for k, n in enumerate(sizes[1::2])]
            tokens = [n * page - (page // 2) for n in sizes] if page > 1 else sizes
            own_alloc = copy.deepcopy(alloc)
            own = matrix_alloc(s, own_alloc, None, tokens, noted=False)
            got = matrix_alloc(s, alloc, one_token_batch(s, dst, tokens, backend), tokens, noted=True)
            for o, g, d in zip(own, got, dst):
                a = len(sglangs(np.asarray(o, np.int64), np.asarray(d, np.int64))[0])
                p = len(conn.group_concurrent_contiguous(np.asarray(g, np.int64), np.asarray(d, np.int64))[0])
                assert p <= a, (p, a)  # never more transfers than SGLang alone
                alone, posted, requests = alone + a, posted + p, requests + 1
            handed = np.concatenate(got)
            assert len(np.unique(handed)) == len(handed) == sum(sizes)  # no page twice
            assert alloc.available_size() == own_alloc.available_size()
            held.append(np.concatenate(got) * page if page > 1 else handed)
            if len(held) > 2:  # an earlier batch's pages go back
                alloc.free(__import__("torch").from_numpy(held.pop(int(rng.integers(0, len(held))))))
    on = plugin.counters()
    assert on["errors"] == 0 and "Traceback" not in caplog.text
    if "place" in features:
        assert on["placed"] + on["partial"] + on["fallback"] == requests, on
        assert on["placed"] > 0 and posted < alone, (on, posted, alone)
    else:
        assert on["placed"] == on["partial"] == on["fallback"] == 0
    if "group" in features:
        assert on["group_calls"] == requests


@pytest.mark.parametrize("page", [1, 16])
def test_sglangs_allocators_pickle_and_deep_copy_with_the_plugin_on_and_after(page):
    """SGLang's real allocators (``TokenToKVPoolAllocator``, ``PagedTokenToKVPoolAllocator``),
    placed in through SGLang's own calls: they pickle and deep-copy while the plugin is
    on and after ``disable()``, with no attribute of corun's on them, and a copy
    allocates as the original does."""
    import pickle

    s = stack()
    rng = np.random.default_rng(11)
    alloc = matrix_allocator(s, page, rng)
    assert plugin.enable(features="place") == {"place"}
    plugin.reset_counters()

    def corun_things(a):
        return [k for k, v in vars(a).items() if "corun" in k or type(v).__module__.startswith("corun")]

    def copies(a):
        for made in (pickle.loads(pickle.dumps(a)), copy.deepcopy(a)):
            assert corun_things(made) == []
            assert made.available_size() == a.available_size()
            n = 3 * page
            assert np.array_equal(made.alloc(n).numpy(), copy.deepcopy(a).alloc(n).numpy())

    try:
        sizes = [5, 9, 4]
        dst = decode_side(rng, sizes, descending=0)
        tokens = [n * page - (page // 2) for n in sizes] if page > 1 else sizes
        matrix_alloc(s, alloc, one_token_batch(s, dst, tokens), tokens, noted=True)
        c = plugin.counters()
        assert c["placed"] + c["partial"] + c["fallback"] == len(sizes) and c["errors"] == 0
        copies(alloc)
    finally:
        plugin.disable()
    assert corun_things(alloc) == []
    copies(alloc)
