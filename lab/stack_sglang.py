"""Real KV bytes through SGLang 0.5.23's own Mooncake and NIXL backends, corun's plugin off
and on.

``python lab/stack_e2e.py --stack sglang [--connector mooncake|nixl|both] [--model NAME
--block-tokens N --requests N --seed S --workload NAME --quick]`` (or ``python -m
lab.stack_sglang`` from the root; the connector is ``mooncake`` unless named; the model
``llama3-8b-tp8``, pages the workload's 16 tokens unless ``--block-tokens`` says: 1 is
SGLang's default page size). Each way (plugin off, plugin on; see
``lab.stack_common.alternate``) of each connector starts two fresh OS processes on 127.0.0.1
(described for Mooncake; NIXL's differences below):

- **decode**: SGLang's ``MooncakeKVManager`` (DECODE) and a ``MooncakeKVReceiver`` a
  request, its KV pool SGLang's ``MHATokenToKVPool`` on the CPU (host memory;
  ``MLATokenToKVPool`` for ``deepseek-v3-mla``, the manager told ``is_mla_backend``),
  pages from SGLang's ``PagedTokenToKVPoolAllocator`` (``TokenToKVPoolAllocator`` with
  1-token pages; ``need_sort`` as in P/D mode), as ``kv_cache_configurator`` picks them. As SGLang's
  ``DecodePreallocQueue`` does, it allocates first and sends its page indices
  (``send_metadata``); once the request is ``Success`` it checks every byte of every page.
- **prefill**: SGLang's ``MooncakeKVManager`` (PREFILL), ``MooncakeKVBootstrapServer`` and a
  ``MooncakeKVSender`` a request; it allocates through SGLang's own ``alloc_for_extend``
  (``ScheduleBatch.prepare_for_extend``'s; into a real ``ReqToTokenPool``) ->
  ``alloc_paged_token_slots_extend`` -> ``alloc_extend`` (1-token pages:
  ``alloc_token_slots`` -> ``TokenToKVPoolAllocator.alloc``) with the decode side's pages known
  (``kv_mgr.transfer_infos[room]``, where corun's placement reads them), fills the pages with
  ``lab.stack_common``'s (request, layer, token) pattern and sends them (``sender.send``).

Both sides register their pools through ``KVArgs`` as ``prefill.py``'s ``_init_kv_manager``
does (``get_kv_transfer_buf_infos``: K of every layer, then V, item length one page) and
move bytes with the real Mooncake Transfer Engine over TCP, initialised by SGLang's own
``init_mooncake_transfer_engine`` (``MOONCAKE_PROTOCOL=tcp``). corun is loaded in each
process by SGLang's ``sglang.srt.plugins.load_plugins()`` with ``CORUN_SGLANG=all`` (way
``on``) or without it (way ``off``). ``descriptors`` are counted at the engine object's
``batch_transfer_sync*`` methods SGLang calls (wrapped: the real engine still moves the
bytes); ``xfer_ms`` is a request's ``send`` to its ``Success`` on the prefill side. Each
request is sent alone and waited for, so the engine's figures between its ``send`` and
its ``Success`` are its own: ``posted`` is what the engine took (Mooncake merges nothing),
``engine_ms`` the time inside its synchronous calls (the post and the wait together) and
``post_ms`` the rest of ``xfer_ms`` (SGLang's and corun's Python, its queues and polls).
The pools hold 1.0 and 1.5 GiB of KV whatever the model (quick: 128 and 192 MiB), and
SGLang's bound on indices a Mooncake batch is 2,048 over the model's buffers (32 for 64:
the TCP transport refuses a batch of 4,096 slices): with 1-token pages a batch is at most
that many tokens, so one descriptor a buffer covers at most that many.

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
  ``disagg_kv_sender``, ``disagg_decode_prefix_len``, the lengths, ``kv``'s row, the
  pools ``alloc_for_extend`` reads) stand for ``ScheduleBatch`` /
  ``Req`` of ``managers/schedule_batch.py`` (``prepare_for_extend`` ->
  ``alloc_for_extend``, ``mem_cache/allocation.py``), which carry a model's tokens and
  sampling state; only those attributes are read on this path.
- The tree cache: ``_NoPrefixCache`` (``supports_prefix_sharing() -> False``) for
  ``ChunkCache``/``RadixCache`` (``mem_cache/``) in ``alloc_for_extend``: no prefix
  cache, every request prefills (and sends) all of its tokens.
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
buffers either way. ``post_ms`` is the time inside those agent calls and ``transfer``
(NIXL's prep and post: it posts asynchronously), ``engine_ms`` the rest of ``xfer_ms``
(posted to done), ``posted`` NIXL's count after its merge. Two more shims for NIXL:

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
import sys

from lab import cost_model, kit
from lab.peers import upstream
from lab import stack_common as sc
from lab.sglang_sides import (CONNECTORS, MODE, MODEL, POLL_TIMEOUT, STACK, START_TIMEOUT, Side,
                              _stream, pool_pages)


def run_way(args, connector: str, plugin: str) -> sc.WayResult:
    """One way of ``connector``: fresh prefill and decode processes, their figures combined."""
    ps, model = args.block_tokens, args.model_spec
    prefill_pages, decode_pages = pool_pages(model, ps, args.quick)
    cfg = dict(connector=connector, plugin=plugin, port=kit.free_port(), workload=args.workload_spec,
               requests=args.requests, seed=args.seed, page_tokens=ps, model=model,
               prefill_pages=prefill_pages, decode_pages=decode_pages, room0=1_000)
    r = sc.WayResult(model=model.name, block_tokens=ps)
    per_token = model.buffers * model.token_bytes
    r.bytes_expected = sum(q.tokens(ps) * per_token for q in _stream(cfg))
    sides = {role: kit.Child(role, Side, role, cfg, nixl=connector == "nixl")
             for role in ("prefill", "decode")}
    try:
        # Both run at once (their imports take most of a way's time); the decode side
        # waits for the prefill side's bootstrap server as SGLang's does.
        for s in sides.values():
            s.ready(START_TIMEOUT)
            s.send("run")
        budget = START_TIMEOUT + POLL_TIMEOUT * args.requests
        dec = sides["decode"].answer(budget)
        pre = sides["prefill"].answer(budget)
        for s in sides.values():
            s.call("exit")
    except kit.SideError as e:
        print(f"stack_sglang: connector={connector} plugin={plugin}: {e}", file=sys.stderr)
        r.errors += 1
        return r
    finally:
        for s in sides.values():
            s.close()
    r.requests = min(dec["requests"], pre["requests"])
    r.bytes_checked, r.bytes_bad = dec["bytes_checked"], dec["bytes_bad"]
    r.descriptors, r.xfer_ms = pre["descriptors"], pre["xfer_ms"]
    r.post_ms, r.engine_ms = pre["post_ms"], pre["engine_ms"]
    r.per_posted, r.per_bytes = pre["posted"], pre["bytes"]
    r.posted = sum(pre["posted"])
    r.placed, r.fallback, r.partial = pre["placed"], pre["fallback"], pre["partial"]
    r.placement_times(pre["place_times"])
    r.errors = (dec["errors"] + pre["errors"] + dec["engine_failed"] + pre["engine_failed"]
                + pre["plugin_errors"])
    r.extra.update(workload=args.workload, layers=model.layers,
                   engine_calls=pre["engine_calls"], engine_ms_total=round(pre["engine_ms_total"], 1),
                   group_calls=pre["group_calls"], loaded=pre["loaded"], **pre["engine_extra"])
    return r


def _line(connector: str, plugin: str, r: sc.WayResult) -> str:
    # The line has no mode= field: stack_common's formatter writes one, dropped here.
    return sc.stack_line(STACK, connector, None, plugin, r)


def results_name(connector: str) -> str:
    """The results file of a full run: Mooncake's keeps the name it had before NIXL."""
    if connector == "mooncake":
        return "stack-e2e-sglang.txt"
    return f"stack-e2e-sglang-{connector}.txt"


def _parser() -> argparse.ArgumentParser:
    ap = sc.parser(__doc__.splitlines()[0], model=MODEL)
    ap.add_argument("--connector", choices=CONNECTORS + ("both",), default=CONNECTORS[0],
                    help=f"SGLang's transfer backend (default {CONNECTORS[0]}; both: each in turn)")
    return ap


def main(args=None) -> int:
    """Runs both ways of each connector asked for, prints one line each; returns 0 when
    every target is met (1 when a line has bytes_bad, errors or bytes_checked off the
    requests' KV size). A package the run needs and this Python lacks ends it first, with
    a message naming it and its ``pip install`` (``upstream.require``).
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
        print(cost_model.model_line(STACK, connector, got.values()))
        for plugin in sc.WAYS:
            print(cost_model.projection_line(STACK, connector, plugin, got[(MODE, plugin)]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
