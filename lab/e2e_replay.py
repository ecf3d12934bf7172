"""``e2e.py --replay``: requests replayed through the real allocators (``lab.replay``:
vLLM 0.33's free queue, SGLang's paged allocator) moved through one engine in the ways of
issues 22 and 23 side by side, each request verified; on NIXL, vLLM's requests also the
way vLLM 0.33's NIXL connector posts them (``vllm_ids``) and in corun's order
(``ordered_ids``). The lines are described in ``lab.e2e``'s module docs."""

import numpy as np

import corun
from corun.vllm_plugin import nixl_order
from lab import replay as rp
from lab import workloads
from lab.e2e_engines import BUFFERS, Session, post_sampled, timed, total


def vllm_desc_ids(blocks, regions, num_blocks):
    """vLLM 0.33's prepped-descriptor ids for ``blocks``: one descriptor per region and
    block, region-major, ``region * num_blocks + block`` (``NixlBaseConnectorWorker.
    _compute_desc_ids`` in ``kv_connector/v1/nixl/base_worker.py``, its all-attention path
    with one KV-cache group: ``region_offsets[:, None] + block_arr`` raveled, where the
    offsets are the cumulative block counts of the regions and ``block_arr`` is int32)."""
    region_offsets = np.cumsum([0] + [num_blocks] * (regions - 1))
    return (region_offsets[:, None] + np.asarray(blocks, dtype=np.int32)[None, :]).ravel()


def merge_order(src, dst):
    """The pairs ``(src[i], dst[i])`` reordered so that NIXL's merge covers the runs that
    descend on both sides: NIXL merges two descriptors only when local and remote are each
    adjacent *in the order listed*, so every either-direction run that descends is listed
    ascending on both sides. The set of pairs is unchanged. The vLLM plugin's own
    ``nixl_order`` (what its ``nixl_order`` feature posts), so e2e measures that."""
    return nixl_order(np.asarray(src), np.asarray(dst))


def vllm_nixl_ways(s, lists, report):
    """vLLM's requests posted through NIXL the way vLLM 0.33's connector posts them
    (``vllm_ids``: prepped descriptors, ids by ``vllm_desc_ids`` in vLLM's order,
    ``make_prepped_xfer``) and with the same ids in ``merge_order`` (``ordered_ids``),
    request by request side by side (which goes first alternates), each verified. Returns
    ``{way: (ids per buffer, seconds, descriptors NIXL posted per buffer)}``."""
    pages = s.pool.pages
    out = {"vllm_ids": [0, 0.0, 0], "ordered_ids": [0, 0.0, 0]}

    def vllm_way(src, dst, p):
        li, ri = timed(p, "descriptors", lambda: (
            vllm_desc_ids(src, BUFFERS, pages), vllm_desc_ids(dst, BUFFERS, pages)))
        return len(li), s.engine.prepped_xfer(li, ri, "vllm_ids way", p)

    def ordered_way(src, dst, p):
        src, dst = timed(p, "grouping", lambda: merge_order(src, dst))
        return vllm_way(src, dst, p)

    ways = {"vllm_ids": vllm_way, "ordered_ids": ordered_way}
    for k, (src, dst) in enumerate(lists):
        src, dst = src.astype(np.int64), dst.astype(np.int64)
        s.check_pages(src, dst)
        for name in (list(ways) if k % 2 == 0 else list(ways)[::-1]):
            p = {}
            ids, merged = ways[name](src, dst, p)
            s.check(src, dst)
            row = out[name]
            row[0] += ids // BUFFERS
            row[1] += total(p)
            row[2] += merged
    for name, (ids, seconds, merged) in out.items():
        report(f"| nixl | vllm | {len(lists)} | {name} ({merged / BUFFERS:.0f} after NIXL's merge) "
               f"| {ids:,} | {seconds * 1e3:.1f} |")
    return {name: (ids, seconds, merged / BUFFERS) for name, (ids, seconds, merged) in out.items()}

# The replay's pools for the end-to-end run (a pool of 3,000 pages of 256 B in 128 buffers
# is 98 MB a side), and its workload: 16-token pages at 80% occupancy, no decode growth.
REPLAY_POOLS = (2000, 3000)
REPLAY_WAYS = ("asc", "either", "orderfree", "placed")
REPLAY_WARM = 300


def replayed(engine_name, allocator, requests, page_bytes, limit, report):
    """Requests replayed through the real allocators (``replay.py``) moved through one
    engine, every way side by side, each request verified by the decode side: ``asc`` and
    ``either`` (the allocator's own pages, ascending or either-direction runs),
    ``orderfree`` (sorted by destination first) and ``placed`` (the second side's pages
    placed against the first side's, ``corun.adapters``). Returns ``{way: (descriptors per
    buffer, seconds)}`` over all requests."""

    w = workloads.by_name("p16-occ80-g0")
    # The requests after REPLAY_WARM others, when the pools have turned over.
    own = rp.replay(allocator, w, REPLAY_WARM + requests, *REPLAY_POOLS).lists[-requests:]
    placed = rp.replay(allocator, w, REPLAY_WARM + requests, *REPLAY_POOLS, window=None).lists[-requests:]
    s = Session(engine_name, max(REPLAY_POOLS) + 1, page_bytes)
    out = {}
    try:
        if engine_name == "nixl" and s.engine.prepped is None:
            s.engine.prep(s.remote_base, s.pool)
        form = "nixl" if engine_name == "nixl" else "lists"

        def post(d, p, what):
            """Posts descriptors `d` in the engine's form; returns the buffers sent."""
            if engine_name != "nixl":
                return post_sampled(s, d, p, limit)
            timed(p, "transfer", lambda: s.engine.xfer(*d, what))
            return BUFFERS

        # Warm up the connection with the first request, unmeasured.
        src, dst = (a.astype(np.int64) for a in own[0])
        post(corun.transfer_descriptors(src, dst, s.src_bases, s.dst_bases, s.item_lens, form=form),
             {}, "warm-up")
        s.check(src, dst)
        for way in REPLAY_WAYS:
            lists = placed if way == "placed" else own
            direction = "ascending" if way == "asc" else "either"
            count, seconds = 0, 0.0
            for src, dst in lists:
                src, dst = src.astype(np.int64), dst.astype(np.int64)
                s.check_pages(src, dst)
                p = {}
                if way == "orderfree":
                    src, dst = timed(p, "grouping", lambda: corun.sort_by_destination(src, dst))
                d = timed(p, "descriptors", lambda: corun.transfer_descriptors(
                    src, dst, s.src_bases, s.dst_bases, s.item_lens, form=form, direction=direction))
                s.check(src, dst, post(d, p, f"{way} way"))
                count += len(d[0]) // BUFFERS
                seconds += total(p)
            out[way] = (count, seconds)
            report(f"| {engine_name} | {allocator} | {len(lists)} | {way} | {count:,} | {seconds * 1e3:.1f} |")
        if engine_name == "nixl" and allocator == "vllm":
            out.update(vllm_nixl_ways(s, own, report))
    finally:
        s.close()
    return out




def replay_field(way, got):
    """``<way>=<descriptors or ids per buffer>/<ms>ms``; the prepped ways add
    ``<way>_nixl=<descriptors NIXL posted per buffer, after its merge>``."""
    field = f"{way}={got[0]}/{got[1] * 1e3:.1f}ms"
    return field if len(got) == 2 else f"{field} {way}_nixl={got[2]:.0f}"


def main_replay(args):
    print(f"Replayed requests (replay.py, p16-occ80-g0, pools of {REPLAY_POOLS[0]} prefill and "
          f"{REPLAY_POOLS[1]} decode pages of {args.page_bytes} B in {BUFFERS} buffers), every "
          f"request verified; descriptors per buffer, times in ms for all requests\n")
    print("| engine | allocator | requests | way | descriptors | total ms |")
    print("|---|---|---|---|---|---|")
    lines = []
    for engine in args.engines:
        for allocator in ("vllm", "sglang"):
            got = replayed(engine, allocator, args.replay, args.page_bytes, args.sample_over,
                           lambda line: print(line, flush=True))
            lines.append(f"e2e-replay engine={engine} allocator={allocator} requests={args.replay} "
                         "verified=yes " + " ".join(replay_field(k, v) for k, v in got.items()))
    print()
    for line in lines:
        print(line)
    return lines
