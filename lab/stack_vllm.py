"""Real bytes through vLLM 0.33.0's own NIXL connector (and its Mooncake connector:
``--connector mooncake``), plugin off and on.

Two OS processes on 127.0.0.1 per way, a prefill engine and a decode engine, each built
from vLLM's own parts as ``EngineCore._initialize_kv_caches`` builds them: the KV cache
layout resolved (``resolve_kv_cache_layout``, LBHNC), the KV cache config planned
(``get_kv_cache_configs``), its tensors allocated and viewed per layer
(``vllm.v1.worker.utils.allocate_kv_cache``: torch CPU tensors, 32 layers, blocks of 16
tokens x 8 heads x (K 128 | V 128) bf16, 64 KiB a layer), vLLM's ``Scheduler`` with its
``KVCacheManager`` and ``BlockPool`` (prefix caching on), the NIXL connector's
scheduler side (its side channel on 127.0.0.1 serves the handshake) and worker side
(``register_kv_caches``: one NIXL region per layer, the real ``nixl_agent`` with UCX), in
either of vLLM's modes (``--mode pull|push|both``; ``nixl/connector.py``, chosen by
``kv_connector``: ``NixlConnector`` is ``NixlPullConnector``, ``NixlPushConnector``):

- pull: the decode side pulls each request (``pull_worker.py: _read_blocks_for_req`` ->
  ``make_prepped_xfer("READ")``); the prefill side frees the blocks when NIXL's
  notification says they were read.
- push: the decode scheduler stashes a registration of the blocks it allocated
  (``push_scheduler.py: update_state_after_alloc``), its worker's ``nixl-push-writer``
  thread handshakes notif-only with the prefill side and sends it as a ``PUSH_REG``
  notification; the prefill side's writer thread matches it with the finished request's
  blocks (``request_finished`` -> ``push_finished_blocks``), handshakes with the decode
  side's side channel and writes (``push_worker.py: _xfer_blocks_for_req`` ->
  ``make_prepped_xfer("WRITE")``, the uncached tail only on a decode prefix hit); the
  decode side is done on the WRITE's notification, the prefill side frees its blocks when
  its WRITE handles are DONE. ``place`` works the same: push's ``request_finished``
  hands the decode side the prefill side's ``remote_block_ids`` too.

With the plugin on, each process sets
``CORUN_VLLM=all`` and calls ``vllm.plugins.load_general_plugins()`` before it builds
anything, as ``vllm serve`` does; every way runs in fresh processes.

The request stream is ``lab.stack_common.request_stream`` (a ``lab.workloads`` stream in
16-token blocks, a share repeating an earlier prompt's prefix): the decode side keeps
its live requests decoding and finishes the oldest to hold its pool at the workload's
occupancy, so both pools recycle and fragment. Each side writes the K and V, in every
layer, of the prompt tokens it computes (the prefill side all but its prefix hits; the
decode side the last prompt token vLLM recomputes after a pull, and whole prompts a
preempted request recomputes) with the pattern of ``lab.stack_common`` (owner, layer,
K/V, position), slot by slot; the decode side checks every byte of every block of each
request once its transfer is done (the blocks it pulled and its own prefix-cache hits).

Measured in the process that posts the transfers (pull: decode; push: prefill):
``descriptors`` are the ids vLLM hands NIXL, counted at the agent's ``make_prepped_xfer``
(vLLM 0.33 does not merge blocks: one id per region and block, ``base_worker.py:
_compute_desc_ids``); ``nixl_posted`` is what NIXL posted after its own merge of
neighbours adjacent on both sides (its telemetry's ``descCount``, read by vLLM's own
``_pop_done_transfers`` into ``NixlKVConnectorStats``). ``xfer_ms`` runs from
``_read_blocks_for_req`` (push: ``_xfer_blocks_for_req``, on the writer thread) being
called to the engine-thread poll on which NIXL says DONE for the request's last handle
(push's ``PUSH_REG`` round trip before the WRITE is not in it); ``post_ms`` is the time
inside that call (vLLM's and corun's Python, NIXL's prep and post), ``engine_ms`` the rest
(posted to done), ``posted`` NIXL's count after its merge (``nixl_posted``);
``post_share`` is ``post_ms``'s share of the whole, and ``nixl_post_share`` NIXL's own
``postDuration / xferDuration``.

Shapes (``--model``, ``--block-tokens``): full attention only (``llama3-8b``, the default,
``llama3-8b-tp8``, ``llama3-70b-tp8``; MLA's one latent a layer, vLLM's
``MLAAttentionSpec``, is not built here and is refused), blocks a multiple of 16 (16, 64,
128: the given backend's kernel block sizes). The layout is LBHNC whatever the shape: one
NIXL region a layer with K and V in it (llama3-70b-tp8: 80 regions of 8 KiB a 16-token
block), where vLLM's CUDA FlashAttention layout registers K and V apart (160 regions of
4 KiB): this run's descriptors are half as many and twice as large as that deployment's.
The pools hold 1.5 and 1.75 GiB of KV a side (quick: 512 and 640 MiB) whatever the shape.

Shims (only where vLLM needs a model or a GPU):

- ``nixl`` (``vllm/distributed/nixl_utils.py:45``, ``_get_nixl_module_name``): vLLM
  imports ``nixl._api``, the module of the ``nixl`` meta package that picks a CUDA
  build; here ``nixl-cu12`` is installed alone, so ``nixl``, ``nixl._api`` and
  ``nixl._bindings`` are bound to ``nixl_cu12``'s modules (what vLLM's own
  ``alias_nixl_for_ray`` does for ``nixl_rocm``, line 113).
- the attention backend (``nixl/base_worker.py:966``, ``get_current_attn_backends``):
  without a model vLLM falls back to the platform's backend, ``CPU_ATTN``, whose kernels
  take 32-token blocks only (``No common block size for 16``); the worker is given
  ``FlashAttentionBackend``, what a CUDA deployment of this model with 16-token blocks
  selects (it imports and runs its class methods on CPU).
- the model forward (``v1/worker/gpu_model_runner.py: execute_model``): each side
  writes the pattern into the scheduled prompt tokens' slots, and samples a fixed token; the connector calls around it are the runner's
  (``bind_connector_metadata``, ``start_load_kv``, ``wait_for_save``, ``get_finished``,
  ``clear_connector_metadata``; ``kv_connector_model_runner_mixin.py``).

A full run measures both modes (pull, then push, each plugin off and on, alternating
which goes first); ``--quick`` (CI's) pull only: push's two ways add four engine
processes, over a minute more.

``--connector mooncake`` (or ``both``): the same two processes with vLLM's
``MooncakeConnector`` (scheduler and worker sides, its bootstrap server on the prefill
side, its ZMQ side channel, the real ``TransferEngine`` over TCP), its lines
``connector=mooncake mode=pull``: the decode side sends its block ids to the prefill
side's sender, which writes the request's blocks (``batch_transfer_sync_write``, one
descriptor a group of ``group_concurrent_contiguous`` and region) and answers. Its shims,
settings and measures are ``lab.vllm_mooncake``'s; the lines add ``ttft_ms_p50`` /
``ttft_ms_p99`` (the decode side's add to first step with the prompt in: what the
plugin's wait for the prefill side's blocks costs), ``pulls_failed`` (counted as errors),
``groups`` / ``groups_vllm_rule`` (the sender's groups, corun's rule and vLLM's on the
same blocks) and ``waits`` / ``wait_ms_mean`` (``corun._vllm_mooncake``'s waits).
Results file: ``stack-e2e-vllm-mooncake.txt`` (``both``: ``stack-e2e-vllm-both.txt``).
``--place-cached`` runs the plugin with ``CORUN_VLLM_PLACE_CACHED=1`` (placement may take
blocks that hold a cached prefix; ``-cached`` on the results file, ``place_cached=1`` on
the lines).

Over NIXL ``descriptors`` is the same off and on by construction: vLLM 0.33 hands NIXL one id per
region and block whatever the blocks are, and the plugin reorders those ids without
dropping any; what placement and ordering change is how many NIXL posts after its merge
(``nixl_posted``).
"""

from __future__ import annotations

import os
from typing import List

from lab import cost_model, kit
from lab.peers import upstream
from lab import stack_common as sc
from lab.vllm_engine import BLOCK_ALIGN, SHAPES, STEP_TIMEOUT, Engine
from lab.vllm_kv import KvShape

#: NIXL's modes (``--mode``); Mooncake's one is ``mooncake`` (its lines say ``mode=pull``:
#: the decode side asks, the prefill side writes).
MODES = ("pull", "push")
#: KV bytes a side's pool holds (prefill, decode): 1.5 and 1.75 GiB (quick: 512, 640 MiB).
POOL_BYTES = {False: (3 << 29, 7 << 28), True: (1 << 29, 5 << 27)}


def pools(shape: KvShape, quick: bool):
    """(prefill, decode) blocks of ``shape``: :data:`POOL_BYTES` (768 and 896 blocks of
    llama3-8b's 2 MiB, quick 256 and 320)."""
    return tuple(b // shape.block_bytes for b in POOL_BYTES[bool(quick)])


def side(role: str, blocks: int, on: bool, mode: str, shape: KvShape, port: int) -> kit.Child:
    """One engine in its own process, on ports of its own (NIXL's side channel, or the
    prefill side's Mooncake bootstrap server; gloo's)."""
    return kit.Child(role, Engine, role, blocks, port, kit.free_port(), on, mode, shape,
                     nixl=mode != "mooncake")


def run_way(args, mode: str, plugin: str) -> sc.WayResult:
    """One way in two fresh processes: the whole request stream, moved (pulled by the
    decode side, or pushed by the prefill side; Mooncake: written by the prefill side
    when the decode side asks) and checked."""
    shape = KvShape.of(args.model, args.block_tokens)
    pre_blocks, dec_blocks = pools(shape, args.quick)
    on = plugin == "on"
    # Each side its own port (Mooncake: the prefill side's bootstrap server, which it names
    # in the decode side's parameters).
    pre = side("prefill", pre_blocks, on, mode, shape, kit.free_port())
    dec = side("decode", dec_blocks, on, mode, shape, kit.free_port())
    r = sc.WayResult(model=args.model, block_tokens=shape.block)
    wait = STEP_TIMEOUT * 3
    try:
        pre.ready()
        dec.ready()
        w = args.workload_spec
        progress = sc.Progress(f"stack=vllm mode={mode} plugin={plugin}", args.requests)
        for spec in sc.request_stream(w, args.requests, args.seed, shape.block, min(pre_blocks, dec_blocks)):
            progress.tick(r.requests)
            params = pre.call("prefill", spec, timeout=wait)
            checked, bad = dec.call("decode", spec, params, w.occupancy, timeout=wait)
            r.requests += 1
            r.bytes_checked += checked
            r.bytes_bad += bad
            r.bytes_expected += spec.blocks * shape.block_bytes
        got = {p.role: p.call("exit", timeout=wait) for p in (pre, dec)}
    finally:
        pre.close()
        dec.close()
    for figures in got.values():
        c = figures["counters"]
        r.placed += c.get("placed", 0)
        r.fallback += c.get("fallback", 0)
        r.errors += c.get("errors", 0)
        r.partial += c.get("partial", 0)
        r.placement_times(figures["place_times"])
    r.extra["ttft_ms_p50"], r.extra["ttft_ms_p99"] = sc.percentiles(got["decode"]["ttft_ms"])
    if mode == "mooncake":
        _mooncake_figures(r, got["decode"]["timing"], got["prefill"]["timing"])
        pc, dc = got["prefill"]["counters"], got["decode"]["counters"]
        # The sender's grouping (corun's, when on): groups under vLLM's rule and its own;
        # the decode side's waits for the prefill side's blocks (corun._vllm_mooncake).
        r.extra.update(groups_vllm_rule=pc.get("mooncake_before", 0), groups=pc.get("mooncake_after", 0),
                       waits=dc.get("mooncake_waits", 0),
                       wait_ms_mean=dc.get("mooncake_wait_us", 0) / 1e3 / max(1, dc.get("mooncake_waits", 0)))
    else:
        _nixl_figures(r, got["prefill" if mode == "push" else "decode"]["timing"])
    xfer_total = sum(r.xfer_ms)
    r.extra.update(post_share=sum(r.post_ms) / xfer_total if xfer_total else float("nan"),
                   workload=w.name, seed=args.seed, place_cached=int(getattr(args, "place_cached", False)))
    return r


def _nixl_figures(r: sc.WayResult, t) -> None:
    """The posting side's timing (``lab.vllm_nixl_timing.Timing``) into ``r``."""
    r.descriptors = t["handed"]
    r.xfer_ms, r.post_ms, r.engine_ms = t["xfer_ms"], t["post_ms"], t["engine_ms"]
    r.posted = t["nixl_posted"]
    # Per request, NIXL's own figures (for lab.cost_model's fit), where its telemetry
    # gave every request's.
    if all(t["per_posted"]) and len(t["per_posted"]) == len(r.xfer_ms):
        r.per_posted, r.per_bytes = t["per_posted"], t["per_bytes"]
    r.extra.update(
        nixl_posted=t["nixl_posted"],
        nixl_post_share=(t["nixl_post_s"] / t["nixl_xfer_s"]) if t["nixl_xfer_s"] else float("nan"))


def _mooncake_figures(r: sc.WayResult, dec, pre) -> None:
    """The decode side's pulls and the prefill side's writes (``lab.vllm_mooncake.Timing``)
    into ``r``, per request: ``descriptors`` and ``posted`` are the slices vLLM handed
    ``batch_transfer_sync_write`` (Mooncake merges none)."""
    rids = [rid for rid in dec["start"] if rid in dec["done"]]
    r.xfer_ms = [(dec["done"][rid] - dec["start"][rid]) * 1e3 for rid in rids]
    sent = [pre["sent"].get(rid, [0.0, 0, 0]) for rid in rids]
    r.engine_ms = [s[0] * 1e3 for s in sent]
    r.post_ms = [x - e for x, e in zip(r.xfer_ms, r.engine_ms)]
    r.per_posted = [int(s[1]) for s in sent]
    r.per_bytes = [int(s[2]) for s in sent]
    r.descriptors = r.posted = sum(r.per_posted)
    # Pulls Mooncake failed (vLLM recomputed their prompts): a line with any misses the
    # contract, as an error does.
    r.extra["pulls_failed"] = len(dec["failed"])
    r.errors += len(dec["failed"])


def run_modes(args) -> List[str]:
    """The engine modes a run measures: NIXL's ``--mode``'s, else both (``--quick``: pull
    alone, CI's time); then Mooncake's when ``--connector`` names it."""
    modes: List[str] = []
    connector = getattr(args, "connector", "nixl")
    if connector in ("nixl", "both"):
        if args.mode is None:
            modes += ["pull"] if args.quick else list(MODES)
        else:
            modes += list(MODES) if args.mode == "both" else [args.mode]
    if connector in ("mooncake", "both"):
        modes.append("mooncake")
    return modes


def main(argv=None) -> int:
    """Runs both ways of each mode asked for and prints their lines; returns 0 when every
    line has bytes_bad=0, errors=0 and bytes_checked equal to the requests' KV size."""
    ap = sc.parser(__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=["pull", "push", "both"], default=None,
                    help="NIXL pull mode (NixlConnector: the decode side READs), push mode "
                         "(NixlPushConnector: the prefill side WRITEs) or both (default: both; "
                         "--quick: pull)")
    ap.add_argument("--connector", choices=["nixl", "mooncake", "both"], default="nixl",
                    help="vLLM's NIXL connector (default), its Mooncake connector "
                         "(MooncakeConnector, Mooncake's TransferEngine over TCP) or both")
    ap.add_argument("--place-cached", action="store_true",
                    help="the plugin's placement may take blocks holding a cached prefix "
                         "(CORUN_VLLM_PLACE_CACHED=1; default: prefix-cache hits never fewer)")
    args = sc.parse(ap, argv)
    os.environ.pop("CORUN_VLLM_PLACE_CACHED", None)
    if args.place_cached:  # read by the plugin's enable() in each engine process
        os.environ["CORUN_VLLM_PLACE_CACHED"] = "1"
    if args.model not in SHAPES:
        ap.error(f"--model {args.model}: the vLLM stack run builds full attention ({', '.join(SHAPES)}); "
                 "MLA's one latent a layer (vLLM's MLAAttentionSpec) is not built here")
    if args.block_tokens % BLOCK_ALIGN:
        ap.error(f"--block-tokens must be a multiple of {BLOCK_ALIGN} (FlashAttention's kernel "
                 f"block sizes), got {args.block_tokens}")
    upstream.require("stack_e2e.py --stack vllm", ["torch", "vllm"]
                     + (["nixl"] if args.connector != "mooncake" else [])
                     + (["mooncake"] if args.connector != "nixl" else []))
    modes = run_modes(args)
    name = "stack-e2e-vllm" + ("" if args.connector == "nixl" else f"-{args.connector}")
    sc.tee_results(name + ("-cached" if args.place_cached else "") + ".txt", args)
    shape = KvShape.of(args.model, args.block_tokens)
    pre_blocks, dec_blocks = pools(shape, args.quick)
    print(f"vLLM 0.33.0 {args.connector} connector, two processes on 127.0.0.1; {args.model}: {shape.layers} "
          f"layers, blocks of {shape.block} tokens x {shape.heads} heads x {shape.head} x 2 B (K and V); "
          f"pools of {pre_blocks} prefill and {dec_blocks} decode blocks; workload {args.workload}, "
          f"{args.requests} requests, seed {args.seed}; mode {', '.join(modes)}", flush=True)
    got = sc.alternate(lambda mode, plugin: run_way(args, mode, plugin), modes)
    for connector in ("nixl", "mooncake"):
        part = {k: r for k, r in got.items() if (k[0] == "mooncake") == (connector == "mooncake")}
        if not part:
            continue
        lines = {("pull" if m == "mooncake" else m, p): r for (m, p), r in part.items()}
        sc.report("vllm", connector, lines)
        print(cost_model.model_line("vllm", connector, part.values()))
        for (mode, plugin), r in lines.items():
            print(cost_model.projection_line("vllm", connector, plugin, r) + f" mode={mode}")
    # stack_e2e.py exits with this: 1 when a line misses its contract (as lab.stack_sglang).
    ok = all(r.bytes_bad == 0 and r.errors == 0 and r.bytes_checked == r.bytes_expected
             for r in got.values())
    return 0 if ok else 1

