"""The vLLM plugin's ``place`` feature over vLLM's Mooncake connector: the decode side
allocates a request's blocks once it knows the prefill side's, so that placement
(``corun._vllm_place``) pairs them run for run.

vLLM 0.33's Mooncake connector tells the decode side nothing of the prefill side's
blocks: its ``kv_transfer_params`` are the prefill engine, its bootstrap address and a
transfer id, and the decode side allocates at once. Here, on each side with the plugin:

- prefill: the worker that runs the Mooncake bootstrap server (``MooncakeBootstrapServer``,
  rank 0) serves ``GET /corun/blocks/{transfer_id}`` beside vLLM's ``/register`` and
  ``/query``: ``{"ready": true, "block_ids": [[...], ...]}`` (its blocks per KV cache
  group) once its sender holds them (``reqs_need_send``, set when the prefill is done),
  else ``{"ready": false}``.
- decode: ``MooncakeConnectorScheduler.get_num_new_matched_tokens`` answers ``None`` ("not
  known yet": vLLM's scheduler skips the request this step) while a query of that route is
  in flight; once the ids are in, they are the request's ``remote_block_ids`` (NIXL's
  name, which placement reads) and vLLM's own answer is given. The transfer cannot start
  before the prefill is done, so the wait is what placement costs in time to first token
  (measured by ``lab.stack_vllm --connector mooncake``: ``ttft_ms_p50``).

A prefill side without the plugin (vLLM's 404), an unreachable one, or no answer within
``VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT`` (the connector's own bound on the prefill side
waiting for a request): the request goes vLLM's way at once, counted ``fallback``; a peer
that answered 404 is not asked again. With data-parallel engines behind one bootstrap
server (internal load balancing) only rank 0's requests are known to it: the others wait
for that bound and go vLLM's way.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Optional, Set, Tuple

from ._guard import guarded, stack_way
from ._vllm_life import LIFE as _LIFE

_COUNTERS = _LIFE.counters
ROUTE = "/corun/blocks/{transfer_id}"
_POLL_S = (0.001, 0.02)  # first and longest pause between asks of a pending transfer
_KEEP = 4096  # queries held before answered ones no step took are dropped


class _Asks:
    """The decode side's queries in flight, by transfer id; peers known to lack the route."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state: Dict[str, Dict[str, Any]] = {}
        self.plain: Set[str] = set()  # bootstrap addresses that answered 404
        self.pool: Optional[ThreadPoolExecutor] = None

    def submit(self, tid: str, addr: str, deadline: float) -> None:
        with self.lock:
            if self.pool is None:
                self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="corun-mooncake-ask")
            if len(self.state) >= _KEEP:
                # Answers no step came back for (requests aborted while they waited).
                for old in [t for t, e in self.state.items() if e["done"]]:
                    del self.state[old]
            entry = self.state[tid] = {"done": False, "ids": None, "t0": time.perf_counter()}
            self.pool.submit(_ask, self, entry, addr, tid, deadline)


ASKS = _Asks()


def _ask(asks: _Asks, entry: Dict[str, Any], addr: str, tid: str, deadline: float) -> None:
    """Asks the prefill side for ``tid``'s blocks until it has them, or the deadline."""
    url = addr.rstrip("/") + ROUTE.format(transfer_id=urllib.parse.quote(tid, safe=""))
    pause = _POLL_S[0]
    try:
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=max(0.1, deadline - time.monotonic())) as r:
                    got = json.loads(r.read())
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    with asks.lock:
                        asks.plain.add(addr)
                return
            if got.get("ready"):
                entry["ids"] = [list(map(int, g)) for g in got["block_ids"]]
                return
            time.sleep(pause)
            pause = min(pause * 2, _POLL_S[1])
    except Exception:  # unreachable, refused, bad answer: vLLM's way
        return
    finally:
        entry["done"] = True


def _wants(params: Any) -> Optional[Tuple[str, str]]:
    """(transfer id, bootstrap address) of a remote-prefill request placement can wait
    for; None for any other."""
    if not params or not params.get("do_remote_prefill") or "remote_block_ids" in params:
        return None
    tid, addr = params.get("transfer_id"), params.get("remote_bootstrap_addr")
    if not isinstance(tid, str) or not isinstance(addr, str):
        return None
    return tid, addr


def _abort_timeout() -> float:
    from vllm import envs  # type: ignore[import-not-found, unused-ignore]

    return float(envs.VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT)


def _matched(vllms: Any, self: Any, request: Any, num_computed_tokens: int) -> Any:
    params = request.kv_transfer_params
    wanted = _wants(params)
    if wanted is None:
        return vllms(self, request, num_computed_tokens)
    tid, addr = wanted
    with ASKS.lock:
        entry = ASKS.state.get(tid)
    if entry is None:
        if addr in ASKS.plain:  # a prefill side without the plugin: vLLM's way, no wait
            _COUNTERS.add("fallback")
            return vllms(self, request, num_computed_tokens)
        ASKS.submit(tid, addr, time.monotonic() + _abort_timeout())
        _COUNTERS.add("mooncake_waits")
        return None, False
    if not entry["done"]:
        return None, False
    with ASKS.lock:
        ASKS.state.pop(tid, None)
    _COUNTERS.add("mooncake_wait_us", int((time.perf_counter() - entry["t0"]) * 1e6))
    if entry["ids"] is None:
        _COUNTERS.add("fallback")  # no ids: vLLM allocates its own way
        params["remote_block_ids"] = None  # asked once: not again on a later step
    else:
        params["remote_block_ids"] = entry["ids"]
    return vllms(self, request, num_computed_tokens)


def _serve_blocks(worker: Any) -> None:
    """The prefill side's route, on the bootstrap server this worker started."""
    server = getattr(worker, "bootstrap_server", None)
    if server is None:
        return

    async def blocks(transfer_id: str) -> Dict[str, Any]:
        meta = worker.reqs_need_send.get(transfer_id)
        if meta is None or not meta.ready.is_set():
            return {"ready": False}
        return {"ready": True, "block_ids": [list(map(int, g)) for g in meta.local_block_ids]}

    # Onto a copy of the router's routes, the list before it recorded: disable() puts it
    # back, and the server is as vLLM made it.
    router = server.app.router
    before = router.routes
    router.routes = list(before)
    server.app.get(ROUTE)(blocks)
    _LIFE.record(router, "routes", before)


def install() -> None:
    """Hooks both sides (``place`` installs it when vLLM's Mooncake connector imports)."""
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake import mooncake_connector as mc  # type: ignore[import-not-found, unused-ignore]

    sched, worker = mc.MooncakeConnectorScheduler, mc.MooncakeConnectorWorker
    matched, worker_init = sched.__dict__["get_num_new_matched_tokens"], worker.__dict__["__init__"]
    vllms = stack_way(matched)  # its exceptions are vLLM's: passed on once, not counted

    @functools.wraps(matched)
    def corun_matched(self: Any, request: Any, num_computed_tokens: int) -> Any:
        return _matched(vllms, self, request, num_computed_tokens)

    serve = guarded(_COUNTERS, "place", lambda w: None)(_serve_blocks)

    @functools.wraps(worker_init)
    def corun_worker_init(self: Any, *args: Any, **kwargs: Any) -> None:
        worker_init(self, *args, **kwargs)
        serve(self)

    _LIFE.patch(sched, "get_num_new_matched_tokens", guarded(_COUNTERS, "place", matched)(corun_matched))
    _LIFE.patch(worker, "__init__", corun_worker_init)
