"""The vLLM plugin in every deployment it serves: one matrix of connector (NIXL pull and
push, Mooncake, MoRIIO in READ mode) x block size (16, 64) x decode instances (1, 2) x
feature set (each feature of that connector alone, and all), through vLLM 0.33.0's real
``Scheduler``, ``KVCacheManager``, ``BlockPool`` and each connector's own scheduler side
(``kv_connector=`` as vLLM's tests build them), with a prefill side's fragmented pool
giving each request its remote blocks (Mooncake's over vLLM's own bootstrap server, with
corun's route on it).

Each case serves its requests to the end and checks, at every step and for each decode
instance: no block lost or handed out twice; for every request, the descriptors the
connector posts with the plugin (its grouping or merge as patched: NIXL's merge after
``nixl_order``, Mooncake's ``group_concurrent_contiguous``, MoRIIO's
``merge_contiguous_blocks``) are no more than vLLM alone posts for the blocks it would have
handed out at that moment (the free queue's head) with its own functions; no error
counted; the counters true (one ``placed`` / ``partial`` / ``fallback`` per allocation
placement saw, the grouping counters equal to what was posted); and each feature on
acting (``placed`` > 0, fewer groups, merges answered by corun).
"""

from __future__ import annotations

import asyncio
import inspect
import random
import time
from types import SimpleNamespace

import numpy as np
import pytest

import corun
from corun import vllm_plugin
from test_vllm_plugin import check_pool, free_ids, vllm_parts

CONNECTORS = {
    "nixl-pull": ("NixlConnector", "nixl_order"),
    "nixl-push": ("NixlPushConnector", "nixl_order"),
    "mooncake": ("MooncakeConnector", "mooncake"),
    "moriio": ("MoRIIOConnector", "moriio"),
}
CASES = [
    (conn, block, instances, features)
    for conn, (_, own) in CONNECTORS.items()
    for block in (16, 64)
    for instances in (1, 2)
    for features in (("place",), (own,), tuple(vllm_plugin.FEATURES))
]
REQUESTS = 24


def fragment(pool, rng, steps=60):
    """Blocks taken and given back in a random order, as serving leaves a free queue."""
    held = [pool.get_new_blocks(rng.randint(1, 9)) for _ in range(steps)]
    rng.shuffle(held)
    for blocks in held[: len(held) * 2 // 3]:
        pool.free_blocks(reversed(blocks) if rng.random() < 0.5 else blocks)
    return held[len(held) * 2 // 3:]


class Rules:
    """What a connector posts for (local, remote) blocks: vLLM's own functions (the stack
    alone), and the ones its worker calls now (patched by the features that are on)."""

    def __init__(self, conn):
        self.conn = conn
        if conn == "mooncake":
            from vllm.distributed.kv_transfer.kv_connector.v1.mooncake import mooncake_connector as mc

            self.module = mc
            self.vllms = mc.group_concurrent_contiguous
        elif conn == "moriio":
            from vllm.distributed.kv_transfer.kv_connector.v1.moriio import moriio_connector as mo

            self.cls = mo.MoRIIOConnectorWorker
            self.vllms = mo.MoRIIOConnectorWorker.merge_contiguous_blocks

    def alone(self, local, remote):
        if self.conn == "mooncake":
            return len(self.vllms(local, remote)[0])
        if self.conn == "moriio":
            return len(self._moriio(self.vllms, local, remote)[2])
        return int(corun.count_runs(np.asarray(local, np.int64), np.asarray(remote, np.int64)))

    def posted(self, local, remote):
        if self.conn == "mooncake":
            return len(self.module.group_concurrent_contiguous(local, remote)[0])
        if self.conn == "moriio":
            return len(self._moriio(self.cls.merge_contiguous_blocks, local, remote)[2])
        if "nixl_order" in vllm_plugin.enabled():
            # As the plugin's wrapper of NIXL's make_prepped_xfer lists each transfer.
            local, remote = vllm_plugin._ordered_safely(local, remote)
        return int(corun.count_runs(np.asarray(local, np.int64), np.asarray(remote, np.int64)))

    @staticmethod
    def _moriio(merge, local, remote, size=4096):
        # The worker merges byte offsets: one block-sized segment per block.
        return merge(None, [b * size for b in local], [b * size for b in remote], [size] * len(local))


class Prefill:
    """The prefill side: a fragmented pool whose blocks each request is given, and (for
    Mooncake) vLLM's own bootstrap server with the sender's blocks behind corun's route."""

    def __init__(self, conn, block, rng):
        from vllm.v1.core.block_pool import BlockPool

        self.pool = BlockPool(3000, enable_caching=False, hash_block_size=block)
        self.kept = fragment(self.pool, rng, 200)
        self.server = None
        if conn == "mooncake":
            from vllm.distributed.kv_transfer.kv_connector.v1.mooncake import mooncake_utils as mu

            self.server = mu.MooncakeBootstrapServer("127.0.0.1", 0)
            self.server.start()
            self.sender = SimpleNamespace(bootstrap_server=self.server, reqs_need_send={})
            if "place" in vllm_plugin.enabled():  # as the plugin's worker hook does
                from corun import _vllm_mooncake

                _vllm_mooncake._serve_blocks(self.sender)

    def give(self, tid, n):
        blocks = [b.block_id for b in self.pool.get_new_blocks(n)]
        if self.server is not None:
            ready = asyncio.Event()
            ready.set()  # the prefill is done: the sender holds the blocks
            self.sender.reqs_need_send[tid] = SimpleNamespace(ready=ready, local_block_ids=[blocks])
        return blocks

    def close(self):
        if self.server is not None:
            self.server.shutdown()


class Decode:
    """One decode instance: vLLM's scheduler for the connector, its pool watched where
    vLLM allocates a request's external blocks (the queue's head before placement: what
    vLLM alone hands out; the blocks it did hand out)."""

    def __init__(self, vu, name, block, rng):
        extra = {"read_mode": "true"} if name == "MoRIIOConnector" else {}
        config = vu.create_vllm_config(block_size=block, max_num_seqs=64, max_num_batched_tokens=1 << 16,
                                       kv_connector=name, kv_connector_extra_config=extra)
        self.sched = vu.create_scheduler(config, num_blocks=900)
        manager = self.sched.kv_cache_manager
        self.pool = manager.block_pool
        self.kept = [b.block_id for blocks in fragment(self.pool, rng) for b in blocks]
        self.allocations = []  # (request id, vLLM's head, the blocks handed out)
        self._in = None
        allocate, signature = manager.allocate_slots, inspect.signature(manager.allocate_slots)
        get_new_blocks = self.pool.get_new_blocks

        def watched_allocate(request, *args, **kwargs):
            external = signature.bind(request, *args, **kwargs).arguments.get("num_external_computed_tokens", 0)
            params = request.kv_transfer_params or {}
            self._in = request.request_id if external and params.get("do_remote_prefill") else None
            try:
                return allocate(request, *args, **kwargs)
            finally:
                self._in = None

        def watched_get_new_blocks(n):
            rid, self._in = self._in, None  # the first allocation of the request's: its external blocks
            head = free_ids(self.pool)[:n] if rid is not None else None
            got = get_new_blocks(n)
            if rid is not None and n:
                self.allocations.append((rid, head, [b.block_id for b in got]))
            return got

        # On the instances (the scheduler calls them by attribute): vLLM's and the
        # plugin's functions on the classes stay as they are.
        manager.allocate_slots = watched_allocate
        self.pool.get_new_blocks = watched_get_new_blocks


def params_for(conn, tid, remote, addr):
    if conn == "mooncake":
        return dict(do_remote_prefill=True, do_remote_decode=False, remote_engine_id="p",
                    remote_bootstrap_addr=addr, transfer_id=tid)
    out = dict(do_remote_prefill=True, do_remote_decode=False, remote_engine_id="my-engine-id",
               remote_request_id=f"prefill-{tid}", remote_block_ids=[list(remote)],
               remote_host="127.0.0.1", remote_port=1234, tp_size=1)
    if conn == "moriio":
        out.update(transfer_id=tid, remote_handshake_port=1235, remote_notify_port=1236)
    return out


def serve(conn, block, instances, features, seed=0):
    """Serves ``REQUESTS`` remote-prefill requests over ``instances`` decode instances;
    returns the plugin's counters and, per allocation, (alone, posted) descriptors."""
    vu, _ = vllm_parts()
    vllm_plugin.disable()
    rules = Rules(conn)  # vLLM's own functions, before the plugin patches them
    if features:
        assert vllm_plugin.enable(features) == set(features)
    vllm_plugin.reset_counters()
    rng = random.Random(seed)
    prefill = Prefill(conn, block, rng)
    decodes = [Decode(vu, CONNECTORS[conn][0], block, rng) for _ in range(instances)]
    addr = f"http://127.0.0.1:{prefill.server.port}" if prefill.server else ""
    remote_of, counted = {}, []
    try:
        todo, steps = list(range(REQUESTS)), 0
        while todo or any(d.sched.requests for d in decodes):
            steps += 1
            assert steps < 2000, "the stack stopped serving"
            for _ in range(rng.randint(0, 3)):
                if not todo:
                    break
                i = todo.pop(0)
                n = max(2, min(40, int(rng.lognormvariate(2.2, 0.7))))
                tid = f"t{seed}-{i}"
                remote = prefill.give(tid, n)
                req = vu.create_request(request_id=1000 * (seed + 1) + i, num_tokens=n * block,
                                        common_prefix_len=2 * block if rng.random() < 0.3 else 0,
                                        do_remote_prefill=True, num_remote_blocks=n, block_size=block,
                                        max_tokens=rng.randint(1, 12))
                req.kv_transfer_params = params_for(conn, tid, remote, addr)
                remote_of[req.request_id] = remote
                decodes[i % instances].sched.add_request(req)
            idle = True
            for d in decodes:
                out = d.sched.schedule()
                idle &= not out.num_scheduled_tokens
                for rid, head, got in d.allocations:
                    tail = remote_of[rid][len(remote_of[rid]) - len(got):]
                    counted.append((rules.alone(head, tail), rules.posted(got, tail), rid))
                d.allocations.clear()
                check_pool(d.sched, d.kept)
                waiting = {rid for rid, r in d.sched.requests.items() if r.status.name == "WAITING_FOR_REMOTE_KVS"}
                ran = [d.sched.requests[r] for r in out.num_scheduled_tokens]
                d.sched.update_from_output(out, vu.create_model_runner_output(ran, finished_recving=waiting or None))
            if idle:
                time.sleep(0.002)  # a step of a real engine takes this long at least
        for d in decodes:
            check_pool(d.sched, d.kept)
        return dict(vllm_plugin.counters(), counted=counted)
    finally:
        prefill.close()
        vllm_plugin.disable()


@pytest.mark.parametrize("conn,block,instances,features", CASES,
                         ids=[f"{c}-b{b}-x{i}-{'+'.join(f) if len(f) < 4 else 'all'}" for c, b, i, f in CASES])
def test_the_plugin_holds_in_the_deployment(conn, block, instances, features):
    on = serve(conn, block, instances, features)
    counted = on["counted"]
    assert len(counted) >= REQUESTS * 0.8, len(counted)  # the requests' external allocations
    worse = [(a, p, rid) for a, p, rid in counted if p > a]
    assert not worse, worse  # never more descriptors than vLLM alone
    assert on["errors"] == 0, on
    if "place" in features:
        # One decision per allocation placement saw, and placement acting.
        assert on["placed"] + on["partial"] + on["fallback"] == len(counted), on
        assert on["placed"] > 0, on
    else:
        assert on["placed"] == on["partial"] == on["fallback"] == 0
    alone, posted = sum(a for a, *_ in counted), sum(p for _, p, _ in counted)
    if conn.startswith("nixl") and "nixl_order" in features:
        assert on["nixl_after"] == posted and on["nixl_transfers"] == len(counted)
        assert on["nixl_before"] >= on["nixl_after"]
    if conn == "mooncake" and "mooncake" in features:
        assert on["mooncake_calls"] == len(counted) and on["mooncake_after"] == posted
    if conn == "moriio" and "moriio" in features:
        assert on["moriio_calls"] == len(counted) and on["moriio_vllm"] == 0
    if "place" in features:
        assert posted < alone, (posted, alone)


if __name__ == "__main__":
    # One line per case: the descriptors vLLM alone would post and those posted, and the
    # plugin's counters (PYTHONPATH=. python tests/test_vllm_deployments.py, from python/).
    for case in CASES:
        got = serve(*case)
        counted = got["counted"]
        print(f"vllm-deployment connector={case[0]} block_tokens={case[1]} instances={case[2]} "
              f"features={'+'.join(case[3])} allocations={len(counted)} "
              f"alone={sum(a for a, *_ in counted)} posted={sum(p for _, p, _ in counted)} "
              f"worse={sum(p > a for a, p, _ in counted)} placed={got['placed']} partial={got['partial']} "
              f"fallback={got['fallback']} errors={got['errors']}", flush=True)
