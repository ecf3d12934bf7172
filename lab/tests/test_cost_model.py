"""lab.cost_model: the fit recovers a known engine, the projection prices as documented,
and lab.stack_grid's verdicts follow its tolerance."""

import math

import numpy as np
import pytest

from lab import cost_model, stack_grid
from lab import stack_common as sc


def _way(xfer, posted, size, requests=None, **kw):
    r = sc.WayResult(model="llama3-70b-tp8", block_tokens=16, **kw)
    r.xfer_ms = list(xfer)
    r.requests = len(r.xfer_ms) if requests is None else requests
    r.per_posted, r.per_bytes = list(posted), list(size)
    r.posted, r.bytes_checked = sum(r.per_posted), sum(r.per_bytes)
    r.bytes_expected = r.bytes_checked
    return r


def test_fit_recovers_a_known_engine_from_per_request_points():
    rng = np.random.default_rng(3)
    posted = rng.integers(10, 5000, 60)
    size = rng.integers(1 << 20, 64 << 20, 60)
    a, b_us, gbps = 0.8, 2.5, 6.0
    ms = a + posted * b_us * 1e-3 + size / (gbps * 1e6)
    off = _way(ms[:30], posted[:30], size[:30])
    on = _way(ms[30:], posted[30:], size[30:])
    f = cost_model.fit(cost_model.points([off, on]))
    assert f["points"] == 60
    assert f["a_ms"] == pytest.approx(a, rel=1e-6)
    assert f["b_us"] == pytest.approx(b_us, rel=1e-6)
    assert f["c_gbps"] == pytest.approx(gbps, rel=1e-6)
    assert f["fit_err"] < 1e-9
    line = cost_model.model_line("sglang", "mooncake", [off, on])
    assert line.startswith("stack-e2e-model stack=sglang connector=mooncake points=60 a_ms=0.8 ")


def test_lines_without_per_request_counts_give_one_point_each_and_too_few_give_nan():
    r = _way([10.0, 30.0], [], [], requests=2)
    r.posted, r.bytes_checked = 400, 2 << 20
    assert cost_model.points([r]) == [(200.0, float(1 << 20), 20.0)]
    f = cost_model.fit(cost_model.points([r, r]))
    assert f["points"] == 2 and all(math.isnan(f[k]) for k in ("a_ms", "b_us", "c_gbps", "fit_err"))


def test_an_unresolved_bandwidth_is_infinite_not_clipped():
    # Time independent of bytes: the per-byte coefficient is 0 -> no bandwidth term.
    posted = np.arange(1, 21) * 100
    size = (np.arange(20) % 3 + 1) << 20
    off = _way(1.0 + posted * 1e-3, posted, size)
    f = cost_model.fit(cost_model.points([off]))
    assert f["b_us"] == pytest.approx(1.0, rel=1e-6)
    assert f["c_gbps"] == math.inf or f["c_gbps"] > 1e6


def test_projection_prices_the_mean_request_at_the_fields_costs():
    r = _way([5.0, 5.0], [1000, 3000], [100 << 20, 300 << 20])
    p = cost_model.projection(r)
    mean_posted, mean_bytes = 2000, 200 << 20
    assert p["rdma_nic_ms"] == pytest.approx(mean_posted * 0.5e-3 + mean_bytes / 50e6)
    assert p["cuda_ipc_nvlink_ms"] == pytest.approx(mean_posted * 3.4e-3 + mean_bytes / 400e6)
    line = cost_model.projection_line("vllm", "nixl", "on", r)
    assert " kind=projection " in line and line.startswith("stack-e2e-projection stack=vllm")


def test_grid_verdicts_follow_the_tolerance_and_the_byte_contract():
    off = _way([10.0, 10.0, 10.0], [9, 9, 9], [1, 1, 1])
    assert stack_grid.verdict(off, _way([10.5] * 3, [3] * 3, [1] * 3)) == "ok"
    assert stack_grid.verdict(off, _way([10.6] * 3, [3] * 3, [1] * 3)) == "worse"
    bad = _way([1.0] * 3, [3] * 3, [1] * 3, bytes_bad=8)
    assert stack_grid.verdict(off, bad) == "error"
    line = stack_grid.grid_line("sglang", "nixl", off, _way([5.0] * 3, [3] * 3, [1] * 3))
    assert line.endswith("ratio=0.500 posted_off=27 posted_on=9 verdict=ok"), line


def test_the_grid_covers_every_stack_connector_and_the_issues_shapes():
    cells = set(stack_grid.FULL)
    assert {(s, c) for s, c, _, _ in cells} == {("vllm", "nixl"), ("vllm", "mooncake"), ("sglang", "mooncake"),
                                               ("sglang", "nixl")}
    assert {m for _, _, m, _ in cells} >= {"llama3-70b-tp8", "deepseek-v3-mla"}
    assert {b for s, _, _, b in cells if s == "vllm"} == {16, 64, 128}
    assert {b for s, _, _, b in cells if s == "sglang"} == {1, 16, 64}
    assert set(stack_grid.QUICK) <= cells


def test_a_long_way_says_how_far_it_is(capsys):
    p = sc.Progress("stack=vllm mode=pull plugin=on", 160, every=10.0)
    t = [100.0]
    p._clock = lambda: t[0]
    p.start = p.last = 100.0
    p.tick(3)
    assert capsys.readouterr().err == ""  # not yet: under `every` seconds
    t[0] = 112.0
    p.tick(40)
    assert capsys.readouterr().err == "stack-e2e-progress stack=vllm mode=pull plugin=on requests=40/160 elapsed_s=12\n"
