"""corun's vLLM plugin (``corun.vllm_plugin``): its NIXL order and switches on their own,
then inside vLLM 0.33.0's real ``Scheduler``, ``KVCacheManager``, ``BlockPool`` and NIXL
pull connector (with the recording NIXL stand-in vLLM's own tests use) on a pool that
many requests fragment, and with failures injected into every hook.

The vLLM parts need vLLM's full install (torch and all; ``pip install vllm==0.33.0``)
and vLLM's test tree from its sdist (``CORUN_VLLM_TESTS``, default
``target/vllm-0.33.0-tests``, which ``python/tests/vllm_suite.py`` unpacks): without them
they are skipped, saying which is missing. Run as a script, this file prints the
fragmented-pool run's line, ``vllm-plugin placed=<n> fallback=<n> errors=<n>
nixl_before=<n> nixl_after=<n>``, and fails unless placement happened.
"""

from __future__ import annotations

import logging
import os
import random
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

import corun
from corun import _corun, adapters, vllm_plugin
import upstream

ROOT = Path(__file__).resolve().parents[2]
REQUIRE = os.environ.get("CORUN_REQUIRE_VLLM") == "1"
BLOCK = 16


# -- without vLLM -----------------------------------------------------------------------


def merged(local, remote):
    """Descriptors after NIXL's merge rule (both sides step by +1)."""
    return corun.count_runs(np.asarray(local, np.int64), np.asarray(remote, np.int64))


def random_pairs(rng, n):
    """Distinct local and remote ids in runs of either direction, as vLLM's recycled
    blocks come (each side's runs shuffled)."""
    out_l, out_r, i = [], [], 0
    while i < n:
        k = int(min(n - i, rng.integers(1, 9)))
        l0, r0 = int(rng.integers(0, 1000)) * 16, int(rng.integers(0, 1000)) * 16
        step = int(rng.choice([1, -1]))
        out_l += [l0 + step * j for j in range(k)]
        out_r += [r0 + step * j for j in range(k)]
        i += k
    # Keep only the first occurrence of each local and each remote id (distinct sides).
    seen_l, seen_r, l, r = set(), set(), [], []
    for a, b in zip(out_l, out_r):
        if a not in seen_l and b not in seen_r:
            seen_l.add(a)
            seen_r.add(b)
            l.append(a)
            r.append(b)
    return l, r


@pytest.mark.parametrize("seed", range(200))
def test_nixl_order_keeps_the_pairs_and_merges_the_descending_runs(seed):
    rng = np.random.default_rng(seed)
    local, remote = random_pairs(rng, int(rng.integers(0, 200)))
    new_l, new_r = vllm_plugin.nixl_order(local, remote)
    assert sorted(zip(new_l, new_r)) == sorted(zip(local, remote))
    assert type(new_l) is type(local)
    if local:
        either = corun.count_runs(np.asarray(local, np.int64), np.asarray(remote, np.int64),
                                 direction="either")
        # Each either-direction run becomes one descriptor (neighbours may merge further),
        # and never more descriptors than vLLM's order.
        assert merged(new_l, new_r) <= min(either, merged(local, remote))


def test_nixl_order_on_arrays_and_a_known_case():
    local = np.array([9, 8, 7, 1, 2, 3, 20, 5], dtype=np.int32)
    remote = np.array([4, 3, 2, 10, 11, 12, 0, 30], dtype=np.int64)
    new_l, new_r = vllm_plugin.nixl_order(local, remote)
    assert new_l.dtype == np.int32 and new_r.dtype == np.int64
    assert new_l.tolist() == [7, 8, 9, 1, 2, 3, 20, 5]
    assert new_r.tolist() == [2, 3, 4, 10, 11, 12, 0, 30]
    assert (merged(local, remote), merged(new_l, new_r)) == (6, 4)
    with pytest.raises(ValueError, match="local and remote"):
        vllm_plugin.nixl_order([1, 2], [1])


def test_features_from_the_environment(monkeypatch, caplog):
    monkeypatch.delenv("CORUN_VLLM", raising=False)
    assert vllm_plugin.enabled_features() == set()
    for off in ("", "0", "off", "none"):
        assert vllm_plugin.enabled_features(off) == set()
    assert vllm_plugin.enabled_features("all") == set(vllm_plugin.FEATURES)
    monkeypatch.setenv("CORUN_VLLM", " place, nixl_order ")
    assert vllm_plugin.enabled_features() == {"place", "nixl_order"}
    # A typo, or off beside a feature: a configuration error naming the variable and value.
    with pytest.raises(ValueError, match=r"CORUN_VLLM='mooncake,plcae' names unknown features plcae "
                                         r"\(known: place, nixl_order, mooncake, moriio, or all"):
        vllm_plugin.enabled_features("mooncake,plcae")
    for both in ("off,place", "place, OFF", "0,all", "none,nixl_order"):
        with pytest.raises(ValueError, match="turns features off and on at once"):
            vllm_plugin.enabled_features(both)
    monkeypatch.setenv("CORUN_VLLM", "off,place")
    with pytest.raises(ValueError, match=r"CORUN_VLLM='off,place'"):
        vllm_plugin.enable()
    assert vllm_plugin.enabled() == set()
    # Off: enable patches nothing and imports nothing.
    monkeypatch.delenv("CORUN_VLLM")
    assert vllm_plugin.enable() == set()


def test_an_untested_vllm_version_is_left_alone(monkeypatch, caplog):
    vllm_plugin.disable()
    monkeypatch.setattr(vllm_plugin._LIFE, "_version", lambda: "0.34.0")
    monkeypatch.setattr(vllm_plugin._COUNTERS, "_logged", set())
    with caplog.at_level(logging.WARNING, logger="corun"):
        assert vllm_plugin.enable(["place", "nixl_order", "mooncake"]) == set()
        assert vllm_plugin.enable(["place"]) == set()  # the older name
    assert caplog.text.count("0.34.0") == 1  # said once
    assert vllm_plugin._LIFE._patches == [] and vllm_plugin.counters()["unsupported_version"] == 1


def test_a_local_build_of_the_tested_vllm_is_the_tested_release(monkeypatch, caplog):
    life = vllm_plugin._LIFE
    for found, ok in (("0.33.0", True), ("0.33.0+cu128", True), ("0.33.0+cpu", True),
                      ("0.33.0rc1", False), ("0.33.01", False), ("0.33.1+cu128", False), (None, False)):
        monkeypatch.setattr(life, "_version", lambda found=found: found)
        assert life.version_ok() is ok, found
    # The refusal names the version found and those tested.
    monkeypatch.setattr(life, "_version", lambda: "0.34.0+cu128")
    monkeypatch.setattr(vllm_plugin._COUNTERS, "_logged", set())
    with caplog.at_level(logging.WARNING, logger="corun"):
        assert not life.version_ok()
    assert "vLLM 0.34.0+cu128 is not a version the vLLM plugin was tested with (0.33.0)" in caplog.text


def test_a_feature_that_cannot_act_says_off_and_why_never_on(monkeypatch, caplog):
    vllm_plugin.disable()
    monkeypatch.setattr(vllm_plugin._LIFE, "_version", lambda: "0.33.0")
    monkeypatch.setattr(vllm_plugin._COUNTERS, "_logged", set())
    # A budget of 0: placement has no time, so its hooks stay out and it is not "on".
    monkeypatch.setenv("CORUN_VLLM_BUDGET_US", "0")
    with caplog.at_level(logging.WARNING, logger="corun"):
        assert "place" not in vllm_plugin.enable(["place"])
        assert "place" not in vllm_plugin.enable(["place"])  # said once
    assert caplog.text.count("vLLM plugin place: off (CORUN_VLLM_BUDGET_US=0 gives placement no time)") == 1
    assert "plugin on" not in caplog.text and vllm_plugin._LIFE._patches == []
    assert vllm_plugin._LIFE.off == {"place": "CORUN_VLLM_BUDGET_US=0 gives placement no time"}
    # A feature whose install fails (a module of vLLM it needs does not import): off, the
    # reason named; the others asked for are on.
    monkeypatch.delenv("CORUN_VLLM_BUDGET_US")
    caplog.clear()

    def absent():
        raise ModuleNotFoundError("No module named 'vllm.imagined'")

    monkeypatch.setattr(vllm_plugin, "_install_moriio", absent)
    try:
        with caplog.at_level(logging.WARNING, logger="corun"):
            on = vllm_plugin.enable(["moriio", "nixl_order"])
        assert "moriio" not in on and "moriio" not in vllm_plugin.enabled()
        assert ("vLLM plugin moriio: off (it could not be installed: ModuleNotFoundError: "
                "No module named 'vllm.imagined')") in caplog.text
        if "nixl_order" in on:  # vLLM's NIXL modules import here (torch and all)
            assert "vLLM plugin on: nixl_order (" in caplog.text
        assert "Traceback" not in caplog.text  # the reason is the line; the traceback is DEBUG's
    finally:
        vllm_plugin.disable()


def test_every_documented_counter_is_there_from_the_start():
    keys = {"placed", "partial", "fallback", "errors", "place_errors", "nixl_order_errors", "mooncake_errors",
            "moriio_errors", "nixl_transfers", "nixl_before", "nixl_after", "mooncake_calls",
            "mooncake_before", "mooncake_after", "mooncake_waits", "mooncake_wait_us",
            "moriio_calls", "moriio_vllm", "unsupported_version"}
    assert set(vllm_plugin.counters()) == keys
    assert vllm_plugin.counters()["moriio_calls"] >= 0  # no KeyError before first use


def test_the_entry_point_is_declared():
    # What vLLM's load_general_plugins() reads: the installed distribution's entry points
    # (from a wheel, a source install or an editable one alike).
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points().get("vllm.general_plugins", [])
             if ep.name == "corun"] if sys.version_info < (3, 10) else \
        list(entry_points(group="vllm.general_plugins", name="corun"))
    assert [ep.value for ep in found] == ["corun.vllm_plugin:enable"]
    # The older names stay (vLLM's docs call a general plugin's entry point register).
    assert (vllm_plugin.register, vllm_plugin.unregister) == (vllm_plugin.enable, vllm_plugin.disable)


# -- inside vLLM ------------------------------------------------------------------------


HF_HOME = ROOT / "target" / "vllm-hf"  # the model configs' cache (vllm_suite.write_hf_cache)


def vllm_environment():
    """The environment vLLM and Hugging Face's hub read once, when first imported: CPU,
    offline, the cache of the model configs vLLM's test helpers name (unless HF_HOME is
    set). Called here at collection, so that no test's import of vLLM comes before it
    (running this file alone once reached the network: a test's ``enable`` imported vLLM
    before the first call); the cache itself is written by :func:`vllm_itself`."""
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HOME", str(HF_HOME))


vllm_environment()


def vllm_itself():
    """vLLM's full install (torch and all), or a pytest skip naming what is missing."""
    if os.environ["HF_HOME"] == str(HF_HOME):
        import vllm_suite

        vllm_suite.write_hf_cache(HF_HOME)
    try:
        import torch  # noqa: F401
        import vllm
        from vllm.v1.core.block_pool import BlockPool  # noqa: F401
    except ImportError as e:
        if REQUIRE:
            raise
        pytest.skip(f"vLLM's full install is absent ({e}); see python/tests/vllm_suite.py")
    if vllm.__version__ not in vllm_plugin.TESTED:
        pytest.skip(f"vLLM {vllm.__version__} is not one the plugin was tested with")


def vllm_parts():
    """vLLM's test helpers and classes, or a pytest skip naming what is missing."""
    vllm_itself()
    tests = Path(os.environ.get("CORUN_VLLM_TESTS", ROOT / "target" / "vllm-0.33.0-tests"))
    if not (tests / "tests" / "v1" / "kv_connector" / "unit" / "utils.py").exists():
        if REQUIRE:
            raise FileNotFoundError(tests)
        # Named relative to the checkout (or as CORUN_VLLM_TESTS gave it), not as this
        # machine's absolute path.
        where = tests.relative_to(ROOT) if tests.is_relative_to(ROOT) else tests
        pytest.skip(f"vLLM's test tree is absent at {where} (python python/tests/vllm_suite.py unpacks it)")
    upstream.vllm_tests_package(tests / "tests")
    from tests.v1.kv_connector.unit import test_nixl_desc_geometry as geo
    from tests.v1.kv_connector.unit import utils as vu

    return vu, geo


class Stack:
    """A decode engine's scheduler and NIXL pull worker, and a prefill engine's block
    pool and worker (whose block ids a request's ``remote_block_ids`` are)."""

    def __init__(self, decode_blocks, prefill_blocks):
        self.vu, geo = vllm_parts()  # first: it sets the environment vLLM reads on import
        import msgspec
        from vllm.distributed.kv_transfer.kv_connector.v1.nixl.metadata import NixlAgentMetadata
        from vllm.distributed.kv_transfer.kv_connector.v1.nixl.pull_worker import (
            NixlPullConnectorWorker,
        )
        from vllm.v1.core.block_pool import BlockPool

        config = self.vu.create_vllm_config(block_size=BLOCK, max_num_seqs=64,
                                            max_num_batched_tokens=8192)
        self.sched = self.vu.create_scheduler(config, num_blocks=decode_blocks)
        self.pool = self.sched.kv_cache_manager.block_pool
        self.prefill_pool = BlockPool(prefill_blocks, enable_caching=False, hash_block_size=BLOCK)
        # One packed region of one 128-byte row per block: a descriptor id is a block id.
        self.worker, self.raw = geo._make_packed_mla_view_worker(
            {"L0": (0, 128)}, 128, num_blocks=decode_blocks, worker_cls=NixlPullConnectorWorker)
        producer, self.prefill_raw = geo._make_packed_mla_view_worker(
            {"L0": (0, 128)}, 128, num_blocks=prefill_blocks, worker_cls=NixlPullConnectorWorker)
        meta = msgspec.msgpack.decode(producer.xfer_handshake_metadata.agent_metadata_bytes,
                                      type=NixlAgentMetadata)
        meta.engine_id = "my-engine-id"  # the one vLLM's create_request names
        self.worker._remote_agents[meta.engine_id] = {
            (0, 0): self.worker.add_remote_agent(meta, remote_tp_rank=0, remote_tp_size=1)}

    def pairs_posted(self, first_xfer):
        """(local block, remote block) of every descriptor posted since ``first_xfer``,
        resolved from the registered descriptor lists' addresses, per transfer."""
        nixl = self.worker.nixl_wrapper
        out = []
        for _op, lh, lids, rh, rids in nixl.xfers[first_xfer:]:
            la = nixl.dlists[lh][np.asarray(lids, np.int64), 0].astype(np.int64)
            ra = nixl.dlists[rh][np.asarray(rids, np.int64), 0].astype(np.int64)
            out.append((np.asarray(lids), np.asarray(rids),
                        (la - self.raw.data_ptr()) // 128, (ra - self.prefill_raw.data_ptr()) // 128))
        return out

    def check_pool(self):
        check_pool(self.sched)


def free_ids(pool):
    """The block ids of ``pool``'s free queue, front to back."""
    queue, out = pool.free_block_queue, []
    b = queue.fake_free_list_head.next_free_block
    while b is not queue.fake_free_list_tail:
        out.append(b.block_id)
        b = b.next_free_block
    return out


def check_pool(sched, kept=()):
    """No block lost or handed out twice: the live requests' blocks, the free queue and
    the blocks ``kept`` out of serving partition the pool (less the null block)."""
    pool, manager, held = sched.kv_cache_manager.block_pool, sched.kv_cache_manager, {}
    for rid in sched.requests:
        for b in manager.get_block_ids(rid)[0]:
            held.setdefault(b, set()).add(rid)
    free = free_ids(pool)
    assert len(free) == len(set(free)) == pool.free_block_queue.num_free_blocks
    for bid, owners in held.items():
        block = pool.blocks[bid]
        # A block two requests hold is a prefix-cache share: counted, hashed.
        assert block.ref_cnt == len(owners), (bid, owners, block.ref_cnt)
        assert len(owners) == 1 or block.block_hash is not None
    assert not set(free) & set(held) and not set(kept) & (set(free) | set(held))
    null = pool.null_block.block_id
    assert set(free) | set(held) | set(kept) | {null} == set(range(pool.num_gpu_blocks))


def run_stack(plugin, requests=240, seed=0, decode_blocks=1200, prefill_blocks=2400, hooks=None):
    """Serves ``requests`` remote-prefill requests through the real stack and returns
    what happened: the plugin's counters, descriptors after NIXL's merge rule, prefix
    hits, and each request's (local, remote) blocks as vLLM's bookkeeping holds them."""
    vllm_plugin.disable()
    if plugin:
        assert vllm_plugin.enable(hooks or vllm_plugin.FEATURES) == set(hooks or vllm_plugin.FEATURES)
    vllm_plugin.reset_counters()
    try:
        st = Stack(decode_blocks, prefill_blocks)
        vu, sched = st.vu, st.sched
        rng = random.Random(seed)
        held_remote = []  # (release step, prefill blocks)
        placed_blocks = {}
        descriptors = hits = steps = 0
        todo = list(range(requests))
        while todo or sched.requests:
            steps += 1
            assert steps < 20 * requests, "the stack stopped serving"
            for _ in range(rng.randint(0, 3)):
                if not todo:
                    break
                i = todo.pop(0)
                n = max(2, min(48, int(rng.lognormvariate(2.3, 0.7))))
                if st.prefill_pool.get_num_free_blocks() < n:
                    todo.insert(0, i)
                    break
                pblocks = st.prefill_pool.get_new_blocks(n)
                held_remote.append((steps + rng.randint(1, 12), pblocks))
                shared = 2 * BLOCK if rng.random() < 0.3 else 0
                req = vu.create_request(
                    request_id=10_000 * (seed + 1) + i, num_tokens=n * BLOCK,
                    common_prefix_len=shared, do_remote_prefill=True, num_remote_blocks=n,
                    block_size=BLOCK, max_tokens=rng.randint(1, 30))
                # One list per KV cache group, as a prefill engine returns them.
                req.kv_transfer_params["remote_block_ids"] = [[b.block_id for b in pblocks]]
                sched.add_request(req)
            out = sched.schedule()
            recvd = set()
            meta = out.kv_connector_metadata
            for rid, m in (meta.reqs_to_recv.items() if meta is not None else []):
                local = list(m.local_block_ids[0])
                remote = list(m.remote.block_ids[0])
                hits += sum(m.local_num_computed_blocks)
                # vLLM's bookkeeping: the blocks it pulls into are the request's own tail.
                own = sched.kv_cache_manager.get_block_ids(rid)[0]
                assert local == own[len(own) - len(local):]
                placed_blocks[rid] = (local, remote[len(remote) - len(local):] if local else [])
                m.local_physical_block_ids = st.worker._logical_to_kernel_block_ids(
                    m.local_block_ids, st.worker._physical_blocks_per_logical_kv_block)
                st.worker._recving_metadata[rid] = m
                first = len(st.worker.nixl_wrapper.xfers)
                st.worker._read_blocks_for_req(rid, m)
                posted = st.pairs_posted(first)
                got = [(int(a), int(b)) for *_ids, la, ra in posted for a, b in zip(la, ra)]
                # Every block transferred lands where the bookkeeping says, once.
                assert sorted(got) == sorted(zip(*placed_blocks[rid])), rid
                descriptors += sum(merged(lids, rids) for lids, rids, *_ in posted)
                recvd.add(rid)
            st.check_pool()
            ran = [sched.requests[r] for r in out.num_scheduled_tokens]
            mro = vu.create_model_runner_output(ran, finished_recving=recvd or None)
            sched.update_from_output(out, mro)
            for item in [h for h in held_remote if h[0] <= steps]:
                held_remote.remove(item)
                st.prefill_pool.free_blocks(reversed(item[1]))
        st.check_pool()
        return dict(vllm_plugin.counters(), descriptors=descriptors, hits=hits,
                    blocks=placed_blocks, requests=requests)
    finally:
        vllm_plugin.disable()


def fragmented():
    """The fragmented-pool run both ways: vLLM alone, then with every feature."""
    off = run_stack(plugin=False)
    on = run_stack(plugin=True)
    return off, on


def test_fragmented_pool_through_the_real_stack():
    off, on = fragmented()
    assert off["placed"] == 0 and off["errors"] == 0
    assert on["placed"] > 0 and on["errors"] == 0
    assert on["nixl_transfers"] > 0 and on["nixl_after"] == on["descriptors"]
    assert on["descriptors"] * 1.2 <= off["descriptors"], (on["descriptors"], off["descriptors"])
    # Prefix caching still hits (placement may reorder eviction, not stop it).
    assert on["hits"] > 0 and on["hits"] >= 0.9 * off["hits"]


def failing(*args, **kwargs):
    raise RuntimeError("injected by the test")

def test_placement_is_judged_by_the_runs_the_connector_posts(monkeypatch):
    """NIXL merges runs that ascend on both sides: without nixl_order placement counts
    ascending runs (a request it would make worse there stays vLLM's); with it, runs in
    either direction, as nixl_order lists them ascending."""
    seen = []

    def front(pool, tail, *, direction, pages=None, window=None, cached=False):
        seen.append(direction)
        return {"bound": 1, "placed": 1, "own": 2, "split": 0, "fallback": False}

    class Pool:
        def get_num_free_blocks(self):
            return 100

    monkeypatch.setattr(vllm_plugin.adapters, "vllm_place_front", front)
    for on, want in (({"place"}, "ascending"), ({"place", "mooncake"}, "ascending"),
                     ({"place", "nixl_order"}, "either")):
        monkeypatch.setattr(vllm_plugin._LIFE, "on", set(on))
        vllm_plugin._place(Pool(), [5, 4, 3], 0, 3)
        assert seen[-1] == want, on
    # A Mooncake connector's request: what its grouping posts (corun's takes either way).
    for on, want in (({"place"}, "ascending"), ({"place", "nixl_order"}, "ascending"),
                     ({"place", "mooncake"}, "either")):
        monkeypatch.setattr(vllm_plugin._LIFE, "on", set(on))
        vllm_plugin._place(Pool(), [5, 4, 3], 0, 3, True)
        assert seen[-1] == want, on
    # A MoRIIO engine's (its scheduler side built here): its merge sorts the blocks first,
    # so runs descending on both sides are one segment there: either direction.
    monkeypatch.setitem(vllm_plugin._vllm_place.SORTING, "moriio", True)
    for on in ({"place"}, {"place", "moriio"}):
        monkeypatch.setattr(vllm_plugin._LIFE, "on", set(on))
        vllm_plugin._place(Pool(), [5, 4, 3], 0, 3)
        assert seen[-1] == "either", on
    # And placement itself keeps vLLM's blocks where its choice posts no fewer: a first
    # side that descends, free blocks that descend too, counted ascending.
    first = np.array([9, 8, 7, 6], dtype=np.int64)
    free = np.array([40, 39, 38, 37, 20, 21, 22, 23], dtype=np.int64)
    chosen, _, stats = corun.place(first, free, direction="ascending")
    assert corun.count_runs(first, chosen) <= corun.count_runs(first, free[:4])
    if stats["fallback"]:
        assert chosen.tolist() == free[:4].tolist()



@pytest.mark.parametrize("where", ["adapters.vllm_place_front", "adapters.place"])
def test_a_failing_placement_serves_vllms_way(monkeypatch, where):
    off = run_stack(plugin=False, requests=60)
    monkeypatch.setattr(adapters, where.split(".")[1], failing)
    on = run_stack(plugin=True, requests=60, hooks=["place"])
    assert on["placed"] == 0 and on["errors"] > 0 and on["errors"] == on["place_errors"]
    # Every request was served, on exactly the blocks vLLM alone gives it.
    assert on["blocks"] == off["blocks"]


def test_a_failing_nixl_order_posts_vllms_order(monkeypatch):
    off = run_stack(plugin=False, requests=60)
    monkeypatch.setattr(vllm_plugin, "nixl_order", failing)
    on = run_stack(plugin=True, requests=60, hooks=["nixl_order"])
    assert on["nixl_order_errors"] > 0 and on["errors"] == on["nixl_order_errors"]
    assert on["descriptors"] == off["descriptors"] and on["blocks"] == off["blocks"]


def test_disable_takes_the_ordering_off_nixl_agents_made_while_on():
    """A NIXL worker made with ``nixl_order`` on posts through corun's ordering; after
    ``disable()`` its agent has its own ``make_prepped_xfer`` again (nothing of corun's on
    it), and ``enable()`` again orders the next worker's as the first time."""
    vllm_parts()  # vLLM's full install and test tree, or a skip saying which is missing
    vllm_plugin.disable()
    try:
        assert vllm_plugin.enable(["nixl_order"]) == {"nixl_order"}
        agent = Stack(64, 64).worker.nixl_wrapper
        assert getattr(agent.make_prepped_xfer, "corun_ordered", False)
        vllm_plugin.disable()
        assert "make_prepped_xfer" not in vars(agent)
        assert not getattr(agent.make_prepped_xfer, "corun_ordered", False)
        assert not [k for k, v in vars(agent).items()
                    if "corun" in k or getattr(v, "corun_ordered", False)]
        assert vllm_plugin.enable(["nixl_order"]) == {"nixl_order"}
        again = Stack(64, 64).worker.nixl_wrapper
        assert getattr(again.make_prepped_xfer, "corun_ordered", False)
    finally:
        vllm_plugin.disable()


def _check_groups(groups, local, remote, want):
    """``groups`` hold every (local, remote) pair once, each group ascending by 1 on both
    sides, in ``want`` groups."""
    src, dst = groups
    assert len(src) == len(dst) == want
    pairs = []
    for a, b in zip(src, dst):
        assert len(a) == len(b) > 0
        assert a == list(range(a[0], a[0] + len(a))) and b == list(range(b[0], b[0] + len(b)))
        pairs += list(zip(a, b))
    assert sorted(pairs) == sorted(zip(list(local), list(remote)))


def test_mooncake_groups_take_runs_either_way():
    # vLLM's free order: a run that descends on both sides is one group, listed ascending.
    assert vllm_plugin.mooncake_groups([9, 8, 7, 3, 4], [19, 18, 17, 5, 6]) == (
        [[7, 8, 9], [3, 4]], [[17, 18, 19], [5, 6]])
    # Opposite directions are not contiguous on both sides: one pair a group.
    assert vllm_plugin.mooncake_groups([1, 2, 3], [9, 8, 7]) == ([[1], [2], [3]], [[9], [8], [7]])
    assert vllm_plugin.mooncake_groups([], []) == ([], [])
    with pytest.raises(ValueError):
        vllm_plugin.mooncake_groups([1, 2], [3])
    rng = np.random.default_rng(3)
    for _ in range(400):
        n = int(rng.integers(0, 60))
        # A small alphabet makes runs either way, repeats and breaks.
        local = rng.integers(0, 8, n).cumsum() if rng.random() < 0.3 else rng.choice(200, n, replace=False)
        remote = np.where(rng.random(n) < 0.5, local + 5, 300 - local) if n else local
        groups = vllm_plugin.mooncake_groups(local.tolist(), remote.tolist())
        want = corun.count_runs(local, remote, direction="either") if n else 0
        _check_groups(groups, local, remote, want)
        assert want <= corun.count_runs(local, remote)


def test_mooncake_grouping_is_corun_and_covers_vllms_pairs(monkeypatch):
    vllm_parts()
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake import mooncake_connector as mc

    vllm_plugin.disable()
    own = mc.group_concurrent_contiguous
    # _build_transfer_params calls the module's name: rebinding it reaches that call.
    assert "group_concurrent_contiguous" in mc.MooncakeConnectorWorker._build_transfer_params.__code__.co_names
    try:
        assert vllm_plugin.enable(["mooncake"]) == {"mooncake"}
        ours = mc.group_concurrent_contiguous
        assert ours is not own
        rng = np.random.default_rng(1)
        before = after = 0
        for _ in range(300):
            local, remote = random_pairs(rng, int(rng.integers(0, 120)))
            vllms = own(local, remote)
            got = ours(local, remote)
            _check_groups(got, local, remote, len(got[0]))
            assert len(got[0]) <= len(vllms[0])
            before, after = before + len(vllms[0]), after + len(got[0])
        c = vllm_plugin.counters()
        assert c["mooncake_calls"] == 300
        assert (c["mooncake_before"], c["mooncake_after"]) == (before, after)
        monkeypatch.setattr(_corun, "runs", failing)
        assert ours([3, 4, 9], [7, 8, 1]) == own([3, 4, 9], [7, 8, 1])
        assert vllm_plugin.counters()["mooncake_errors"] == 1
    finally:
        vllm_plugin.disable()
    assert mc.group_concurrent_contiguous is own


def test_moriio_merge_is_corun_and_equals_vllms(monkeypatch):
    vllm_parts()
    import pools

    try:
        from vllm.distributed.kv_transfer.kv_connector.v1.moriio import moriio_connector as mo
    except ImportError as e:
        pytest.skip(f"vLLM's MoRIIO connector does not import here: {e}")
    vllm_plugin.disable()
    cls = mo.MoRIIOConnectorWorker
    own = cls.merge_contiguous_blocks
    try:
        assert vllm_plugin.enable(["moriio"]) == {"moriio"}
        ours = cls.merge_contiguous_blocks
        assert ours is not own
        calls = 0
        for n in (1, 7, 300, 2048):
            for breaks in (0.0, 0.05, 1.0):
                for assume_sorted in (False, True):
                    blocks = pools.make_orderfree(n, breaks, seed=n)
                    assert ours(None, *blocks, assume_sorted) == own(None, *blocks, assume_sorted)
                    calls += 1
        assert ours(None, [], [0], [1]) == own(None, [], [0], [1]) == ([], [], [])  # vLLM's way
        assert vllm_plugin.counters()["moriio_calls"] == calls
        monkeypatch.setattr(_corun, "merge_contiguous_blocks", failing)
        assert ours(None, [8, 0], [1, 9], [4, 4]) == own(None, [8, 0], [1, 9], [4, 4])
        assert vllm_plugin.counters()["moriio_errors"] == 1
    finally:
        vllm_plugin.disable()
    assert cls.merge_contiguous_blocks is own


def test_vllms_own_exceptions_pass_through_the_hooks_once(monkeypatch):
    """An exception from vLLM's own function inside a hook is vLLM's: raised to the caller
    unchanged, vLLM's function run once, nothing counted as corun's."""
    vllm_parts()
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake import mooncake_connector as mc

    try:
        from vllm.distributed.kv_transfer.kv_connector.v1.moriio import moriio_connector as mo
    except ImportError as e:
        pytest.skip(f"vLLM's MoRIIO connector does not import here: {e}")
    vllm_plugin.disable()
    calls = []
    raised = RuntimeError("vLLM's own failure")

    def vllms_group(src, dst):
        calls.append("group")
        raise raised

    def vllms_merge(self, *args):
        calls.append("merge")
        raise raised

    # Stand-ins for vLLM's own functions, named as vLLM names them (over anything else,
    # another plugin's hook, corun's grouping and merge stay off).
    vllms_group.__module__, vllms_group.__qualname__ = mc.__name__, "group_concurrent_contiguous"
    vllms_merge.__module__ = mo.__name__
    vllms_merge.__qualname__ = "MoRIIOConnectorWorker.merge_contiguous_blocks"
    monkeypatch.setattr(mc, "group_concurrent_contiguous", vllms_group)
    monkeypatch.setattr(mo.MoRIIOConnectorWorker, "merge_contiguous_blocks", vllms_merge)
    try:
        assert vllm_plugin.enable(["mooncake", "moriio"]) == {"mooncake", "moriio"}
        vllm_plugin.reset_counters()
        # Lengths that differ go to vLLM's grouping; tuples to vLLM's merge.
        with pytest.raises(RuntimeError) as got:
            mc.group_concurrent_contiguous([1, 2], [3])
        assert got.value is raised
        with pytest.raises(RuntimeError) as got:
            mo.MoRIIOConnectorWorker.merge_contiguous_blocks(None, (0, 4), (8, 12), (4, 4))
        assert got.value is raised
        assert calls == ["group", "merge"]  # each ran once, not again as a fallback
        c = vllm_plugin.counters()
        assert c["errors"] == c["mooncake_errors"] == c["moriio_errors"] == 0
    finally:
        vllm_plugin.disable()



def counting_hook(monkeypatch, owner, name, calls):
    """Another plugin's hook on ``owner.name``: notes each call, then calls what was there."""
    below = vars(owner)[name]

    def other_hook(*args, **kwargs):
        calls.append(name)
        return below(*args, **kwargs)

    monkeypatch.setattr(owner, name, other_hook)
    return other_hook


@pytest.mark.parametrize("corun_first", [False, True], ids=["other-first", "corun-first"])
def test_another_plugins_hook_on_the_same_function_runs_beside_coruns(monkeypatch, caplog, corun_first):
    """Another plugin hooks a function corun's ``place`` wraps (``BlockPool.__init__``,
    where corun mirrors the pool's free queue) before corun or after it: while both are
    on both run, once a pool, corun's effect there; ``disable()`` takes out corun's and
    leaves the other's (hooked after corun: a WARNING names the function and the hook
    there, corun's beneath it passes every call through); ``enable()`` again acts as the
    first time."""
    vllm_itself()
    from vllm.v1.core.block_pool import BlockPool

    vllm_plugin.disable()
    vllms = vars(BlockPool)["__init__"]
    theirs = []

    def new_pool(mirrored):
        del theirs[:]
        pool = BlockPool(64, enable_caching=True, hash_block_size=BLOCK)
        assert theirs == ["__init__"]  # the other plugin's hook ran, once
        assert (adapters._mirror_of(pool.free_block_queue) is not None) == mirrored
        assert [b.block_id for b in pool.get_new_blocks(3)] == [1, 2, 3]
        assert vllm_plugin.counters()["errors"] == 0

    try:
        if corun_first:
            assert "place" in vllm_plugin.enable(["place"])
            other = counting_hook(monkeypatch, BlockPool, "__init__", theirs)
        else:
            other = counting_hook(monkeypatch, BlockPool, "__init__", theirs)
            assert "place" in vllm_plugin.enable(["place"])
        new_pool(mirrored=True)
        with caplog.at_level(logging.WARNING, logger="corun"):
            vllm_plugin.disable()
        assert vars(BlockPool)["__init__"] is other  # theirs stays, in either order
        assert ("BlockPool.__init__ was hooked after corun" in caplog.text) == corun_first
        new_pool(mirrored=False)  # corun's gone: theirs over vLLM's own, once
        assert "place" in vllm_plugin.enable(["place"])
        new_pool(mirrored=True)  # on again: both
        vllm_plugin.disable()
        new_pool(mirrored=False)
        assert vars(BlockPool)["__init__"] is other
    finally:
        vllm_plugin.disable()
        monkeypatch.undo()  # the other plugin unhooks: what it found comes back
    # (corun-first: corun's switch, off; its next call puts vLLM's own back)
    vllm_plugin.disable()
    assert vars(BlockPool)["__init__"] is vllms


def test_a_function_corun_stands_in_for_is_never_taken_from_another_plugin(monkeypatch, caplog):
    """corun's Mooncake grouping replaces vLLM's function (it never calls what was
    there): over another plugin's hook it stays off and says so, naming the function and
    the hook, and that hook goes on running; hooked over corun's, both run."""
    vllm_parts()
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake import mooncake_connector as mc

    vllm_plugin.disable()
    vllms = mc.group_concurrent_contiguous
    theirs = []
    # A run descending on both sides, then one pair: vLLM groups ascending runs only
    # (4 groups), corun's either way (2).
    src, dst = [5, 4, 3, 9], [15, 14, 13, 19]

    def group(expect_corun):
        vllm_plugin.reset_counters()
        del theirs[:]
        got = mc.group_concurrent_contiguous(src, dst)
        assert theirs == ["group_concurrent_contiguous"]
        _check_groups(got, src, dst, 2 if expect_corun else 4)
        c = vllm_plugin.counters()
        assert (c["mooncake_calls"], c["errors"]) == (1 if expect_corun else 0, 0)

    try:
        other = counting_hook(monkeypatch, mc, "group_concurrent_contiguous", theirs)
        with caplog.at_level(logging.WARNING, logger="corun"):
            assert vllm_plugin.enable(["mooncake"]) == frozenset()
        assert "mooncake" not in vllm_plugin.enabled()
        said = [r.getMessage() for r in caplog.records if "plugin mooncake: off" in r.getMessage()]
        assert len(said) == 1 and "group_concurrent_contiguous is another plugin's hook already" in said[0]
        assert "other_hook" in said[0], said
        assert mc.group_concurrent_contiguous is other
        group(expect_corun=False)
        monkeypatch.undo()
        # corun first, the other plugin after: its hook calls corun's; both run.
        assert vllm_plugin.enable(["mooncake"]) == {"mooncake"}
        other = counting_hook(monkeypatch, mc, "group_concurrent_contiguous", theirs)
        group(expect_corun=True)
        vllm_plugin.disable()
        assert mc.group_concurrent_contiguous is other
        group(expect_corun=False)
    finally:
        vllm_plugin.disable()
        monkeypatch.undo()
    vllm_plugin.disable()  # corun's switch off beneath the hook undone: vLLM's own back
    assert mc.group_concurrent_contiguous is vllms


def test_vllms_pools_pickle_and_deep_copy_with_the_plugin_on_and_after():
    """vLLM's real ``BlockPool``, mirrored and placed in: it pickles and deep-copies as
    vLLM's own does, while the plugin is on (the copy is vLLM's pool: nothing of corun's
    on it) and after ``disable()`` (nothing of corun's left on the pool either)."""
    import copy
    import pickle

    vllm_itself()
    from vllm.v1.core.block_pool import BlockPool

    def corun_things(pool):
        q = pool.free_block_queue
        return ([k for k in (*vars(pool), *vars(q)) if "corun" in k]
                + [k for k, v in vars(q).items() if type(v).__module__.startswith("corun")])

    def copies(pool):
        for made in (pickle.loads(pickle.dumps(pool)), copy.deepcopy(pool)):
            assert corun_things(made) == []
            assert [b.block_id for b in made.get_new_blocks(4)] == [b.block_id for b in
                                                                   copy.deepcopy(pool).get_new_blocks(4)]
            made.free_blocks(made.get_new_blocks(2))  # vLLM's own methods on the copy

    vllm_plugin.disable()
    copies(BlockPool(64, enable_caching=True, hash_block_size=BLOCK))  # vLLM alone: they do
    try:
        assert "place" in vllm_plugin.enable(["place"])
        pool = BlockPool(64, enable_caching=True, hash_block_size=BLOCK)
        adapters.vllm_place_front(pool, [9, 10, 11, 3])
        assert corun_things(pool)  # told wrappers on the queue while on
        placed = [b.block_id for b in copy.deepcopy(pool).get_new_blocks(4)]
        copies(pool)
        assert [b.block_id for b in pool.get_new_blocks(4)] == placed  # the copy kept the order
        pool.free_blocks(pool.get_new_blocks(3))  # the original's mirror still told
        assert adapters._mirror_of(pool.free_block_queue).in_step(pool.free_block_queue)
    finally:
        vllm_plugin.disable()
    assert corun_things(pool) == []
    copies(pool)


def test_duplicate_remote_ids_are_a_plain_fallback(caplog):
    vllm_itself()
    from vllm.v1.core.block_pool import BlockPool

    pool = BlockPool(64, enable_caching=False, hash_block_size=BLOCK)
    vllm_plugin.reset_counters()
    before = [b.block_id for b in pool.get_new_blocks(0)]
    with caplog.at_level(logging.WARNING, logger="corun"):
        vllm_plugin._place_safely(pool, [[7, 8, 8, 9]], 0, 4)
    got = vllm_plugin.counters()
    assert (got["fallback"], got["errors"], got["place_errors"]) == (1, 0, 0)
    assert "Traceback" not in caplog.text and before == []
    assert [b.block_id for b in pool.get_new_blocks(4)] == [1, 2, 3, 4]  # vLLM's own order


def test_the_on_line_shows_under_vllms_logging():
    """``vllm serve`` configures only the ``vllm`` logger: the plugin's line must still
    reach its stderr (a WARNING through Python's last-resort handler)."""
    vllm_itself()
    code = ("import vllm.logger, corun.vllm_plugin as p; "
            "assert p.enable(['mooncake']) == {'mooncake'}")
    env = {k: v for k, v in os.environ.items() if k != "CORUN_VLLM"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr.count("corun: vLLM plugin on: mooncake") == 1


def main():
    logging.basicConfig(level=logging.WARNING)
    try:
        off, on = fragmented()
    except BaseException as e:  # a skip (vLLM absent) or a failure
        traceback.print_exc()
        print(f"vllm-plugin: could not run: {e!r}")
        return 1
    print(f"vllm-plugin placed={on['placed']} fallback={on['fallback']} errors={on['errors']} "
          f"nixl_before={off['descriptors']} nixl_after={on['descriptors']}")
    print(f"vllm-plugin detail: requests={on['requests']} prefix_hit_blocks off={off['hits']} "
          f"on={on['hits']}; with placement, descriptors in vLLM's order {on['nixl_before']}, "
          f"in corun's {on['nixl_after']}")
    ok = (on["placed"] > 0 and on["errors"] == 0 and on["descriptors"] * 1.2 <= off["descriptors"]
          and on["hits"] > 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
