"""Placement's CPU per call under the plugins' default budget (issue 44), through the
stacks' real allocators: vLLM 0.33's ``BlockPool`` of ``5n + 65`` blocks for a request
of ``n`` (the request and the plugin's window; its free queue fragmented: every block
taken, then freed in a shuffled order) and SGLang 0.5.23's
``PagedTokenToKVPoolAllocator`` on the CPU (16-token pages, ``need_sort`` as in P/D
mode, fragmented by requests of 1-64 pages of which a random half were freed; four
times the largest request), for
requests of 1 to 1M pages, three calls a size, smallest first (the budget learns its
costs as a serving process does).

Each call is the plugin's own hook body, as its patch calls it (``lab.hooked.Plugin``):
vLLM's placement then ``get_new_blocks``; SGLang's batch placement then the real
``alloc_extend``. The request's first side is in runs of 7 pages with gaps of 14, so
that placement has runs to pair. One line per call:

``place-budget stack=<vllm|sglang> pages=<n> call=<i> result=<placed|partial|fallback>
place_us=<µs> stack_us=<µs> limit_us=<µs> runs_own=<d> runs=<d> within=<yes|no>``:
``place_us`` the plugin's CPU time for the call (``place_times()``'s measure),
``stack_us`` the stack's own allocation of the request, ``limit_us`` the larger of 2 ms
and a quarter of that, ``runs_own`` / ``runs`` the request's runs (as the plugin judges
them) with the allocator's own pages and with the pages it got. Every call is checked:
no page handed out twice, never more runs than the allocator's own pages. Then per stack
``place-budget-summary stack=<s> calls=<n> over=<n> max_place_us=<µs>
max_place_over_limit=<x>``.

    python lab/bench.py --budget                    # 1 to 1M pages; python-place-budget.txt
    python lab/bench.py --budget --max-pages 65536  # ... to 64K pages
"""

import numpy as np

import corun
from corun._budget import DEFAULT_US, SHARE
from lab.hooked import Plugin

SIZES = [1, 16, 256, 4096, 65536, 262144, 1 << 20]
CALLS = 3
PAGE_TOKENS = 16
FLOOR_US = float(DEFAULT_US)  # the default setting


def first_side(n, offset=0):
    """``n`` page ids in runs of 7 with gaps of 14."""
    i = np.arange(n, dtype=np.int64)
    return (i // 7) * 21 + i % 7 + offset


def vllm_pool(blocks, rng):
    from vllm.v1.core.block_pool import BlockPool

    pool = BlockPool(blocks, enable_caching=False, hash_block_size=PAGE_TOKENS)
    taken = pool.get_new_blocks(pool.get_num_free_blocks())
    pool.free_blocks([taken[k] for k in rng.permutation(len(taken))])
    return pool


def vllm_front(pool, n):
    """The ids of the first ``n`` blocks of the free queue: what ``get_new_blocks`` hands out."""
    q, out = pool.free_block_queue, []
    b = q.fake_free_list_head.next_free_block
    while len(out) < n:
        out.append(b.block_id)
        b = b.next_free_block
    return np.array(out, np.int64)


def sglang_pool(pages, rng):
    import torch
    from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator

    alloc = PagedTokenToKVPoolAllocator(pages * PAGE_TOKENS, PAGE_TOKENS, torch.bfloat16, "cpu",
                                        kvcache=None, need_sort=True)
    held = []
    while True:
        got = alloc.alloc(int(rng.integers(1, 65)) * PAGE_TOKENS)
        if got is None:
            break
        held.append(got)
    for k in rng.permutation(len(held))[: len(held) // 2]:
        alloc.free(held[k])
    alloc.merge_and_sort_free()
    return alloc


def sglang_front(alloc, n):
    """The pages ``alloc_extend`` hands out for one request of ``n`` pages (it merges
    the staged frees first when its bound exceeds the free list)."""
    import torch

    free = alloc.free_pages
    if n + 2 > len(free) and alloc.staged_pages:
        free = torch.sort(torch.cat((free, *alloc.staged_pages)))[0]
    return free[:n].numpy().astype(np.int64)


def sglang_alloc(alloc):
    import torch

    def take(n):
        tokens = n * PAGE_TOKENS
        zero, seq = torch.zeros(1, dtype=torch.int64), torch.tensor([tokens], dtype=torch.int64)
        return alloc.alloc_extend(zero, zero, seq, seq, torch.tensor([-1], dtype=torch.int64), tokens)

    return take


def sweep(stack, sizes, rng):
    """The calls of one stack; returns their lines' (place_us, limit_us)."""
    most = max(sizes)
    plugin = Plugin(stack)
    if stack == "vllm":
        direction = "either"  # the plugin's, with nixl_order on (lab.hooked.Plugin)
    else:
        pool = sglang_pool(4 * most + 64, rng)  # half of it held
        direction = "ascending"  # SGLang's backends group ascending runs
    got = []
    for n in sizes:
        if stack == "vllm":
            # A pool of the request and its window (4n + 64) per size: the window then
            # holds runs to place (from a far larger shuffled pool it holds almost none).
            pool = vllm_pool(5 * n + 65, rng)
            plugin.prepare(pool)
        for call in range(CALLS):
            first = first_side(n, offset=int(rng.integers(0, 1000)))
            own = vllm_front(pool, n) if stack == "vllm" else sglang_front(pool, n)
            before = plugin.life.counters.snapshot()
            plugin.life.budget.reset()
            if stack == "vllm":
                blocks = plugin.vllm(pool, first.tolist())  # Python ints, as vLLM's JSON gives them
                pages = np.array([b.block_id for b in blocks], np.int64)
            else:
                tokens = plugin.sglang(pool, first, alloc=sglang_alloc(pool), bound=n + 2)
                pages = (tokens[::PAGE_TOKENS] // PAGE_TOKENS).numpy().astype(np.int64)
            place_us = plugin.life.budget.times()["max_us"]
            stack_us = plugin.last_stack_ns / 1000
            after = plugin.life.counters.snapshot()
            result = next(k for k in ("placed", "partial", "fallback") if after[k] > before[k])
            runs_own = corun.count_runs(first, own, direction=direction)
            runs = corun.count_runs(first, pages, direction=direction)
            assert len(pages) == n == len(np.unique(pages)), "a page handed out twice"
            assert runs <= runs_own, (n, runs, runs_own)
            assert after["errors"] == before["errors"], "the plugin counted an error"
            limit_us = max(FLOOR_US, SHARE * stack_us)
            print(f"place-budget stack={stack} pages={n} call={call} result={result} "
                  f"place_us={place_us:.0f} stack_us={stack_us:.0f} limit_us={limit_us:.0f} "
                  f"runs_own={runs_own} runs={runs} within={'yes' if place_us <= limit_us else 'no'}",
                  flush=True)
            got.append((place_us, limit_us))
            if stack == "vllm":
                pool.free_blocks([blocks[k] for k in rng.permutation(n)])
            else:
                pool.free(tokens)
    return got


def run_section(max_pages):
    """Both stacks, sizes up to ``max_pages``; prints the lines and the summaries."""
    sizes = [n for n in SIZES if n <= max_pages]
    print(f"\nplacement under the plugins' default budget (the larger of {FLOOR_US:.0f} µs and "
          f"{SHARE} x the stack's own allocation), {CALLS} calls a size, n up to {max(sizes):,}:")
    for stack in ("vllm", "sglang"):
        got = sweep(stack, sizes, np.random.default_rng(44))
        over = sum(p > lim for p, lim in got)
        worst = max(p / lim for p, lim in got)
        print(f"place-budget-summary stack={stack} calls={len(got)} over={over} "
              f"max_place_us={max(p for p, _ in got):.0f} max_place_over_limit={worst:.2f}")
