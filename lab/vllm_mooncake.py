"""vLLM 0.33.0's Mooncake connector in ``lab.vllm_engine``'s engines: the shims its worker
needs on a CPU-only torch (:func:`shim`), the settings it reads (:func:`environment`,
:data:`EXTRA_CONFIG`), the decode side's parameters for a prefilled request
(:func:`decode_params`), and :class:`Timing`: when each pull started and ended on the
decode side, and what the prefill side's sender posted for it.

Shims (each only where vLLM needs a GPU; every other line of the connector runs as is):

- ``mooncake/mooncake_connector.py:1242``, ``MooncakeConnectorWorker.__init__``:
  ``torch.accelerator.current_device_index()`` raises without a GPU ("Found no NVIDIA
  driver"): it answers device 0.
- ``mooncake_connector.py:1243`` and ``:2028`` (``_bind_sender_thread_device``, each
  sender thread's initializer): ``current_platform.set_device`` is a no-op (the CPU
  platform has no device to bind).
- ``mooncake_connector.py:1382`` and ``:1418`` (``get_current_attn_backends``): without a
  model vLLM falls back to ``CPU_ATTN``, whose kernels take 32-token blocks only; the
  worker is given ``FlashAttentionBackend``, as ``lab.stack_vllm``'s NIXL worker is.

Nothing else is changed: the connector's scheduler and worker sides, its bootstrap
server (the prefill side's, on ``VLLM_MOONCAKE_BOOTSTRAP_PORT``), its ZMQ side channel,
``_build_transfer_params`` (vLLM's grouping, ``group_concurrent_contiguous``, and its
coalescing of a group into one descriptor) and the real ``TransferEngine`` over TCP
(``mooncake_protocol: tcp``) on 127.0.0.1.

Measured: ``xfer_ms`` on the decode side, from its worker's ``start_load_kv`` being handed
the request to the pull's completion (``_complete_pull_task`` marking it received: the
prefill side's answer that its write is done); ``engine_ms`` is the time inside the
prefill side's ``TransferEngine.batch_transfer_sync_write`` for it (Mooncake posts and
waits in one call), ``post_ms`` the rest (the side channel's round trip, vLLM's
``_build_transfer_params``, corun's grouping); ``posted`` the descriptors (slices) that
call was given. ``ttft_ms`` is the decode side's time from adding the request to its
first step with the whole prompt computed (what a deferred allocation costs shows
there)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, List

CONNECTOR = "MooncakeConnector"
#: The connector's settings (``kv_connector_extra_config``): TCP, no RDMA device here.
EXTRA_CONFIG = {"mooncake_protocol": "tcp"}


#: Slices Mooncake's TCP transport queues and admits per peer
#: (``MC_TCP_MAX_QUEUED_TRANSFERS_PER_PEER``, ``MC_TCP_MAX_PENDING_ADMISSIONS_PER_PEER``).
#: At their defaults a batch of more than about 2,048 slices is refused ("TCP lane
#: queue-full rejection": ``batch_transfer_sync_write`` returns -1, vLLM reports the load
#: failed and fails the request): llama3-70b-tp8's 80 regions make that a 26-block
#: request in vLLM's order. vLLM's Mooncake connector has no bound of its own on a batch
#: (SGLang's has: ``SGLANG_MOONCAKE_MAX_TRANSFER_BATCH_INDICES``), so these runs raise
#: Mooncake's, both to the most they take (measured here: 60,000 slices pass at 65,535;
#: 65,536 is not taken and the defaults stay). A pull past it still fails: counted in
#: ``pulls_failed`` (an error) and its request is not checked.
TCP_QUEUE = 65535


def environment(role: str, bootstrap_port: int) -> None:
    """What the connector reads from the environment: this host's address, the prefill
    side's bootstrap port (served by its worker; the decode side is told it in each
    request's ``remote_bootstrap_addr``), TCP for Mooncake and its queue (:data:`TCP_QUEUE`)."""
    os.environ.update(VLLM_HOST_IP="127.0.0.1", MC_FORCE_TCP="1",
                      VLLM_MOONCAKE_BOOTSTRAP_PORT=str(bootstrap_port))
    for name in ("MC_TCP_MAX_QUEUED_TRANSFERS_PER_PEER", "MC_TCP_MAX_PENDING_ADMISSIONS_PER_PEER"):
        os.environ.setdefault(name, str(TCP_QUEUE))


def shim() -> None:
    """The shims of the module docs, before the worker is built."""
    import torch
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake import mooncake_connector as mc
    from vllm.platforms import current_platform
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

    torch.accelerator.current_device_index = lambda *a, **k: 0
    type(current_platform).set_device = classmethod(lambda cls, device: None)
    mc.get_current_attn_backends = lambda *a, **k: [FlashAttentionBackend]


def decode_params(spec_index: int, bootstrap_port: int) -> Dict[str, Any]:
    """The decode side's ``kv_transfer_params`` for request ``spec_index`` (what vLLM's
    Mooncake proxy sends it: the prefill engine, its bootstrap address, the transfer id
    both sides were given)."""
    return {"do_remote_prefill": True, "remote_engine_id": "prefill-engine",
            "remote_bootstrap_addr": f"http://127.0.0.1:{bootstrap_port}",
            "transfer_id": transfer_id(spec_index)}


def transfer_id(spec_index: int) -> str:
    return f"xfer-{spec_index}"


class Timing:
    """The decode side's view (``role="decode"``: when each pull started and was done) or
    the prefill side's (``"prefill"``: per decode request, the descriptors, bytes and time
    of its ``batch_transfer_sync_write``). Wraps the worker's calls without changing
    what they do."""

    def __init__(self, worker: Any, role: str):
        self.start: Dict[str, float] = {}
        self.done: Dict[str, float] = {}
        self.sent: Dict[str, List[float]] = {}  # d_req_id -> [engine_s, descs, bytes]
        self.failed: List[str] = []  # decode requests whose pull failed (vLLM recomputes them)
        self.lock = threading.Lock()
        if role == "decode":
            self._wrap_decode(worker)
        else:
            self._wrap_prefill(worker)

    def _wrap_decode(self, worker: Any) -> None:
        start_load, complete = worker.start_load_kv, worker._complete_pull_task
        failed = worker._handle_failed_recv

        def noted_failed(pull_metas, req_ids, reason):
            with self.lock:
                self.failed.extend(r for r in req_ids if r in pull_metas and not pull_metas[r].failed)
            return failed(pull_metas, req_ids, reason)

        def timed_start(metadata):
            t = time.perf_counter()
            for metas in metadata.reqs_to_recv.values():
                for rid in metas:
                    self.start.setdefault(rid, t)
            return start_load(metadata)

        def timed_complete(pull_meta):
            complete(pull_meta)
            if pull_meta.d_req_id in worker.finished_recving_reqs:
                self.done.setdefault(pull_meta.d_req_id, time.perf_counter())

        worker.start_load_kv, worker._complete_pull_task = timed_start, timed_complete
        worker._handle_failed_recv = noted_failed

    def _wrap_prefill(self, worker: Any) -> None:
        build, send = worker._build_transfer_params, worker._send_blocks
        pending: Dict[int, List[str]] = {}  # id(src_ptrs) -> the decode requests in it

        async def noted_build(ready_reqs, *args, **kwargs):
            got = await build(ready_reqs, *args, **kwargs)
            with self.lock:
                pending[id(got[0])] = [rid for rid, _ in ready_reqs if rid not in set(got[3])]
            return got

        def timed_send(session, src_ptrs, dst_ptrs, lengths):
            t = time.perf_counter()
            ret = send(session, src_ptrs, dst_ptrs, lengths)
            dt = time.perf_counter() - t
            with self.lock:
                rids = pending.pop(id(src_ptrs), [])
                for rid in rids:  # one request a call in these runs; shared evenly if more
                    self.sent[rid] = [dt / len(rids), len(src_ptrs) / len(rids), sum(lengths) / len(rids)]
            return ret

        worker._build_transfer_params, worker._send_blocks = noted_build, timed_send

    def add_stats(self, stats: Any) -> None:
        """vLLM's connector stats: not what these runs measure (the engine sides do)."""

    def pending(self) -> int:
        """Writes posted and not seen done: none (Mooncake's write returns when done)."""
        return 0

    def summary(self) -> Dict[str, Any]:
        with self.lock:
            return dict(start=dict(self.start), done=dict(self.done), sent=dict(self.sent),
                        failed=list(self.failed))
