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


def one_token_batch(s, dst):
    import torch

    sizes = [len(d) for d in dst]
    batch = batch_for(s, dst, sizes)
    batch.prefix_lens = [0] * len(sizes)
    batch.seq_lens_cpu = torch.tensor(sizes, dtype=torch.int64)
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
