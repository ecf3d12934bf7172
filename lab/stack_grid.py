"""One grid over the stack runs: stacks x connectors x models x block sizes, plugin off and on.

``python lab/stack_e2e.py --grid [--quick] [--requests N --seed S --workload NAME]``.
Each cell is one stack run's two ways (``lab.stack_common.alternate``: fresh processes a
way, off and on alternating), through the stack's own ``run_way``; every ``stack-e2e``
line is printed as the stack prints it, then the cell's verdict:

``stack-e2e-grid stack= connector= model= block_tokens= off_p50= on_p50= ratio=
posted_off= posted_on= verdict=``, ``verdict=ok`` when the plugin's ``xfer_ms_p50`` is at
most 1.05x off's in the same cell (``worse`` otherwise, ``error`` when a line misses its
byte contract). After the cells, a cost model per engine fitted over all its lines
(``lab.cost_model``: ``stack-e2e-model``) and each line priced at the field's costs
(``stack-e2e-projection``, ``kind=projection``).

A full grid (:data:`FULL`) writes ``stack-e2e-grid.txt`` and ``stack-e2e-grid.png`` (the
transfer p50 off against on per cell, the projection beside it; drawn when matplotlib is
installed) into the results folder; ``--quick`` (:data:`QUICK`, 24 requests a way) writes
nothing. Returns 0 when every line keeps its byte contract (the verdicts are figures,
not failures).
"""

from __future__ import annotations

import sys
from typing import Dict, List, Tuple

from lab import cost_model
from lab import stack_common as sc

# (stack, connector, model, block tokens): vLLM's NIXL (pull) and Mooncake connectors in
# full attention at its block sizes; SGLang's two backends over its pages, 1 its default.
FULL: List[Tuple[str, str, str, int]] = (
    [("vllm", c, m, b) for c in ("nixl", "mooncake") for m in ("llama3-8b", "llama3-70b-tp8")
     for b in (16, 64, 128)]
    + [("sglang", c, m, b) for c in ("mooncake", "nixl")
       for m in ("llama3-8b-tp8", "llama3-70b-tp8", "deepseek-v3-mla") for b in (1, 16, 64)])
QUICK: List[Tuple[str, str, str, int]] = [
    ("vllm", "nixl", "llama3-70b-tp8", 16), ("vllm", "mooncake", "llama3-70b-tp8", 16), ("sglang", "mooncake", "llama3-70b-tp8", 1),
    ("sglang", "nixl", "deepseek-v3-mla", 16)]
#: A cell's verdict is ``ok`` when on's p50 is at most this times off's.
TOLERANCE = 1.05


def _cell(stack: str, connector: str, model: str, block: int, common: List[str]):
    """Runs one cell; returns its two results {plugin: WayResult}."""
    argv = [*common, "--model", model, "--block-tokens", str(block)]
    from lab import stack_sglang, stack_vllm

    args = sc.parse(sc.parser("grid", model=model), argv)
    if stack == "vllm":
        mode = "mooncake" if connector == "mooncake" else "pull"
        got = sc.alternate(lambda m, plugin: stack_vllm.run_way(args, m, plugin), [mode])
        return {p: got[(mode, p)] for p in sc.WAYS}, "pull"
    mode = stack_sglang.MODE
    got = sc.alternate(lambda m, plugin: stack_sglang.run_way(args, connector, plugin), [mode])
    return {p: got[(mode, p)] for p in sc.WAYS}, None


def verdict(off, on) -> str:
    """A cell's verdict (see the module docs)."""
    if any(r.bytes_bad or r.errors or r.bytes_checked != r.bytes_expected for r in (off, on)):
        return "error"
    p_off, p_on = sc.percentiles(off.xfer_ms)[0], sc.percentiles(on.xfer_ms)[0]
    return "ok" if p_on <= TOLERANCE * p_off else "worse"


def grid_line(stack: str, connector: str, off, on) -> str:
    """The ``stack-e2e-grid`` line of one cell."""
    p_off, p_on = sc.percentiles(off.xfer_ms)[0], sc.percentiles(on.xfer_ms)[0]
    return (f"stack-e2e-grid stack={stack} connector={connector} model={off.model} "
            f"block_tokens={off.block_tokens} off_p50={p_off:.3f} on_p50={p_on:.3f} "
            f"ratio={p_on / p_off if p_off else float('nan'):.3f} posted_off={off.posted} "
            f"posted_on={on.posted} verdict={verdict(off, on)}")


def chart(cells, path: str) -> bool:
    """The PNG: per cell, transfer p50 off and on (measured), and the projection's mean
    request off and on (RDMA NIC, cuda_ipc over NVLink). False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [f"{s}/{c}\n{off.model}\n{off.block_tokens} tok" for s, c, off, _ in cells]
    x = range(len(cells))
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(max(8, 1.2 * len(cells)), 9))
    w = 0.4
    ax.bar([i - w / 2 for i in x], [sc.percentiles(o.xfer_ms)[0] for _, _, o, _ in cells], w, label="off")
    ax.bar([i + w / 2 for i in x], [sc.percentiles(n.xfer_ms)[0] for _, _, _, n in cells], w, label="on")
    ax.set_ylabel("transfer p50, ms (measured, this machine)")
    ax.set_xticks(list(x), names, fontsize=7)
    ax.legend()
    for k, (label, shift) in enumerate((("rdma_nic", -0.3), ("cuda_ipc_nvlink", 0.1))):
        for plugin, dx in (("off", 0), ("on", 0.2)):
            vals = [cost_model.projection(off if plugin == "off" else on)[f"{label}_ms"]
                    for _, _, off, on in cells]
            bx.bar([i + shift + dx for i in x], vals, 0.2, label=f"{label} {plugin}")
    bx.set_ylabel("mean request, ms (PROJECTION at the field's costs)")
    bx.set_xticks(list(x), names, fontsize=7)
    bx.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def main(argv=None) -> int:
    """Runs the grid (see the module docs)."""
    ap = sc.parser(__doc__.splitlines()[0])
    ap.add_argument("--grid", action="store_true", help="(what stack_e2e.py --grid runs)")
    args = sc.parse(ap, argv)
    from lab.peers import upstream

    upstream.require("stack_e2e.py --grid", ["torch", "vllm", "sglang", "nixl", "mooncake"])
    common = [a for a in ("--quick",) if args.quick] + [
        "--requests", str(args.requests), "--seed", str(args.seed), "--workload", args.workload]
    cells = QUICK if args.quick else FULL
    path = sc.tee_results("stack-e2e-grid.txt", args)
    print(f"# grid: {len(cells)} cells, {args.requests} requests a way, seed {args.seed}, "
          f"workload {args.workload}", flush=True)
    done = []
    engines: Dict[Tuple[str, str], list] = {}
    ok = True
    for n, (stack, connector, model, block) in enumerate(cells, 1):
        print(f"# cell {n}/{len(cells)}: {stack} {connector} {model} {block}-token blocks", flush=True)
        ways, mode = _cell(stack, connector, model, block, common)
        off, on = ways["off"], ways["on"]
        for plugin in sc.WAYS:
            print(sc.stack_line(stack, connector, mode, plugin, ways[plugin]), flush=True)
        print(grid_line(stack, connector, off, on), flush=True)
        ok &= verdict(off, on) != "error"
        done.append((stack, connector, off, on))
        engines.setdefault((stack, connector), []).extend([off, on])
    for (stack, connector), results in engines.items():
        print(cost_model.model_line(stack, connector, results))
    for stack, connector, off, on in done:
        for plugin, r in (("off", off), ("on", on)):
            print(cost_model.projection_line(stack, connector, plugin, r))
    if path is not None:
        png = path[:-len(".txt")] + ".png"
        print(f"(chart: {png})" if chart(done, png) else "(no chart: matplotlib is not installed)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
