"""One side of ``lab.stack_sglang``'s runs, in its own process (:class:`Side`, served by
``lab.kit.Child``): SGLang 0.5.23's own KV manager, sender or receiver, pool and allocator
for the prefill or decode role over Mooncake or NIXL, the whole request stream run
through them, every byte the decode side receives checked. The shims and what is
measured are in ``lab.stack_sglang``'s module docs."""

from __future__ import annotations

import os
import time
from typing import Dict, List

import numpy as np

from lab import stack_common as sc
from lab.engine_counts import MooncakeCounted, NixlCounted
from lab.sglang_shims import Batch, NoPrefixCache, Req

STACK = "sglang"
#: The connectors this module runs, the first the default (``--connector``).
CONNECTORS = ("mooncake", "nixl")
MODE = "pd"
#: The model a run takes unless ``--model`` says (``lab.stack_common.MODELS``): one KV
#: head of 128 a rank (Llama-3-8B at TP8), K and V of 32 layers: 64 buffers a side.
MODEL = "llama3-8b-tp8"
#: KV bytes a side's pool holds (prefill, decode), whatever the model and page size:
#: 1.0 and 1.5 GiB (quick: 128 and 192 MiB).
POOL_BYTES = {False: (1 << 30, 3 << 29), True: (128 << 20, 192 << 20)}
#: DeepSeek's MLA latent, as its model config gives SGLang's ``MLATokenToKVPool``.
KV_LORA_RANK, QK_ROPE_HEAD_DIM = 512, 64
# Mooncake's TCP transport rejects a batch of 4,096 slices ("TCP lane queue-full"): SGLang's
# own bound on indices a batch (SGLANG_MOONCAKE_MAX_TRANSFER_BATCH_INDICES) keeps every
# batch at most this many descriptors however the pages fall (indices x buffers).
BATCH_DESCRIPTORS = 2048
POLL_TIMEOUT = 120.0  # seconds a request may take to reach Success before it is an error
START_TIMEOUT = 300.0  # seconds a side may take to start (imports: ~20 s each here)


def pool_pages(model: sc.ModelShape, page_tokens: int, quick: bool):
    """(prefill, decode) pages: :data:`POOL_BYTES` of ``model``'s KV in ``page_tokens``-token
    pages."""
    page = page_tokens * model.buffers * model.token_bytes
    return tuple(b // page for b in POOL_BYTES[bool(quick)])


def batch_indices(model: sc.ModelShape) -> int:
    """SGLang's Mooncake bound on page indices a batch for ``model``: 32 for 64 buffers."""
    return max(1, BATCH_DESCRIPTORS // model.buffers)


def kv_parts(model: sc.ModelShape):
    """The pattern's K/V index of each buffer a layer: K and V, or MLA's one latent."""
    return (0,) if model.mla else (0, 1)


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


def _setup(role: str, connector: str, port: int, pages: int, page_tokens: int,
           model: sc.ModelShape):
    """SGLang's pieces for ``role`` over ``connector``: (manager, pool, allocator,
    metadata allocator, counted engine, bootstrap server or None, how corun was loaded).
    The pool and allocator are those SGLang's ``kv_cache_configurator`` picks for the
    model and page size: ``MHATokenToKVPool`` or (MLA) ``MLATokenToKVPool``;
    ``PagedTokenToKVPoolAllocator`` or (1-token pages) ``TokenToKVPoolAllocator``."""
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

    from sglang.srt.disaggregation.utils import (DisaggregationMode, KVClassType, MetadataBuffers,
                                                 ReqToMetadataIdxAllocator, get_kv_class,
                                                 get_kv_transfer_buf_infos)
    from sglang.srt.distributed.device_communicators.mooncake_transfer_engine import (
        init_mooncake_transfer_engine)
    from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
    from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, MLATokenToKVPool

    backend = _backend(connector)
    counted = None
    if connector == "mooncake":
        counted = MooncakeCounted(init_mooncake_transfer_engine(hostname="127.0.0.1", gpu_id=0))
    server = None
    if role == "prefill":
        server = get_kv_class(backend, KVClassType.BOOTSTRAP_SERVER)("127.0.0.1", port)

    size, bf16 = pages * page_tokens, torch.bfloat16
    if model.mla:
        assert KV_LORA_RANK + QK_ROPE_HEAD_DIM == model.head_dim, model
        pool = MLATokenToKVPool(size, page_tokens, bf16, kv_lora_rank=KV_LORA_RANK,
                                qk_rope_head_dim=QK_ROPE_HEAD_DIM, layer_num=model.layers,
                                device="cpu", enable_memory_saver=False)
    else:
        pool = MHATokenToKVPool(size=size, page_size=page_tokens, dtype=bf16,
                                head_num=model.kv_heads, head_dim=model.head_dim,
                                layer_num=model.layers, device="cpu", enable_memory_saver=False)
    if page_tokens == 1:
        allocator = TokenToKVPoolAllocator(size, bf16, "cpu", kvcache=pool, need_sort=True)
    else:
        allocator = PagedTokenToKVPoolAllocator(size, page_tokens, bf16, "cpu", kvcache=pool,
                                                need_sort=True)
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
    kv_args.prefill_end_layer = model.layers
    kv_args.num_draft_entries = 0
    kv_args.kv_layer_ids = []  # what build_kv_layer_ids gives these pools: positional pairing
    kv_args.kv_head_num = model.kv_heads
    kv_args.total_kv_head_num = model.kv_heads
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
    mgr = get_kv_class(backend, KVClassType.MANAGER)(kv_args, mode, sa, model.mla)
    if counted is None:  # NIXL: the agent is the manager's own, made in its __init__
        counted = NixlCounted(mgr.agent)
    return mgr, pool, allocator, ReqToMetadataIdxAllocator(slots), counted, server, loaded


def _layer_words(pool, model: sc.ModelShape):
    """Each layer's buffers (:func:`kv_parts`: K and V, or MLA's latent) as (token slots,
    8-byte words) over their memory."""
    import torch

    def words(buf):
        return buf.view(torch.uint8).view(buf.shape[0], -1).numpy().view(np.uint64)

    if model.mla:
        return [[words(pool.kv_buffer[layer])] for layer in range(model.layers)]
    return [[words(pool.k_buffer[layer]), words(pool.v_buffer[layer])] for layer in range(model.layers)]


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


def _decode(cfg) -> dict:
    import torch
    from sglang.srt.disaggregation.base.conn import KVPoll
    from sglang.srt.disaggregation.utils import KVClassType, get_kv_class

    ps, pages = cfg["page_tokens"], cfg["decode_pages"]
    model = cfg["model"]
    mgr, pool, allocator, meta_alloc, counted, _, loaded = _setup(
        "decode", cfg["connector"], cfg["port"], pages, ps, model)
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
    words = _layer_words(pool, model)
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

    stream = _stream(cfg)
    progress = sc.Progress(f"stack=sglang connector={cfg['connector']} plugin={cfg['plugin']}", len(stream))
    for k, req in enumerate(stream):
        progress.tick(k)
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
        for layer in range(model.layers):
            for kv in kv_parts(model):
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
    return res


def _prefill(cfg):
    """The prefill side's figures, and its bootstrap server (kept up until the decode side
    is done)."""
    from sglang.srt.disaggregation.base.conn import KVPoll
    from sglang.srt.disaggregation.utils import KVClassType, get_kv_class
    from sglang.srt.mem_cache import allocation
    from sglang.srt.mem_cache.memory_pool import ReqToTokenPool

    ps, pages, model = cfg["page_tokens"], cfg["prefill_pages"], cfg["model"]
    mgr, pool, allocator, meta_alloc, counted, server, loaded = _setup(
        "prefill", cfg["connector"], cfg["port"], pages, ps, model)
    sender_cls = get_kv_class(_backend(cfg["connector"]), KVClassType.SENDER)
    addr = f"127.0.0.1:{cfg['port']}"
    words = _layer_words(pool, model)
    tree = NoPrefixCache(allocator, ps)
    # SGLang's request rows (req_to_token), for alloc_for_extend to write.
    rows = ReqToTokenPool(size=64, max_context_len=pages * ps, device="cpu", enable_memory_saver=False)
    live: Dict[int, tuple] = {}  # oldest first: (token slots, the request's row)
    limit = int(cfg["workload"].occupancy * pages)
    res = dict(requests=0, errors=0, xfer_ms=[], post_ms=[], engine_ms=[], posted=[], bytes=[],
               loaded=loaded)

    def used():
        return pages - allocator.available_size() // ps

    def drop_oldest():
        loc, row = live.pop(next(iter(live)))
        allocator.free(loc)
        rows.free_rows([row])

    for req in _stream(cfg):
        room = cfg["room0"] + req.index
        while live and (used() + req.blocks > limit or rows.available_size() == 0):
            drop_oldest()
        sender = sender_cls(mgr, addr, room)
        # The bootstrap queue: wait for the decode side's pages (WaitingForInput).
        state = _wait(sender.poll, KVPoll.WaitingForInput, time.monotonic() + POLL_TIMEOUT)
        if state != KVPoll.WaitingForInput:
            res["errors"] += 1
            continue
        aux = meta_alloc.alloc()
        sender.init(req.blocks, aux)
        one = Req(room, sender)
        try:  # ScheduleBatch.prepare_for_extend's allocation, SGLang's own
            loc = allocation.alloc_for_extend(Batch([one], [req.tokens(ps)], tree, rows))[0]
        except RuntimeError:  # SGLang's "Prefill out of memory": nothing left to drop
            res["errors"] += 1
            continue
        live[req.index] = (loc, one.kv.req_pool_idx)
        page_ids = (loc[::ps] // ps).numpy().astype(np.int32)
        slots = _token_slots(page_ids, ps)
        owners, tokens = sc.token_owners(req, ps), np.arange(len(slots))
        tmp = np.empty((len(slots), words[0][0].shape[1]), dtype=np.uint64)
        for layer in range(model.layers):
            for kv in kv_parts(model):
                sc.fill(tmp, owners, layer, kv, tokens)
                words[layer][kv][slots] = tmp
        before = counted.seconds, counted.posted()
        t = time.perf_counter()
        sender.send(page_ids)
        state = _wait(sender.poll, KVPoll.Success, time.monotonic() + POLL_TIMEOUT)
        xfer = (time.perf_counter() - t) * 1e3
        meta_alloc.free(aux)
        if state != KVPoll.Success:
            res["errors"] += 1
            continue
        # Batches of one request, in turn: the engine's figures since send are this one's.
        inside = (counted.seconds - before[0]) * 1e3
        post = inside if counted.asynchronous else xfer - inside
        res["xfer_ms"].append(xfer)
        res["post_ms"].append(post)
        res["engine_ms"].append(xfer - post)
        res["posted"].append(counted.posted() - before[1])
        res["bytes"].append(len(slots) * model.buffers * model.token_bytes)
        res["requests"] += 1
    import corun.sglang_plugin as plugin

    c = plugin.counters()
    res.update(descriptors=counted.descriptors, engine_calls=counted.calls,
               engine_failed=counted.failed, engine_ms_total=counted.seconds * 1e3,
               placed=c.get("placed", 0), fallback=c.get("fallback", 0),
               partial=c.get("partial", 0), place_times=plugin.place_times(),
               plugin_errors=c.get("errors", 0), group_calls=c.get("group_calls", 0),
               engine_extra=dict(counted.extra))
    return res, server


class Side:
    """One side of a way (``lab.kit``'s protocol): built with the environment SGLang reads
    for ``cfg``; ``run()`` runs the whole stream and answers its figures; ``exit()`` (after
    the decode side is done) closes the prefill side's bootstrap server."""

    def __init__(self, role: str, cfg: dict):
        os.environ["MOONCAKE_PROTOCOL"] = "tcp"
        os.environ["MC_FORCE_TCP"] = "1"
        os.environ["SGLANG_HOST_IP"] = "127.0.0.1"
        os.environ["SGLANG_MOONCAKE_MAX_TRANSFER_BATCH_INDICES"] = str(batch_indices(cfg["model"]))
        if cfg["connector"] == "nixl":
            # Each transfer's telemetry (descCount after NIXL's merge), SGLang's config untouched.
            os.environ["NIXL_TELEMETRY_ENABLE"] = "y"
            sc.alias_nixl()
        if cfg["plugin"] == "on":
            os.environ["CORUN_SGLANG"] = "all"
        else:
            os.environ.pop("CORUN_SGLANG", None)
        self.role, self.cfg, self.server = role, cfg, None

    def run(self) -> dict:
        if self.role == "decode":
            return _decode(self.cfg)
        res, self.server = _prefill(self.cfg)
        return res

    def exit(self) -> None:
        if self.server is not None:
            self.server.close()
