"""One side of ``lab.stack_vllm``'s runs, in its own process: vLLM 0.33.0's scheduler and
NIXL connector (scheduler and worker sides) over host KV caches (:class:`Engine`, served
by ``lab.kit.Child``), the KV pattern written into and checked in its blocks, and
its NIXL timing (``lab.vllm_nixl_timing``: when each transfer started and ended, from the
worker's own calls). The shims and what is measured are in ``lab.stack_vllm``'s module docs."""

from __future__ import annotations

import os
import time
from collections import deque
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

from lab import stack_common as sc
from lab import vllm_mooncake
from lab.vllm_nixl_timing import Timing
from lab.vllm_kv import KvShape, check_blocks, write_tokens

#: The model shapes this engine builds (``lab.stack_common.MODELS``): vLLM's full
#: attention, K and V of ``kv_heads`` x ``head_dim`` (MLA's one latent is not built here).
SHAPES = ("llama3-8b", "llama3-8b-tp8", "llama3-70b-tp8")
#: ``--block-tokens`` must be a multiple of this: the kernel block sizes of the attention
#: backend the worker is given (FlashAttention's; see ``lab.stack_vllm``'s shims).
BLOCK_ALIGN = 16
MODEL = "Qwen/Qwen3-0.6B"  # its config, with layers and KV heads set by hf_overrides
STEP_TIMEOUT = 120.0  # seconds a request may take before the run is an error
ROOT = Path(__file__).resolve().parents[1]  # the checkout
#: vLLM's connector for each mode: NIXL's two (``nixl/connector.py``: ``NixlConnector`` is
#: the pull connector's old name) and Mooncake's (``lab.vllm_mooncake``).
CONNECTORS = {"pull": "NixlConnector", "push": "NixlPushConnector",
              "mooncake": vllm_mooncake.CONNECTOR}


class Engine:
    """vLLM's scheduler and its NIXL or Mooncake connector (both sides) over host KV
    caches. ``side_port``: NIXL's side channel, or Mooncake's bootstrap server (the
    prefill side's)."""

    def __init__(self, role: str, blocks: int, side_port: int, dist_port: int, plugin: bool,
                 mode: str = "pull", shape: KvShape = KvShape.of("llama3-8b", 16)):
        os.environ.update(VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                          VLLM_NIXL_SIDE_CHANNEL_HOST="127.0.0.1",
                          VLLM_NIXL_SIDE_CHANNEL_PORT=str(side_port),
                          UCX_RCACHE_MAX_UNRELEASED="1024")
        home = ROOT / "target" / "vllm-hf"
        os.environ["HF_HOME"] = str(home)
        self.mooncake = mode == "mooncake"
        if self.mooncake:
            vllm_mooncake.environment(role, side_port)
        os.environ.pop("CORUN_VLLM", None)
        if plugin:
            os.environ["CORUN_VLLM"] = "all"
        from lab.peers import vllm_suite

        vllm_suite.write_hf_cache(home)
        # Shim: the `nixl` meta package's names (see the module docs).
        sc.alias_nixl()
        import torch
        import vllm.plugins
        from vllm.config import (CacheConfig, DeviceConfig, KVTransferConfig, ModelConfig,
                                 SchedulerConfig, VllmConfig, set_current_vllm_config)

        # As `vllm serve` does in every process, before anything is built.
        vllm.plugins.load_general_plugins()
        from corun import vllm_plugin

        self.plugin = vllm_plugin
        self.shape = shape
        block, layers, heads, head = shape.block, shape.layers, shape.heads, shape.head
        self.role = role
        producer = role == "prefill"
        max_len = blocks // 2 * block  # a request is at most a quarter of the pool
        model = ModelConfig(model=MODEL, dtype="bfloat16", seed=0, max_model_len=max_len,
                            hf_overrides={"num_hidden_layers": layers,
                                          "num_key_value_heads": heads})
        cfg = VllmConfig(
            model_config=model,
            cache_config=CacheConfig(block_size=block, enable_prefix_caching=True),
            scheduler_config=SchedulerConfig(max_num_seqs=256, max_num_batched_tokens=max_len,
                                             max_model_len=max_len, is_encoder_decoder=False),
            kv_transfer_config=KVTransferConfig(
                kv_connector=CONNECTORS[mode],
                kv_role="kv_producer" if producer else "kv_consumer",
                engine_id=f"{role}-engine",
                kv_connector_extra_config=dict(vllm_mooncake.EXTRA_CONFIG) if self.mooncake else {}),
            device_config=DeviceConfig("cpu"))
        # vLLM's workers and scheduler read the config from this context while built; it
        # stays set for the process's life (kept referenced: its exit clears it).
        self._ctx = set_current_vllm_config(cfg)
        self._ctx.__enter__()
        from vllm.distributed import init_distributed_environment, initialize_model_parallel

        init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                     distributed_init_method=f"tcp://127.0.0.1:{dist_port}")
        initialize_model_parallel(1, 1)

        from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
        from vllm.v1.core import kv_cache_planning as plan
        from vllm.v1.core.kv_cache_utils import (generate_scheduler_kv_cache_config,
                                                 get_request_block_hasher, init_none_hash)
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import FullAttentionSpec
        from vllm.v1.structured_output import StructuredOutputManager
        from vllm.v1.worker.utils import allocate_kv_cache
        from vllm.utils.hashing import get_hash_fn_by_name

        spec = FullAttentionSpec(block_size=block, num_kv_heads=heads, head_size=head,
                                 dtype=torch.bfloat16)
        self.names = [f"model.layers.{i}.self_attn.attn" for i in range(layers)]
        specs = {n: spec for n in self.names}
        # EngineCore._initialize_kv_caches, for one worker with this much KV memory.
        layout = resolve_kv_cache_layout(cfg, [["LBHNC"]], list(specs.values()))
        groups = plan.get_global_kv_cache_groups(cfg, [specs])
        kcc = plan.get_kv_cache_configs(cfg, [specs], [spec.page_size_bytes * layers * blocks], groups)
        for k in kcc:
            k.kv_cache_layout = cfg.cache_config.kv_cache_layout
        sched_kcc = generate_scheduler_kv_cache_config(kcc)
        cfg.cache_config.num_gpu_blocks = sched_kcc.num_blocks
        self.sched = Scheduler(vllm_config=cfg, kv_cache_config=sched_kcc,
                               structured_output_manager=StructuredOutputManager(cfg),
                               block_size=block, hash_block_size=block)
        hash_fn = get_hash_fn_by_name(cfg.cache_config.prefix_caching_hash_algo)
        init_none_hash(hash_fn)
        self.hasher = get_request_block_hasher(block, hash_fn)

        from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
        from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
        from vllm.distributed.kv_transfer.kv_connector.v1.nixl import base_worker
        from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

        # Shim: the backend a CUDA deployment selects (see the module docs).
        base_worker.get_current_attn_backends = lambda *a, **k: [FlashAttentionBackend]
        if self.mooncake:
            vllm_mooncake.shim()
        self.conn = KVConnectorFactory.create_connector(cfg, KVConnectorRole.WORKER, kcc[0])
        self.caches = allocate_kv_cache(kcc[0], torch.device("cpu"), layout, kernel_block_sizes=[block])
        self.conn.register_kv_caches(self.caches)
        if not self.mooncake:
            # EngineCore._set_kv_connector_handshake_metadata: the scheduler side's side
            # channel serves the worker's agent metadata.
            self.sched.get_kv_connector().set_xfer_handshake_metadata_pp_aware(
                {(0, 0): self.conn.get_handshake_metadata()})
        # uint64 views of each layer's [B, H, N, C] cache: C is K's 128 then V's 128 bf16.
        self.words = [self.caches[n].view(torch.int16).numpy().view(np.uint64) for n in self.names]
        self.worker = self.conn.connector_worker
        self.received: set = set()  # requests whose pull NIXL reported done
        # The side that posts the transfers measures them: pull mode's reader (decode),
        # push mode's writer (prefill).
        if self.mooncake:
            self.timing = vllm_mooncake.Timing(self.worker, role)
        else:
            self.timing = Timing(self.worker, mode) if producer == (mode == "push") else None
        self.side_port = side_port
        self.finished: set = set()  # prefill side: requests whose one token is out
        self.ttft_ms: List[float] = []
        self.params: Dict[str, Any] = {}
        self.owners: Dict[str, np.ndarray] = {}
        self.live: deque = deque()

    # -- the engine step (the model runner's connector calls around a shimmed forward) --

    def step(self):
        from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput

        out = self.sched.schedule()
        meta = out.kv_connector_metadata
        if meta is not None:
            self.conn.bind_connector_metadata(meta)
            self.conn.start_load_kv(None)
        self.forward(out)
        if meta is not None:
            self.conn.wait_for_save()
        sending, recving = self.conn.get_finished(set(out.finished_req_ids))
        if meta is not None:
            self.conn.clear_connector_metadata()
        ids = list(out.num_scheduled_tokens)
        stats = self.conn.get_kv_connector_stats()
        if stats is not None and self.timing is not None:
            self.timing.add_stats(stats)
        mro = ModelRunnerOutput(
            req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
            sampled_token_ids=[[7] for _ in ids],
            kv_connector_output=KVConnectorOutput(
                finished_sending=sending or None, finished_recving=recving or None,
                # As the model runner reports them (kv_connector_model_runner_mixin.py):
                # vLLM recomputes the blocks of a failed load.
                invalid_block_ids=self.conn.get_block_ids_with_load_errors()))
        outputs = self.sched.update_from_output(out, mro)
        for eco in outputs.values():
            for o in eco.outputs:
                if o.kv_transfer_params is not None:
                    self.params[o.request_id] = o.kv_transfer_params
                if o.finish_reason is not None:
                    self.finished.add(o.request_id)
        self.received |= recving or set()

    def forward(self, out):
        """The shimmed forward: the pattern into the slots of the prompt tokens scheduled
        this step, on either side, as a model writes their KV (the prefill side's
        prompts; on the decode side the prompt a preempted request recomputes, and the
        prompt's last token, which vLLM computes locally after a pull; whole blocks:
        prompts are block-aligned and prefix hits are whole blocks)."""
        for rid, n in out.num_scheduled_tokens.items():
            req = self.sched.requests[rid]
            owners = self.owners.get(rid)
            # schedule() has already counted this step's tokens as computed
            # (Scheduler._update_after_schedule).
            start = req.num_computed_tokens - n
            if owners is None or start >= len(owners) * self.shape.block:
                continue  # a decode token: no KV the transfer carries
            blocks = self.sched.kv_cache_manager.get_block_ids(rid)[0]
            write_tokens(self.words, self.shape, blocks, owners, start, min(start + n, len(owners) * self.shape.block))

    # -- commands --

    def add(self, spec: sc.StreamRequest, params: Dict[str, Any], max_tokens: int):
        from vllm.sampling_params import SamplingParams
        from vllm.v1.request import Request

        rid = f"req-{spec.index}"
        sp = SamplingParams(max_tokens=max_tokens, ignore_eos=True,
                            extra_args={"kv_transfer_params": params})
        req = Request(request_id=rid, prompt_token_ids=sc.prompt_token_ids(spec, self.shape.block),
                      sampling_params=sp, pooling_params=None, block_hasher=self.hasher)
        self.owners[rid] = np.asarray(spec.owners, dtype=np.uint64)
        self.sched.add_request(req)
        return rid

    def prefill(self, spec: sc.StreamRequest):
        """Prefills one request (one output token: it finishes, its blocks held for the
        pull); returns its kv_transfer_params for the decode side."""
        params = {"do_remote_decode": True}
        if self.mooncake:  # vLLM's Mooncake proxy gives both sides one transfer id
            params["transfer_id"] = vllm_mooncake.transfer_id(spec.index)
        rid = self.add(spec, params, max_tokens=1)
        deadline = time.monotonic() + STEP_TIMEOUT
        # NIXL answers the decode side's parameters; Mooncake's request_finished none.
        while rid not in (self.finished if self.mooncake else self.params):
            if time.monotonic() > deadline:
                raise TimeoutError(f"prefill of {rid} not done after {STEP_TIMEOUT:.0f} s")
            self.step()
        self.owners.pop(rid, None)
        if self.mooncake:
            self.finished.discard(rid)
            self.step()  # its blocks to the worker's sender (record_send_reqs): ready to send
            return vllm_mooncake.decode_params(spec.index, self.side_port)
        return self.params.pop(rid)

    def decode(self, spec: sc.StreamRequest, params: Dict[str, Any], occupancy: float):
        """Adds one remote-prefill request and steps until its KV has arrived and its
        prompt is computed; checks every block of its prompt. Returns (bytes checked,
        bytes bad)."""
        pool = self.sched.kv_cache_manager.block_pool
        total = pool.num_gpu_blocks - 1
        # Hold the pool at the workload's occupancy: the oldest live requests finish.
        while self.live and pool.get_num_free_blocks() - spec.blocks < (1 - occupancy) * total:
            self.finish(self.live.popleft())
        t0 = time.perf_counter()
        rid = self.add(spec, dict(params, do_remote_prefill=True), max_tokens=1_000_000)
        req = self.sched.requests[rid]
        deadline = time.monotonic() + STEP_TIMEOUT
        # The scheduler counts the pulled tokens as computed when it allocates them; the
        # bytes are there once the worker reported the pull done and the request runs.
        while rid not in self.received or req.num_computed_tokens < spec.tokens(self.shape.block):
            if time.monotonic() > deadline:
                raise TimeoutError(f"decode of {rid} not done after {STEP_TIMEOUT:.0f} s "
                                   f"(status {req.status})")
            if req.is_finished():
                # vLLM failed it (a failed load: kv_load_failure_policy "fail"): nothing
                # checked, the run goes on; the line misses its byte contract.
                self.received.discard(rid)
                self.owners.pop(rid, None)
                return 0, 0
            self.step()
        self.ttft_ms.append((time.perf_counter() - t0) * 1e3)
        self.received.discard(rid)
        self.live.append(rid)
        blocks = self.sched.kv_cache_manager.get_block_ids(rid)[0][:spec.blocks]
        return check_blocks(self.words, self.shape, blocks, self.owners[rid])

    def drain(self):
        """Steps until every transfer this side posted was seen DONE (push: the prefill
        side polls its WRITE handles after the decode side's notification arrived)."""
        deadline = time.monotonic() + STEP_TIMEOUT
        while self.timing is not None and self.timing.pending() and time.monotonic() < deadline:
            self.step()
            time.sleep(0.001)

    # -- the kit's protocol (lab.kit): stepped between commands, its figures at exit --

    def idle(self):
        """A step between commands: the connector's notifications are served (the prefill
        side frees the blocks a reader is done with), requests decode."""
        self.step()

    def exit(self):
        """Drains, then this side's plugin counters, placement times and timing."""
        self.drain()
        return dict(counters=self.plugin.counters(), place_times=self.plugin.place_times(),
                    timing=self.timing.summary() if self.timing else None, ttft_ms=self.ttft_ms)

    def finish(self, rid):
        from vllm.v1.request import RequestStatus

        self.sched.finish_requests([rid], RequestStatus.FINISHED_ABORTED)
        self.owners.pop(rid, None)
