"""corun.sglang_plugin inside SGLang 0.5.23's own modules (the installed wheel's, imported
as SGLang imports them): the drop-in rebound in every backend that imported the helper,
placement through the real ``alloc_paged_token_slots_extend`` ->
``PagedTokenToKVPoolAllocator.alloc_extend``, and SGLang's own way whenever corun's part
fails.

SGLang's modules need its runtime stack to import (torch, transformers and some 20 more
packages; see python/README.md): without it those tests skip, naming what is missing.
The switch, the feature names and the version check are tested without it.
"""

import importlib
import importlib.util
import logging
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import corun
from corun import sglang_plugin as plugin

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import sglang_ref  # noqa: E402

BACKENDS = [m for m in plugin.GROUP_MODULES if m != "sglang.srt.disaggregation.common.utils"]


@pytest.fixture(autouse=True)
def clean():
    plugin.disable()
    yield
    plugin.disable()


_stack = {}


def stack():
    """SGLang's allocation and transfer modules, or a skip naming what is missing (tried
    once: a failed import leaves sglang's package half imported)."""
    if not sglang_ref.available():
        if os.environ.get("CORUN_REQUIRE_ENGINES") == "1":
            pytest.fail(f"CORUN_REQUIRE_ENGINES=1 but SGLang is missing: {sglang_ref.INSTALL}")
        pytest.skip(f"SGLang not installed ({sglang_ref.INSTALL})")
    if not _stack and importlib.util.find_spec("torch") is None:
        _stack["missing"] = "SGLang's modules need torch (and its runtime stack): not installed"
    if not _stack:
        try:
            _stack["modules"] = SimpleNamespace(
                utils=importlib.import_module("sglang.srt.disaggregation.common.utils"),
                allocation=importlib.import_module("sglang.srt.mem_cache.allocation"),
                paged=importlib.import_module("sglang.srt.mem_cache.allocator.paged"),
                mooncake=importlib.import_module("sglang.srt.disaggregation.mooncake.conn"),
            )
        except ImportError as e:
            _stack["missing"] = f"SGLang's modules need its runtime stack to import here: {e}"
    if "missing" in _stack:
        if os.environ.get("CORUN_REQUIRE_SGLANG_STACK") == "1":  # CI's vLLM step has it
            pytest.fail(f"CORUN_REQUIRE_SGLANG_STACK=1 but {_stack['missing']}")
        pytest.skip(_stack["missing"])
    return _stack["modules"]


# --- the switch, without SGLang's stack ---------------------------------------------


def test_features_by_name_env_and_errors(monkeypatch):
    assert plugin._parse("all") == {"group", "place"}
    assert plugin._parse("group, place") == {"group", "place"}
    assert plugin._parse(["place"]) == {"place"}
    assert plugin._parse("ALL") == {"group", "place"}
    with pytest.raises(ValueError, match="features: unknown feature 'grup'"):
        plugin.enable(features="grup")
    with pytest.raises(TypeError, match="features must be a string or a list of strings, got NoneType"):
        plugin.enable(features=None)
    calls = []
    monkeypatch.setattr(plugin, "enable", lambda features: calls.append(features) or frozenset())
    plugin.enable_from_env({})
    plugin.enable_from_env({"CORUN_SGLANG": " "})
    plugin.enable_from_env({"CORUN_SGLANG": "group,place"})
    assert calls == ["group,place"]


def test_another_sglang_version_patches_nothing_and_says_so_once(monkeypatch, caplog):
    monkeypatch.setattr(plugin, "_sglang_version", lambda: "0.5.22")
    patched = []
    monkeypatch.setattr(plugin, "_enable_group", lambda: patched.append("group") or True)
    monkeypatch.setattr(plugin, "_enable_place", lambda: patched.append("place") or True)
    monkeypatch.setattr(plugin._counters, "_logged", set())
    with caplog.at_level(logging.WARNING, logger="corun"):
        assert plugin.enable("all") == frozenset()
        assert plugin.enable("all") == frozenset()
    assert patched == [] and plugin.counters()["unsupported_version"] == 1
    assert [r.getMessage() for r in caplog.records].count(
        "corun: SGLang 0.5.22 is not one corun was tested with (0.5.23): nothing patched") == 1


# --- group: the drop-in in every module that imported it ------------------------------


def importers():
    """The backend modules that import here (MoRI's needs AMD's ``mori``: absent)."""
    mods = {}
    for name in BACKENDS:
        try:
            mods[name] = importlib.import_module(name)
        except ImportError as e:
            assert name.endswith("mori.conn") and "mori" in str(e), e
    return mods


def pairs(rng, n):
    step = np.where(rng.random(n) < 0.1, rng.integers(2, 9, n), 1)
    src = np.cumsum(step).astype(np.int32)
    dst = np.where(rng.random(n) < 0.5, np.arange(n), rng.permutation(n)).astype(np.int32)
    return src, dst


def test_group_rebinds_every_importer_equal_results_and_restores():
    s = stack()
    mods = importers()
    assert len(mods) >= 3  # mooncake, nixl, ascend
    own = s.utils.group_concurrent_contiguous
    assert all(m.group_concurrent_contiguous is own for m in mods.values())
    before = plugin.counters()["rebinds"]
    assert "group" in plugin.enable(features="group")
    assert plugin.counters()["rebinds"] - before == len(mods) + 1  # and the defining module
    rng = np.random.default_rng(7)
    for name, mod in [*mods.items(), ("utils", s.utils)]:
        f = mod.group_concurrent_contiguous
        assert f is not own and f.__wrapped__ is corun.group_concurrent_contiguous, name
        for n in (0, 1, 2, 50, 3000):
            src, dst = pairs(rng, n)
            assert f(src, dst) == own(src, dst)
    plugin.disable()
    assert s.utils.group_concurrent_contiguous is own
    assert all(m.group_concurrent_contiguous is own for m in mods.values())


def test_group_failure_goes_sglangs_way(monkeypatch):
    s = stack()
    mods = importers()
    own = s.utils.group_concurrent_contiguous

    def broken(src, dst):
        raise RuntimeError("injected")

    monkeypatch.setattr(corun, "group_concurrent_contiguous", broken)
    plugin.enable(features="group")
    errors = plugin.counters()["errors"]
    src, dst = pairs(np.random.default_rng(1), 400)
    for mod in mods.values():
        assert mod.group_concurrent_contiguous(src, dst) == own(src, dst)
    got = plugin.counters()
    assert got["errors"] - errors == len(mods) and got["group_errors"] >= len(mods)


# --- place: through SGLang's real allocation path -------------------------------------

PAGE = 4


def fragmented(s, need_sort):
    """A real ``PagedTokenToKVPoolAllocator`` of 400 pages whose free list is fragmented
    by requests allocated and freed in a random order, as serving leaves it."""
    import torch

    alloc = s.paged.PagedTokenToKVPoolAllocator(
        400 * PAGE, PAGE, torch.float16, "cpu", kvcache=None, need_sort=need_sort)
    rng = np.random.default_rng(3)
    held = [alloc.alloc(int(rng.integers(1, 12)) * PAGE) for _ in range(40)]
    for k in rng.permutation(len(held))[:25]:
        alloc.free(held[k])
    return alloc


def clone(alloc):
    import copy

    return copy.deepcopy(alloc)


def batch_for(s, decode_pages, seq_tokens, decode_prefix=None):
    """A batch of requests whose decode side sent ``decode_pages`` (None: not yet), each
    as SGLang's prefill side holds it: a ``disagg_kv_sender`` whose ``kv_mgr`` has the
    room's transfer infos (the Mooncake backend's real ``TransferInfo``)."""
    reqs = []
    for i, (pages, n) in enumerate(zip(decode_pages, seq_tokens)):
        infos = {}
        if pages is not None:
            infos["sess"] = s.mooncake.TransferInfo(
                room=i, endpoint="", dst_port=0, mooncake_session_id="sess",
                dst_kv_indices=np.asarray(pages, np.int32), dst_aux_index=0,
                dst_state_indices=[], required_dst_info_num=1, is_dummy=False)
        kv_mgr = SimpleNamespace(transfer_infos={i: infos} if infos else {})
        reqs.append(SimpleNamespace(
            bootstrap_room=i, disagg_kv_sender=SimpleNamespace(kv_mgr=kv_mgr),
            disagg_decode_prefix_len=(decode_prefix or [0] * len(seq_tokens))[i]))
    return SimpleNamespace(reqs=reqs)


def extend(s, alloc, batch, seq_tokens, prefix_tokens=None):
    """SGLang's own ``alloc_paged_token_slots_extend`` for ``batch`` (no prefix cache to
    evict from); returns each request's new pages, in order."""
    import torch

    prefix = torch.tensor(prefix_tokens or [0] * len(seq_tokens), dtype=torch.int64)
    seq = torch.tensor(seq_tokens, dtype=torch.int64)
    last_loc = torch.where(prefix > 0, prefix - 1, torch.full_like(prefix, -1))
    tree = SimpleNamespace(token_to_kv_pool_allocator=alloc, supports_prefix_sharing=lambda: False,
                           pretty_print=lambda: None, available_and_evictable_str=lambda: "")
    out = s.allocation.alloc_paged_token_slots_extend(
        tree_cache=tree, prefix_lens=prefix, prefix_lens_cpu=prefix, seq_lens=seq,
        seq_lens_cpu=seq, last_loc=last_loc, extend_num_tokens=int((seq - prefix).sum()),
        batch=batch)
    tokens = out.numpy()
    pages, at = [], 0
    for p, n in zip(prefix.tolist(), seq.tolist()):
        t = tokens[at:at + n - p]
        at += n - p
        # the tokens past the prefix's last page start on new pages
        new = t[(-p) % PAGE:] if p % PAGE else t
        pages.append(new[::PAGE] // PAGE)
    return pages


def free_set(alloc):
    return np.concatenate([alloc.free_pages.numpy(), *[x.numpy() for x in alloc.staged_pages]])


def decode_side(rng, sizes):
    """Decode pages in runs (ascending and descending), as a decode pool hands them out."""
    base, out = 10_000, []
    for n in sizes:
        pages = []
        while len(pages) < n:
            k = min(n - len(pages), int(rng.integers(3, 9)))
            run = np.arange(base, base + k)
            pages.extend((run if rng.random() < 0.5 else run[::-1]).tolist())
            base += k + int(rng.integers(1, 40))
        out.append(pages)
    return out


def either_runs(src, dst):
    return len(corun.runs(np.asarray(src), np.asarray(dst), direction="either")[2])


@pytest.mark.parametrize("need_sort", [True, False])
def test_placement_through_alloc_extend_for_a_batch(need_sort):
    s = stack()
    rng = np.random.default_rng(5)
    sizes = [9, 14, 6, 11]
    seq = [n * PAGE - 1 for n in sizes]  # a partial last page each
    dst = decode_side(rng, sizes)
    own_alloc = fragmented(s, need_sort)
    alloc = clone(own_alloc)
    total_free = len(free_set(own_alloc))

    own = extend(s, own_alloc, batch_for(s, dst, seq), seq)
    plugin.enable(features="place")
    before = plugin.counters()
    got = extend(s, alloc, batch_for(s, dst, seq), seq)
    after = plugin.counters()
    assert after["placed"] - before["placed"] == len(sizes) and after["errors"] == before["errors"]

    for mine, theirs, n in zip(got, own, sizes):
        assert len(mine) == len(theirs) == n
    runs_own = sum(either_runs(p, d) for p, d in zip(own, dst))
    runs_got = sum(either_runs(p, d) for p, d in zip(got, dst))
    print(f"either-direction runs: SGLang's own pages {runs_own}, placed {runs_got}")
    assert runs_got < runs_own, (runs_got, runs_own)
    # No page handed out twice; the allocator's books hold every other page, once.
    handed = np.concatenate(got)
    left = free_set(alloc)
    assert len(np.unique(handed)) == len(handed)
    assert len(np.unique(left)) == len(left) and not np.intersect1d(handed, left).size
    assert len(handed) + len(left) == total_free
    assert set(handed.tolist()) | set(left.tolist()) == set(np.concatenate(own).tolist()) | set(
        free_set(own_alloc).tolist())
    assert alloc.available_size() == own_alloc.available_size()


def test_placement_with_prefixes_on_both_sides():
    # A prefill prefix hit of 2 pages plus a partial one, and a decode side with a prefix of
    # its own of 1 page: the new pages pair with the decode list from the right position.
    s = stack()
    alloc = fragmented(s, True)
    prefix, seq, decode_prefix = [2 * PAGE + 1], [12 * PAGE], [PAGE]
    # positions 1..11 on decode's list; new pages are positions 3..11
    dst = [list(range(5000, 5011))]
    batch = batch_for(s, dst, seq, decode_prefix)
    want = plugin.batch_destinations(batch, prefix, seq, PAGE)
    assert want.tolist() == list(range(5002, 5011))
    plugin.enable(features="place")
    got = extend(s, alloc, batch, seq, prefix)
    assert len(got[0]) == 9 and either_runs(got[0], want) < 9


def test_unknown_decode_pages_leave_the_batch_to_sglang():
    s = stack()
    sizes, seq = [5, 7], [5 * PAGE, 7 * PAGE]
    own_alloc = fragmented(s, True)
    alloc = clone(own_alloc)
    dst = [list(range(100, 105)), None]  # the second request's decode side has not answered
    own = extend(s, own_alloc, batch_for(s, dst, seq), seq)
    plugin.enable(features="place")
    before = plugin.counters()["fallback"]
    got = extend(s, alloc, batch_for(s, dst, seq), seq)
    assert plugin.counters()["fallback"] - before == 2
    assert [g.tolist() for g in got] == [o.tolist() for o in own]


def test_a_shortage_stays_sglangs_none():
    s = stack()
    alloc = fragmented(s, True)
    free = len(free_set(alloc))
    seq = [(free + 1) * PAGE]
    plugin.enable(features="place")
    errors = plugin.counters()["errors"]
    batch = batch_for(s, [list(range(free + 1))], seq)
    # SGLang's alloc_extend returns None; its caller turns that into its own OOM error.
    with pytest.raises(RuntimeError, match="Prefill out of memory"):
        extend(s, alloc, batch, seq)
    assert plugin.counters()["errors"] == errors
    assert len(free_set(alloc)) == free


def test_placement_failure_goes_sglangs_way(monkeypatch):
    s = stack()
    sizes = [8, 8, 8]
    seq = [n * PAGE for n in sizes]
    dst = decode_side(np.random.default_rng(9), sizes)
    own_alloc = fragmented(s, False)
    alloc = clone(own_alloc)
    own = extend(s, own_alloc, batch_for(s, dst, seq), seq)

    def broken(allocator, pages, **kw):
        raise RuntimeError("injected")

    monkeypatch.setattr(plugin.adapters, "sglang_place_front", broken)
    plugin.enable(features="place")
    before = plugin.counters()
    got = extend(s, alloc, batch_for(s, dst, seq), seq)
    after = plugin.counters()
    assert after["errors"] - before["errors"] == 1 and after["place_errors"] >= 1
    assert [g.tolist() for g in got] == [o.tolist() for o in own]
    assert np.array_equal(free_set(alloc), free_set(own_alloc))


def test_disable_restores_sglangs_allocation():
    s = stack()
    own_slots = s.allocation.alloc_paged_token_slots_extend
    own_extend = s.paged.PagedTokenToKVPoolAllocator.alloc_extend
    plugin.enable("all")
    assert s.allocation.alloc_paged_token_slots_extend is not own_slots
    assert s.paged.PagedTokenToKVPoolAllocator.alloc_extend is not own_extend
    assert plugin.enabled() == {"group", "place"}
    plugin.disable()
    assert s.allocation.alloc_paged_token_slots_extend is own_slots
    assert s.paged.PagedTokenToKVPoolAllocator.alloc_extend is own_extend
    assert plugin.enabled() == frozenset()
