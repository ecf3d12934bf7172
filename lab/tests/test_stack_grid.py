"""``lab/stack_e2e.py --grid --quick``: one grid over both stacks' real connectors
(vLLM's NIXL and Mooncake, SGLang's Mooncake and NIXL; models and block sizes as
``lab.stack_grid.QUICK`` names them), plugin off and on, and the contract of its lines:
each cell's two ``stack-e2e`` lines keep every byte, its ``stack-e2e-grid`` line gives
a verdict from them, each engine gets a fitted ``stack-e2e-model`` line and each way a
``stack-e2e-projection`` line labelled ``kind=projection``.

Needs vLLM's full install (torch), SGLang, NIXL and Mooncake: without them the test is
skipped saying which is missing, unless ``CORUN_REQUIRE_SGLANG_STACK=1`` (CI's SGLang
group, which has them all), where it fails. The quick grid starts two engine processes
a way, eight ways: a few minutes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from needs import need

from lab import stack_common as sc
from lab import stack_grid

LAB = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def grid_out():
    need(("torch", "vllm", "sglang", "nixl_cu12", "mooncake"), "CORUN_REQUIRE_SGLANG_STACK",
         "both stacks, nixl-cu12 and Mooncake are")
    proc = subprocess.run([sys.executable, str(LAB / "stack_e2e.py"), "--grid", "--quick"],
                          cwd=LAB.parent, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]
    return proc.stdout.splitlines()


def fields(line):
    """``key=value`` fields of a line after its first word."""
    return dict(kv.split("=", 1) for kv in line.split()[1:])


def test_every_cell_keeps_every_byte_and_has_a_verdict(grid_out):
    stack_lines = [sc.parse_line(x) for x in grid_out if x.startswith("stack-e2e ")]
    grid_lines = [fields(x) for x in grid_out if x.startswith("stack-e2e-grid ")]
    assert len(grid_lines) == len(stack_grid.QUICK) and len(stack_lines) == 2 * len(stack_grid.QUICK)
    for f in stack_lines:
        assert f["bytes_bad"] == "0" and f["errors"] == "0", f
        assert int(f["bytes_checked"]) == int(f["bytes_expected"]) > 0, f
        assert int(f["posted"]) > 0 and float(f["xfer_ms_p50"]) > 0, f
    for (stack, connector, model, block), g, (off, on) in zip(
            stack_grid.QUICK, grid_lines, zip(stack_lines[::2], stack_lines[1::2])):
        assert (g["stack"], g["connector"], g["model"], g["block_tokens"]) == (stack, connector, model, str(block))
        assert (off["plugin"], on["plugin"]) == ("off", "on")
        assert (off["model"], on["model"], off["block_tokens"]) == (model, model, str(block))
        # The verdict is the lines' own: on's p50 against 1.05x off's.
        p_off, p_on = float(off["xfer_ms_p50"]), float(on["xfer_ms_p50"])
        assert (float(g["off_p50"]), float(g["on_p50"])) == pytest.approx((p_off, p_on), abs=1e-3)
        assert g["verdict"] == ("ok" if p_on <= stack_grid.TOLERANCE * p_off else "worse"), g
        assert (g["posted_off"], g["posted_on"]) == (off["posted"], on["posted"])
        # The plugin acts in every cell: it never posts more than the stack alone.
        assert int(on["posted"]) <= int(off["posted"]), (off, on)


def test_each_engine_has_a_fitted_model_and_each_way_a_projection(grid_out):
    models = [fields(x) for x in grid_out if x.startswith("stack-e2e-model ")]
    engines = {(s, c) for s, c, _, _ in stack_grid.QUICK}
    assert {(m["stack"], m["connector"]) for m in models} == engines
    for m in models:  # time = a + b * posted + bytes / c over every request of the engine
        assert int(m["points"]) >= 3 and {"a_ms", "b_us", "c_gbps", "fit_err"} <= set(m), m
        assert m["fit_err"] != "nan", m  # a point a request: the fit has points to fit
    projections = [fields(x) for x in grid_out if x.startswith("stack-e2e-projection ")]
    assert len(projections) == 2 * len(stack_grid.QUICK)
    assert all(p["kind"] == "projection" for p in projections)


def test_the_chart_draws_each_cell_measured_and_projected(tmp_path):
    """The full grid's PNG, from two made-up cells (no stack needed; matplotlib is)."""
    pytest.importorskip("matplotlib")

    def way(ms, posted):
        return sc.WayResult(requests=2, bytes_checked=2 << 20, bytes_expected=2 << 20,
                            xfer_ms=list(ms), posted=posted, model="llama3-70b-tp8", block_tokens=16)

    cells = [("vllm", "nixl", way([3.0, 5.0], 800), way([2.0, 2.5], 100)),
             ("sglang", "mooncake", way([9.0, 9.5], 400), way([9.1, 9.2], 400))]
    png = tmp_path / "grid.png"
    assert stack_grid.chart(cells, str(png)) is True
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert stack_grid.grid_line("vllm", "nixl", *cells[0][2:]).endswith("verdict=ok")
    assert stack_grid.grid_line("sglang", "mooncake", *cells[1][2:]).endswith("verdict=ok")
    bad = way([3.0, 5.0], 800)
    bad.bytes_bad = 1
    assert stack_grid.verdict(cells[0][2], bad) == "error"
    assert stack_grid.verdict(way([1.0], 8), way([1.2], 4)) == "worse"
