"""Real KV bytes through SGLang 0.5.23's own Mooncake and NIXL backends, corun's plugin off
and on.

``python python/stack_e2e.py --stack sglang [--connector mooncake|nixl|both] [--requests N
--seed S --workload NAME --quick]`` (or ``python -m lab.stack_sglang`` from python/; the
connector is ``mooncake`` unless named). Each way (plugin off, plugin on; see
``lab.stack_common.alternate``) of each connector starts two fresh OS processes on 127.0.0.1
(described for Mooncake; NIXL's differences below):

- **decode**: SGLang's ``MooncakeKVManager`` (DECODE) and a ``MooncakeKVReceiver`` a
  request, its KV pool SGLang's ``MHATokenToKVPool`` on the CPU (host memory), pages from
  SGLang's ``PagedTokenToKVPoolAllocator`` (``need_sort`` as in P/D mode). As SGLang's
  ``DecodePreallocQueue`` does, it allocates first and sends its page indices
  (``send_metadata``); once the request is ``Success`` it checks every byte of every page.
- **prefill**: SGLang's ``MooncakeKVManager`` (PREFILL), ``MooncakeKVBootstrapServer`` and a
  ``MooncakeKVSender`` a request; it allocates through SGLang's own
  ``alloc_paged_token_slots_extend`` -> ``alloc_extend`` with the decode side's pages known
  (``kv_mgr.transfer_infos[room]``, where corun's placement reads them), fills the pages with
  ``lab.stack_common``'s (request, layer, token) pattern and sends them (``sender.send``).

Both sides register their pools through ``KVArgs`` as ``prefill.py``'s ``_init_kv_manager``
does (``get_kv_transfer_buf_infos``: K of every layer, then V, item length one page) and
move bytes with the real Mooncake Transfer Engine over TCP, initialised by SGLang's own
``init_mooncake_transfer_engine`` (``MOONCAKE_PROTOCOL=tcp``). corun is loaded in each
process by SGLang's ``sglang.srt.plugins.load_plugins()`` with ``CORUN_SGLANG=all`` (way
``on``) or without it (way ``off``). ``descriptors`` are counted at the engine object's
``batch_transfer_sync*`` methods SGLang calls (wrapped: the real engine still moves the
bytes); ``xfer_ms`` is a request's ``send`` to its ``Success`` on the prefill side.

The request stream is ``lab.stack_common.request_stream`` (lengths from ``lab.workloads``),
the same on both sides. The pools are kept at the workload's occupancy: the decode side
finishes a random live request when it needs room (requests end in any order) and grows
each live sequence by a page with the workload's ``growth`` probability a request; the
prefill side drops its oldest request first (its cache's LRU order).

Shims, only where SGLang needs a GPU or a model (nothing of Mooncake, of SGLang's allocator,
pool, KV manager, sender, receiver or bootstrap server is replaced):

- ``ServerArgs(model_path="dummy", device="cpu")`` published with ``runtime_context.publish``
  for rank 0: replaces the launcher's ``srt/entrypoints/engine.py`` / scheduler process
  start (``managers/scheduler.py``, which loads a model); ``pp_group`` is set to None
  (``get_parallel().override_permanently``) for the process groups that
  ``distributed/parallel_state.py``'s ``initialize_model_parallel`` builds (torch.distributed):
  with ``pp_size`` 1 the manager stores the handle and never uses it.
- The prefill batch: ``_Batch`` / ``_Req`` (``reqs``, ``bootstrap_room``,
  ``disagg_kv_sender``, ``disagg_decode_prefix_len``) stand for ``ScheduleBatch`` /
  ``Req`` of ``managers/schedule_batch.py`` (``prepare_for_extend`` ->
  ``alloc_for_extend``, ``mem_cache/allocation.py``), which carry a model's tokens and
  sampling state; only those attributes are read on this path.
- The tree cache: ``_NoPrefixCache`` (``supports_prefix_sharing() -> False``) for
  ``ChunkCache``/``RadixCache`` (``mem_cache/``) in ``alloc_paged_token_slots_extend``: no
  prefix cache, every request prefills (and sends) all of its tokens.
- The forward pass: the pattern is written into the pool where the model's attention
  layers would (``MHATokenToKVPool.set_kv_buffer`` from ``layers/radix_attention.py``).
- Metadata buffers: SGLang's ``MetadataBuffers`` and ``ReqToMetadataIdxAllocator``
  (``disaggregation/utils.py``), sent as SGLang sends them (aux descriptors are counted).

One chunk a request (SGLang's chunked prefill sends a long prompt in several); batches of
one request.

**NIXL** (``--connector nixl``): the same two processes with SGLang's ``NixlKVManager``,
``NixlKVSender`` / ``NixlKVReceiver`` and ``NixlKVBootstrapServer``
(``disaggregation/nixl/conn.py``) over nixl-cu12's UCX backend on host memory (its
``SGLANG_DISAGGREGATION_NIXL_BACKEND`` default). SGLang prepares one strided descriptor
list per side and peer at registration (``_prep_equal_tp_dlist``: every slot of every
buffer) and posts each request as one ``make_prepped_xfer`` of ids, one per page and
buffer (``_send_kvcache_generic``, its prepped path: SGLang does not group these, so
``group_concurrent_contiguous`` is not on it), and the aux buffers by ``initialize_xfer``.
``descriptors`` are the descriptors SGLang hands the agent in those two calls (the ids'
count, the aux list's ``descCount()``); ``nixl_posted`` is what NIXL posted after its own
merge of neighbours adjacent on both sides (each transfer's telemetry ``descCount``, read
once NIXL says DONE, as ``lab/e2e.py`` reads it; telemetry is switched on with
``NIXL_TELEMETRY_ENABLE=y``, SGLang's agent config left as it makes it). With the plugin
on, placement can only change ``nixl_posted``; ``descriptors`` is the pages times the
buffers either way. ``engine_ms`` is the time inside those agent calls and ``transfer``
(NIXL posts asynchronously; the wait is in ``xfer_ms``). Two more shims for NIXL:

- ``nixl`` (``disaggregation/nixl/conn.py:543``, ``from nixl._api import nixl_agent``):
  SGLang imports the ``nixl`` meta package's module, which picks a CUDA build; here
  nixl-cu12 is installed alone, so ``nixl``, ``nixl._api`` and ``nixl._bindings`` are
  bound to ``nixl_cu12``'s (as ``lab.stack_vllm`` does for vLLM).
- the KV memory kind: ``KVArgs.kv_data_mem_kinds`` is ``DRAM`` on both sides (the pools
  are host memory). SGLang's prefill (``prefill.py: _init_kv_manager``) leaves it unset,
  which ``conn.py:206`` (``_normalize_kv_mem_kinds``) reads as ``VRAM``, and its decode
  sets ``DRAM`` only for a HiSparse host pool (``decode.py:629``): both take a GPU pool.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import sys
import time
import traceback
from typing import Dict, List

import numpy as np

from lab import stack_common as sc
from lab import upstream

STACK = "sglang"
#: The connectors this module runs, the first the default (``--connector``).
CONNECTORS = ("mooncake", "nixl")
MODE = "pd"
LAYERS = 32  # K and V each: 64 registered buffers a side
HEADS, HEAD_DIM = 1, 128  # bf16: 256 bytes a token a buffer (one KV head of a TP-8 rank)
DTYPE_BYTES = 2
# Pages a side (prefill, decode); 16-token pages: 4 KiB a page a buffer, 256 KiB a page in
# all 64 buffers: 1.0 and 1.5 GiB (quick: 128 and 192 MiB).
POOLS = {False: (4096, 6144), True: (512, 768)}
# Mooncake's TCP transport rejects a batch of 4,096 ("TCP lane queue-full"): SGLang's own
# bound on indices a batch (SGLANG_MOONCAKE_MAX_TRANSFER_BATCH_INDICES) keeps every batch at
# most this many pages x 64 buffers.
BATCH_INDICES = 32
POLL_TIMEOUT = 120.0  # seconds a request may take to reach Success before it is an error
START_TIMEOUT = 300.0  # seconds a side may take to start (imports: ~20 s each here)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- shims (see the module docs) ------------------------------------------------------


class _Req:
    def __init__(self, room, sender):
        self.bootstrap_room = room
        self.disagg_kv_sender = sender
        self.disagg_decode_prefix_len = 0


class _Batch:
    def __init__(self, reqs):
        self.reqs = reqs


class _NoPrefixCache:
    def __init__(self, allocator):
        self.token_to_kv_pool_allocator = allocator

    def supports_prefix_sharing(self):
        return False

    def pretty_print(self):
        pass


# --- one side ---------------------------------------------------------------------------


class _MooncakeCounted:
    """Wraps the engine object's ``batch_transfer_sync*`` methods: descriptors, calls,
    failures (a return below 0 or an exception), seconds inside the engine."""

    def __init__(self, engine):
        self.descriptors = self.calls = self.failed = 0
        self.seconds = 0.0
        self.extra: Dict[str, int] = {}
        for name in dir(engine):
            if name.startswith("batch_transfer_sync"):
                setattr(engine, name, self._wrap(getattr(engine, name)))

    def _wrap(self, own):
        def counted(session_id, buffers, peer_addresses, lengths, *rest, **kw):
            self.calls += 1
            self.descriptors += len(buffers)
            t = time.perf_counter()
            try:
                ret = own(session_id, buffers, peer_addresses, lengths, *rest, **kw)
            except BaseException:
                self.failed += 1
                raise
            finally:
                self.seconds += time.perf_counter() - t
            if ret is None or ret < 0:
                self.failed += 1
            return ret

        return counted


class _NixlCounted:
    """Wraps the calls SGLang's ``NixlKVManager`` makes on its NIXL agent: the descriptors
    handed (``make_prepped_xfer``'s ids, ``initialize_xfer``'s list), transfers made,
    failures (an exception, or ERR from ``transfer`` / ``check_xfer_state``), seconds
    inside the making and posting calls, and ``extra["nixl_posted"]``: the descriptors
    NIXL posted after its merge, from each transfer's telemetry once it is DONE. The
    prefill side's transfer workers are threads, hence the lock."""

    def __init__(self, agent):
        import threading

        self.agent = agent
        self.descriptors = self.calls = self.failed = 0
        self.seconds = 0.0
        self.extra = {"nixl_posted": 0}
        self._lock = threading.Lock()
        self._pending: Dict[int, object] = {}  # id(handle) -> handle, until DONE or ERR
        make, init = agent.make_prepped_xfer, agent.initialize_xfer
        post, check = agent.transfer, agent.check_xfer_state

        def make_prepped_xfer(op, local, local_ids, remote, remote_ids, *rest, **kw):
            return self._made(len(local_ids), make, op, local, local_ids, remote, remote_ids,
                              *rest, **kw)

        def initialize_xfer(op, local_descs, remote_descs, *rest, **kw):
            return self._made(local_descs.descCount(), init, op, local_descs, remote_descs,
                              *rest, **kw)

        def transfer(handle, *rest, **kw):
            return self._state(handle, self._timed(post, handle, *rest, **kw))

        def check_xfer_state(handle):
            return self._state(handle, self._timed(check, handle, timed=False))

        agent.make_prepped_xfer, agent.initialize_xfer = make_prepped_xfer, initialize_xfer
        agent.transfer, agent.check_xfer_state = transfer, check_xfer_state

    def _timed(self, own, *args, timed=True, **kw):
        t = time.perf_counter()
        try:
            return own(*args, **kw)
        except BaseException:
            with self._lock:
                self.failed += 1
            raise
        finally:
            if timed:
                with self._lock:
                    self.seconds += time.perf_counter() - t

    def _made(self, descriptors, own, *args, **kw):
        handle = self._timed(own, *args, **kw)
        with self._lock:
            self.calls += 1
            self.descriptors += descriptors
            if handle:
                self._pending[id(handle)] = handle
        return handle

    def _state(self, handle, state):
        """Counts a handle's end once: ERR a failure, DONE its telemetry's descCount."""
        if state in ("DONE", "ERR"):
            with self._lock:
                mine = self._pending.pop(id(handle), None) is not None
            if mine and state == "ERR":
                with self._lock:
                    self.failed += 1
            elif mine:
                posted = self.agent.get_xfer_telemetry(handle).descCount
                with self._lock:
                    self.extra["nixl_posted"] += posted
        return state


def _load_plugins() -> str:
    """corun the way SGLang loads plugins; returns how it was loaded."""
    import importlib.metadata

    from sglang.srt.plugins import load_plugins

    load_plugins()
    if any(ep.name == "corun" for ep in importlib.metadata.entry_points(group="sglang.srt.plugins")):
        return "load_plugins"
    raise RuntimeError("corun-kv declares no sglang.srt.plugins entry point here: "
                       "reinstall it (pip install ./python)")


def _backend(connector: str):
    from sglang.srt.disaggregation.utils import TransferBackend

    return TransferBackend.MOONCAKE if connector == "mooncake" else TransferBackend.NIXL


def _setup(role: str, connector: str, port: int, pages: int, page_tokens: int):
    """SGLang's pieces for ``role`` over ``connector``: (manager, pool, allocator,
    metadata allocator, counted engine, bootstrap server or None, how corun was loaded)."""
    import torch
    from sglang.srt import runtime_context as rc
    from sglang.srt.server_args import ServerArgs

    sa = ServerArgs(model_path="dummy", device="cpu", host="127.0.0.1",
                    disaggregation_mode=role, disaggregation_transfer_backend=connector,
                    disaggregation_bootstrap_port=port, page_size=page_tokens)
    rc.publish(sa, role="scheduler", ranks=rc.SpawnRanks(world_rank=0, gpu_id=0))
    # No process groups (pp_size 1: the manager keeps the handle, never uses it).
    rc.get_parallel().override_permanently(pp_group=None)
    loaded = _load_plugins()

    from sglang.srt.disaggregation.base.conn import KVArgs
    from sglang.srt.disaggregation.utils import (DisaggregationMode, KVClassType, MetadataBuffers,
                                                 ReqToMetadataIdxAllocator, get_kv_class,
                                                 get_kv_transfer_buf_infos)
    from sglang.srt.distributed.device_communicators.mooncake_transfer_engine import (
        init_mooncake_transfer_engine)
    from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool

    backend = _backend(connector)
    counted = None
    if connector == "mooncake":
        counted = _MooncakeCounted(init_mooncake_transfer_engine(hostname="127.0.0.1", gpu_id=0))
    server = None
    if role == "prefill":
        server = get_kv_class(backend, KVClassType.BOOTSTRAP_SERVER)("127.0.0.1", port)

    pool = MHATokenToKVPool(size=pages * page_tokens, page_size=page_tokens, dtype=torch.bfloat16,
                            head_num=HEADS, head_dim=HEAD_DIM, layer_num=LAYERS, device="cpu",
                            enable_memory_saver=False)
    allocator = PagedTokenToKVPoolAllocator(pages * page_tokens, page_tokens, torch.bfloat16, "cpu",
                                            kvcache=pool, need_sort=True)
    slots = 64
    meta = MetadataBuffers(slots, hidden_size=16, hidden_states_dtype=torch.bfloat16,
                           max_sampling_mask_tokens=0)

    # As prefill.py's _init_kv_manager (decode.py's is the same for these fields).
    kv_args = get_kv_class(backend, KVClassType.KVARGS)()
    kv_args.engine_rank = 0
    kv_args.pp_rank = 0
    kv_args.system_dp_rank = None
    kv_args.rust_http_port = None
    kv_args.kv_cache_dtype_str = "bfloat16"
    kv_args.kv_layout = None
    kv_args.prefill_start_layer = 0
    kv_args.kv_data_ptrs, kv_args.kv_data_lens, kv_args.kv_item_lens = get_kv_transfer_buf_infos(pool)
    if connector == "nixl":  # host memory (a shim: see the module docs)
        kv_args.kv_data_mem_kinds = ["DRAM"] * len(kv_args.kv_data_ptrs)
    kv_args.prefill_end_layer = LAYERS
    kv_args.num_draft_entries = 0
    kv_args.kv_layer_ids = []  # what build_kv_layer_ids gives an MHA pool: positional pairing
    kv_args.kv_head_num = HEADS
    kv_args.total_kv_head_num = HEADS
    kv_args.page_size = page_tokens
    kv_args.aux_data_ptrs, kv_args.aux_data_lens, kv_args.aux_item_lens = meta.get_buf_infos()
    kv_args.ib_device = None
    kv_args.gpu_id = 0
    kv_args.state_types, kv_args.state_data_ptrs, kv_args.state_data_lens = [], [], []
    kv_args.state_item_lens, kv_args.state_layer_ids, kv_args.state_dim_per_tensor = [], [], []
    kv_args.state_slice_outer_counts, kv_args.state_conv_shard_groups = [], []
    kv_args.swa_kv_cache_layout = None
    kv_args.is_hybrid_mla_backend = False
    kv_args.mla_compression_ratios = None
    mode = DisaggregationMode.PREFILL if role == "prefill" else DisaggregationMode.DECODE
    mgr = get_kv_class(backend, KVClassType.MANAGER)(kv_args, mode, sa, False)
    if counted is None:  # NIXL: the agent is the manager's own, made in its __init__
        counted = _NixlCounted(mgr.agent)
    return mgr, pool, allocator, ReqToMetadataIdxAllocator(slots), counted, server, loaded


def _layer_words(pool, layer: int, kv: int) -> np.ndarray:
    """A layer's K (kv 0) or V buffer as (token slots, 8-byte words), over its memory."""
    import torch

    buf = (pool.k_buffer if kv == 0 else pool.v_buffer)[layer]
    return buf.view(torch.uint8).view(buf.shape[0], -1).numpy().view(np.uint64)


def _token_slots(pages: np.ndarray, page_tokens: int) -> np.ndarray:
    return (np.asarray(pages, np.int64)[:, None] * page_tokens + np.arange(page_tokens)).ravel()


def _stream(cfg):
    return list(sc.request_stream(cfg["workload"], cfg["requests"], cfg["seed"],
                                  cfg["page_tokens"], cfg["prefill_pages"]))


def _wait(poll, want, deadline):
    """Polls until ``want`` or Failed or ``deadline``; returns the last state."""
    from sglang.srt.disaggregation.base.conn import KVPoll

    while True:
        state = poll()
        if state == want or state == KVPoll.Failed or time.monotonic() > deadline:
            return state
        time.sleep(0.0005)


def _decode(cfg, out) -> None:
    import torch
    from sglang.srt.disaggregation.base.conn import KVPoll
    from sglang.srt.disaggregation.utils import KVClassType, get_kv_class

    ps, pages = cfg["page_tokens"], cfg["decode_pages"]
    mgr, pool, allocator, meta_alloc, counted, _, loaded = _setup(
        "decode", cfg["connector"], cfg["port"], pages, ps)
    receiver_cls = get_kv_class(_backend(cfg["connector"]), KVClassType.RECEIVER)
    addr = f"127.0.0.1:{cfg['port']}"
    deadline = time.monotonic() + START_TIMEOUT
    while not mgr.try_ensure_parallel_info(addr):  # as DecodePreallocQueue._ensure_prefill_info
        if time.monotonic() > deadline:
            raise RuntimeError(f"decode: no parallel info from the prefill side at {addr}")
        time.sleep(0.2)
    rng = np.random.default_rng([cfg["seed"], 2])
    workload = cfg["workload"]
    live: Dict[int, List] = {}  # request index -> [token slots tensors]
    res = dict(requests=0, bytes_checked=0, bytes_bad=0, errors=0, loaded=loaded)
    words = [[_layer_words(pool, layer, kv) for kv in (0, 1)] for layer in range(LAYERS)]
    limit = int(workload.occupancy * pages)

    def used():
        return pages - allocator.available_size() // ps

    def alloc(n_pages):
        while True:
            got = allocator.alloc(n_pages * ps)
            if got is not None:
                return got
            if not live:
                return None
            allocator.free(torch.cat(live.pop(int(rng.choice(list(live))))))

    for req in _stream(cfg):
        room = cfg["room0"] + req.index
        while live and used() + req.blocks > limit:
            allocator.free(torch.cat(live.pop(int(rng.choice(list(live))))))
        receiver = receiver_cls(mgr, addr, room)
        receiver.init(0)
        loc = alloc(req.blocks)
        if loc is None:
            res["errors"] += 1
            continue
        page_ids = (loc[::ps] // ps).numpy().astype(np.int32)
        aux = meta_alloc.alloc()
        receiver.send_metadata(page_ids, aux, None)
        state = _wait(receiver.poll, KVPoll.Success, time.monotonic() + POLL_TIMEOUT)
        meta_alloc.free(aux)
        live[req.index] = [loc]
        if state != KVPoll.Success:
            res["errors"] += 1
            continue
        slots = _token_slots(page_ids, ps)
        owners, tokens = sc.token_owners(req, ps), np.arange(len(slots))
        for layer in range(LAYERS):
            for kv in (0, 1):
                got = words[layer][kv][slots]
                res["bytes_bad"] += sc.check(got, owners, layer, kv, tokens)
                res["bytes_checked"] += got.nbytes
        res["requests"] += 1
        # Live sequences grow (decode steps) between arrivals.
        for k in list(live):
            if rng.random() < workload.growth:
                more = allocator.alloc(ps)
                if more is not None:
                    live[k].append(more)
    res["engine_failed"] = counted.failed
    out.send(res)


def _prefill(cfg, out) -> None:
    import torch
    from sglang.srt.disaggregation.base.conn import KVPoll
    from sglang.srt.disaggregation.utils import KVClassType, get_kv_class
    from sglang.srt.mem_cache import allocation

    ps, pages = cfg["page_tokens"], cfg["prefill_pages"]
    mgr, pool, allocator, meta_alloc, counted, server, loaded = _setup(
        "prefill", cfg["connector"], cfg["port"], pages, ps)
    sender_cls = get_kv_class(_backend(cfg["connector"]), KVClassType.SENDER)
    addr = f"127.0.0.1:{cfg['port']}"
    words = [[_layer_words(pool, layer, kv) for kv in (0, 1)] for layer in range(LAYERS)]
    tree = _NoPrefixCache(allocator)
    live: Dict[int, torch.Tensor] = {}  # oldest first
    limit = int(cfg["workload"].occupancy * pages)
    res = dict(requests=0, errors=0, xfer_ms=[], loaded=loaded)

    def used():
        return pages - allocator.available_size() // ps

    for req in _stream(cfg):
        room = cfg["room0"] + req.index
        while live and used() + req.blocks > limit:
            allocator.free(live.pop(next(iter(live))))
        sender = sender_cls(mgr, addr, room)
        # The bootstrap queue: wait for the decode side's pages (WaitingForInput).
        state = _wait(sender.poll, KVPoll.WaitingForInput, time.monotonic() + POLL_TIMEOUT)
        if state != KVPoll.WaitingForInput:
            res["errors"] += 1
            continue
        aux = meta_alloc.alloc()
        sender.init(req.blocks, aux)
        n = req.tokens(ps)
        zero, seq = torch.zeros(1, dtype=torch.int64), torch.tensor([n], dtype=torch.int64)
        try:
            loc = allocation.alloc_paged_token_slots_extend(
                tree_cache=tree, prefix_lens=zero, prefix_lens_cpu=zero, seq_lens=seq,
                seq_lens_cpu=seq, last_loc=torch.full((1,), -1, dtype=torch.int64),
                extend_num_tokens=n, batch=_Batch([_Req(room, sender)]))
        except RuntimeError:  # SGLang's "Prefill out of memory": nothing left to drop
            res["errors"] += 1
            continue
        live[req.index] = loc
        page_ids = (loc[::ps] // ps).numpy().astype(np.int32)
        slots = _token_slots(page_ids, ps)
        owners, tokens = sc.token_owners(req, ps), np.arange(len(slots))
        tmp = np.empty((len(slots), words[0][0].shape[1]), dtype=np.uint64)
        for layer in range(LAYERS):
            for kv in (0, 1):
                sc.fill(tmp, owners, layer, kv, tokens)
                words[layer][kv][slots] = tmp
        t = time.perf_counter()
        sender.send(page_ids)
        state = _wait(sender.poll, KVPoll.Success, time.monotonic() + POLL_TIMEOUT)
        meta_alloc.free(aux)
        if state != KVPoll.Success:
            res["errors"] += 1
            continue
        res["xfer_ms"].append((time.perf_counter() - t) * 1e3)
        res["requests"] += 1
    import corun.sglang_plugin as plugin

    c = plugin.counters()
    res.update(descriptors=counted.descriptors, engine_calls=counted.calls,
               engine_failed=counted.failed, engine_ms=counted.seconds * 1e3,
               placed=c.get("placed", 0), fallback=c.get("fallback", 0),
               partial=c.get("partial", 0), place_times=plugin.place_times(),
               plugin_errors=c.get("errors", 0), group_calls=c.get("group_calls", 0),
               engine_extra=dict(counted.extra))
    out.send(res)
    out.recv()  # the decode side is done: keep the engine and server up until then
    if server is not None:
        server.close()


def _side(role, cfg, out) -> None:
    """A child process: one side, its result (or its failure) sent on ``out``."""
    os.environ["MOONCAKE_PROTOCOL"] = "tcp"
    os.environ["MC_FORCE_TCP"] = "1"
    os.environ["SGLANG_HOST_IP"] = "127.0.0.1"
    os.environ["SGLANG_MOONCAKE_MAX_TRANSFER_BATCH_INDICES"] = str(BATCH_INDICES)
    if cfg["connector"] == "nixl":
        # Each transfer's telemetry (descCount after NIXL's merge), SGLang's config untouched.
        os.environ["NIXL_TELEMETRY_ENABLE"] = "y"
        sc.alias_nixl()
    if cfg["plugin"] == "on":
        os.environ["CORUN_SGLANG"] = "all"
    else:
        os.environ.pop("CORUN_SGLANG", None)
    try:
        (_prefill if role == "prefill" else _decode)(cfg, out)
    except BaseException:
        out.send({"failure": f"{role}: {traceback.format_exc()}"})


def run_way(args, connector: str, plugin: str) -> sc.WayResult:
    """One way of ``connector``: fresh prefill and decode processes, their figures combined."""
    prefill_pages, decode_pages = POOLS[bool(args.quick)]
    ps = args.workload_spec.page_tokens
    cfg = dict(connector=connector, plugin=plugin, port=_free_port(), workload=args.workload_spec,
               requests=args.requests, seed=args.seed, page_tokens=ps,
               prefill_pages=prefill_pages, decode_pages=decode_pages, room0=1_000)
    ctx = mp.get_context("spawn")
    pipes, procs = {}, {}
    for role in ("prefill", "decode"):
        mine, theirs = ctx.Pipe()
        pipes[role] = mine
        procs[role] = ctx.Process(target=_side, args=(role, cfg, theirs), daemon=True)
    r = sc.WayResult()
    per_token = 2 * LAYERS * HEADS * HEAD_DIM * DTYPE_BYTES
    r.bytes_expected = sum(q.tokens(ps) * per_token for q in _stream(cfg))
    try:
        # Both start at once (their imports take most of a way's time); the decode side
        # waits for the prefill side's bootstrap server as SGLang's does.
        for p in procs.values():
            p.start()
        budget = START_TIMEOUT + POLL_TIMEOUT * args.requests
        dec = _recv(pipes["decode"], budget, procs["decode"])
        pre = _recv(pipes["prefill"], budget, procs["prefill"])
        pipes["prefill"].send("done")
        for side in (dec, pre):
            if "failure" in side:
                raise RuntimeError(side["failure"])
    except (RuntimeError, EOFError, TimeoutError) as e:
        print(f"stack_sglang: connector={connector} plugin={plugin}: {e}", file=sys.stderr)
        r.errors += 1
        return r
    finally:
        for p in procs.values():
            if p.pid is None:
                continue
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    r.requests = min(dec["requests"], pre["requests"])
    r.bytes_checked, r.bytes_bad = dec["bytes_checked"], dec["bytes_bad"]
    r.descriptors, r.xfer_ms = pre["descriptors"], pre["xfer_ms"]
    r.placed, r.fallback, r.partial = pre["placed"], pre["fallback"], pre["partial"]
    r.placement_times(pre["place_times"])
    r.errors = (dec["errors"] + pre["errors"] + dec["engine_failed"] + pre["engine_failed"]
                + pre["plugin_errors"])
    r.extra.update(workload=args.workload, page_tokens=ps, layers=LAYERS,
                   engine_calls=pre["engine_calls"], engine_ms=round(pre["engine_ms"], 1),
                   group_calls=pre["group_calls"], loaded=pre["loaded"], **pre["engine_extra"])
    return r


def _recv(conn, timeout, proc):
    """The side's answer; an error when it dies first (a crash in native code sends none)
    or says nothing for ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not conn.poll(1.0):
        if not proc.is_alive():
            raise RuntimeError(f"a side died (exit code {proc.exitcode}) without an answer")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no answer in {timeout:.0f} s")
    return conn.recv()


def _line(connector: str, plugin: str, r: sc.WayResult) -> str:
    # The line has no mode= field: stack_common's formatter writes one, dropped here.
    return sc.stack_line(STACK, connector, None, plugin, r)


def results_name(connector: str) -> str:
    """The results file of a full run: Mooncake's keeps the name it had before NIXL."""
    if connector == "mooncake":
        return "stack-e2e-sglang.txt"
    return f"stack-e2e-sglang-{connector}.txt"


def _parser() -> argparse.ArgumentParser:
    ap = sc.parser(__doc__.splitlines()[0])
    ap.add_argument("--connector", choices=CONNECTORS + ("both",), default=CONNECTORS[0],
                    help=f"SGLang's transfer backend (default {CONNECTORS[0]}; both: each in turn)")
    return ap


def main(args=None) -> int:
    """Runs both ways of each connector asked for, prints one line each; returns 0 when
    every target is met (1 when a line has bytes_bad, errors or bytes_checked off the
    requests' KV size). A package the run needs and this Python lacks ends it first, with
    a message naming it and its ``pip install`` (``lab.upstream.require``).
    ``args``: the command line's arguments (a list, or None for ``sys.argv``)."""
    args = sc.parse(_parser(), args)
    chosen = args.connector
    connectors = CONNECTORS if chosen == "both" else (chosen,)
    upstream.require(f"stack_e2e.py --stack {STACK}", ["torch", "sglang", *connectors])
    sc.tee_results(results_name(chosen), args)
    ok = True
    for connector in connectors:
        got = sc.alternate(lambda mode, plugin: run_way(args, connector, plugin), [MODE])
        for plugin in sc.WAYS:
            r = got[(MODE, plugin)]
            print(_line(connector, plugin, r), flush=True)
            ok &= r.bytes_bad == 0 and r.errors == 0 and r.bytes_checked == r.bytes_expected
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
