"""The vLLM plugin's placement over vLLM's Mooncake connector (``corun._vllm_mooncake``):
the prefill side's route on vLLM's own ``MooncakeBootstrapServer``, the decode side's
wait in ``get_num_new_matched_tokens`` (``None`` until the prefill side's blocks are in),
what it does with a peer that lacks the route, and ``disable()`` taking the route away.
Needs vLLM (its bootstrap server: FastAPI and uvicorn); skipped without it."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest

from corun import _vllm_mooncake as vm
from corun import vllm_plugin
import test_vllm_plugin  # noqa: F401 (sets vLLM's environment at collection, before its first import)

mu = pytest.importorskip("vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_utils")


@pytest.fixture
def prefill():
    """A prefill worker stand-in with vLLM's own bootstrap server and corun's route on it."""
    vllm_plugin.disable()
    server = mu.MooncakeBootstrapServer("127.0.0.1", 0)
    server.start()
    ready = asyncio.Event()
    worker = SimpleNamespace(bootstrap_server=server, reqs_need_send={
        "t1": SimpleNamespace(ready=ready, local_block_ids=[[7, 8, 9]])})
    vm._serve_blocks(worker)
    try:
        yield SimpleNamespace(addr=f"http://127.0.0.1:{server.port}", ready=ready, server=server)
    finally:
        vllm_plugin.disable()
        server.shutdown()


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def request(addr, tid="t1"):
    return SimpleNamespace(request_id="r-" + tid, kv_transfer_params={
        "do_remote_prefill": True, "remote_engine_id": "p", "remote_bootstrap_addr": addr,
        "transfer_id": tid})


def vllms(self, req, computed):
    return 48 - computed, True  # vLLM's answer: the tokens to load, asynchronously


def until_answered(req, timeout=10.0):
    """Scheduler steps (get_num_new_matched_tokens each) until the plugin stops waiting."""
    deadline = time.monotonic() + timeout
    steps = 0
    while time.monotonic() < deadline:
        got = vm._matched(vllms, None, req, 0)
        steps += 1
        if got[0] is not None:
            return got, steps
        time.sleep(0.002)
    raise AssertionError("still waiting")


def test_the_route_answers_once_the_sender_holds_the_blocks(prefill):
    assert get(prefill.addr + "/corun/blocks/t1") == {"ready": False}
    assert get(prefill.addr + "/corun/blocks/unknown") == {"ready": False}
    prefill.ready.set()
    assert get(prefill.addr + "/corun/blocks/t1") == {"ready": True, "block_ids": [[7, 8, 9]]}
    # vLLM's own routes are untouched.
    assert get(prefill.addr + "/query") == {}


def test_disable_takes_the_route_away(prefill):
    prefill.ready.set()
    assert get(prefill.addr + "/corun/blocks/t1")["ready"]
    vllm_plugin.disable()
    with pytest.raises(urllib.error.HTTPError) as e:
        get(prefill.addr + "/corun/blocks/t1")
    assert e.value.code == 404
    assert get(prefill.addr + "/query") == {}


def test_the_decode_side_waits_then_places_against_the_prefill_blocks(prefill):
    vllm_plugin.reset_counters()
    req = request(prefill.addr)
    # Not ready: the request waits (None: vLLM's scheduler skips it this step).
    assert vm._matched(vllms, None, req, 0) == (None, False)
    time.sleep(0.05)
    assert vm._matched(vllms, None, req, 0) == (None, False)
    assert "remote_block_ids" not in req.kv_transfer_params
    prefill.ready.set()
    got, _ = until_answered(req)
    assert got == (48, True)  # vLLM's own answer, once the ids are in
    assert req.kv_transfer_params["remote_block_ids"] == [[7, 8, 9]]
    c = vllm_plugin.counters()
    assert c["mooncake_waits"] == 1 and c["mooncake_wait_us"] > 0 and c["fallback"] == 0
    # Asked once: a later step is vLLM's at once.
    assert vm._matched(vllms, None, req, 16) == (32, True)


def test_a_prefill_side_without_the_route_is_vllms_way_and_not_asked_again(prefill):
    vllm_plugin.disable()  # the prefill side's plugin is off: vLLM's 404
    vllm_plugin.reset_counters()
    req = request(prefill.addr, "t2")
    got, _ = until_answered(req)
    assert got == (48, True)
    assert req.kv_transfer_params["remote_block_ids"] is None  # nothing to place against
    assert vllm_plugin.counters()["fallback"] == 1
    # That peer is known now: its next request is vLLM's at once, with no wait.
    other = request(prefill.addr, "t3")
    assert vm._matched(vllms, None, other, 0) == (48, True)
    assert "remote_block_ids" not in other.kv_transfer_params
    assert vllm_plugin.counters()["fallback"] == 2 and vllm_plugin.counters()["mooncake_waits"] == 1
    vm.ASKS.plain.discard(prefill.addr)


def test_an_unreachable_prefill_side_is_vllms_way():
    vllm_plugin.reset_counters()
    req = request("http://127.0.0.1:9", "t4")  # the discard port: nothing listens
    got, _ = until_answered(req)
    assert got == (48, True) and req.kv_transfer_params["remote_block_ids"] is None
    assert vllm_plugin.counters()["fallback"] == 1


@pytest.mark.parametrize("params", [None, {}, {"do_remote_decode": True},
                                    {"do_remote_prefill": True, "remote_block_ids": [[1]]},
                                    {"do_remote_prefill": True, "transfer_id": "t"}])
def test_other_requests_are_vllms_at_once(params):
    req = SimpleNamespace(request_id="x", kv_transfer_params=params)
    assert vm._matched(vllms, None, req, 0) == (48, True)


def test_answers_no_step_took_are_dropped_past_the_bound(monkeypatch):
    monkeypatch.setattr(vm, "_KEEP", 3)
    asks = vm._Asks()
    for t in ("a", "b", "c"):
        asks.state[t] = {"done": t != "b", "ids": None, "t0": 0.0}
    asks.submit("d", "http://127.0.0.1:9", time.monotonic() + 1)
    assert set(asks.state) == {"b", "d"}  # the pending one kept, the answered ones dropped
