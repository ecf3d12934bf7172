"""``lab/stack_e2e.py --stack vllm --quick``: real bytes through vLLM 0.33.0's own NIXL
connector in two processes, plugin off and on, and the contract of each ``stack-e2e`` line.

Needs vLLM's full install (torch) and NIXL (``nixl-cu12``): without them the test is
skipped saying which is missing, unless ``CORUN_REQUIRE_VLLM_STACK=1``, where it fails.
The quick run takes two to three minutes (four engine processes start).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from needs import need

from lab import stack_common as sc

LAB = Path(__file__).resolve().parents[1]
VLLM_STACK = ("torch", "vllm", "nixl_cu12")
BLOCK_BYTES = 32 * 2 * 16 * 8 * 128 * 2  # a block of every layer's K and V (lab.stack_vllm)


@pytest.fixture(scope="module")
def quick_lines():
    need(VLLM_STACK, "CORUN_REQUIRE_VLLM_STACK", "the whole vLLM stack and nixl-cu12 are")
    proc = subprocess.run([sys.executable, str(LAB / "stack_e2e.py"), "--stack", "vllm", "--quick"],
                          cwd=LAB.parent, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("stack-e2e ")]
    return lines


def expected_bytes(args):
    """The quick run's whole KV size, from the same request stream."""
    from lab import stack_vllm
    from lab.vllm_kv import KvShape

    blocks = min(stack_vllm.pools(KvShape.of("llama3-8b", 16), True))
    a = sc.parse(sc.parser("t"), args)
    stream = sc.request_stream(a.workload_spec, a.requests, a.seed, 16, blocks)
    return sum(r.blocks for r in stream) * BLOCK_BYTES


def test_quick_run_lines_keep_the_contract(quick_lines):
    assert len(quick_lines) == 2, quick_lines
    got = {}
    for line in quick_lines:
        f = sc.parse_line(line)
        # The fixed fields, in order, before any extra one.
        assert list(f)[:len(sc.LINE_FIELDS)] == list(sc.LINE_FIELDS), line
        assert (f["stack"], f["connector"], f["mode"]) == ("vllm", "nixl", "pull")
        assert f["bytes_bad"] == "0" and f["errors"] == "0", line
        assert int(f["bytes_checked"]) == int(f["bytes_expected"]) == expected_bytes(["--quick"]), line
        assert int(f["requests"]) == sc.QUICK_REQUESTS
        assert float(f["xfer_ms_p50"]) > 0 and float(f["xfer_ms_p99"]) >= float(f["xfer_ms_p50"])
        got[f["plugin"]] = f
    off, on = got["off"], got["on"]
    assert off["placed"] == off["fallback"] == "0"
    assert int(on["placed"]) > 0
    assert int(on["descriptors"]) <= int(off["descriptors"])
    # NIXL's own merge posts fewer descriptors once corun placed and ordered the blocks.
    assert int(on["nixl_posted"]) * 1.5 <= int(off["nixl_posted"]), (on, off)


def test_the_line_formatter_and_reader_agree():
    r = sc.WayResult(requests=2, bytes_checked=10, bytes_expected=10, descriptors=4,
                     xfer_ms=[1.0, 3.0], placed=1)
    r.extra["nixl_posted"] = 2
    line = sc.stack_line("vllm", "nixl", "pull", "on", r)
    f = sc.parse_line(line)
    assert list(f)[:len(sc.LINE_FIELDS)] == list(sc.LINE_FIELDS)
    assert f["xfer_ms_p50"] == "2.000" and f["nixl_posted"] == "2" and f["placed"] == "1"
    with pytest.raises(ValueError):
        sc.parse_line("e2e engine=nixl")


def test_modes_a_run_measures():
    """--mode picks vLLM's NIXL modes; a full run does both, --quick (CI's) pull alone."""
    from lab import stack_vllm

    def modes(argv):
        ap = sc.parser("t")
        ap.add_argument("--mode", choices=["pull", "push", "both"], default=None)
        return stack_vllm.run_modes(sc.parse(ap, argv))

    assert modes([]) == ["pull", "push"]
    assert modes(["--quick"]) == ["pull"]
    assert modes(["--mode", "push", "--quick"]) == ["push"]
    assert modes(["--mode", "both", "--quick"]) == ["pull", "push"]
    from lab.vllm_engine import CONNECTORS

    assert CONNECTORS == {"pull": "NixlConnector", "push": "NixlPushConnector",
                                     "mooncake": "MooncakeConnector"}

    def connector(argv):
        ap = sc.parser("t")
        ap.add_argument("--mode", choices=["pull", "push", "both"], default=None)
        ap.add_argument("--connector", default="nixl")
        return stack_vllm.run_modes(sc.parse(ap, argv))

    assert connector(["--connector", "mooncake"]) == ["mooncake"]
    assert connector(["--connector", "both", "--quick"]) == ["pull", "mooncake"]
    with pytest.raises(SystemExit):
        stack_vllm.main(["--mode", "write"])


@pytest.mark.skipif(os.environ.get("CORUN_VLLM_STACK_PUSH") != "1",
                    reason="push mode's run (four more engine processes, about two minutes): "
                           "CORUN_VLLM_STACK_PUSH=1 runs it")
def test_push_mode_run_keeps_the_contract():
    """vLLM's NixlPushConnector (the prefill side WRITEs) both ways: every byte intact."""
    need(VLLM_STACK, "CORUN_VLLM_STACK_PUSH", "the whole vLLM stack and nixl-cu12 are")
    args = ["--quick", "--mode", "push", "--requests", "6"]
    proc = subprocess.run([sys.executable, str(LAB / "stack_e2e.py"), "--stack", "vllm", *args],
                          cwd=LAB.parent, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("stack-e2e ")]
    assert len(lines) == 2, lines
    for line in lines:
        f = sc.parse_line(line)
        assert list(f)[:len(sc.LINE_FIELDS)] == list(sc.LINE_FIELDS), line
        assert (f["stack"], f["connector"], f["mode"]) == ("vllm", "nixl", "push")
        assert f["bytes_bad"] == "0" and f["errors"] == "0", line
        assert int(f["bytes_checked"]) == int(f["bytes_expected"]) == expected_bytes(args[:1] + args[3:]), line
        assert int(f["requests"]) == 6 and int(f["descriptors"]) > 0
        assert float(f["xfer_ms_p50"]) > 0 and float(f["xfer_ms_p99"]) >= float(f["xfer_ms_p50"])
    got = {sc.parse_line(line)["plugin"]: sc.parse_line(line) for line in lines}
    assert got["off"]["placed"] == "0" and int(got["on"]["descriptors"]) <= int(got["off"]["descriptors"])


def test_mooncake_connector_run_keeps_the_contract():
    """vLLM's MooncakeConnector (the real TransferEngine over TCP) both ways, llama3-70b-tp8's
    80 regions: every byte intact, no pull failed; with the plugin the decode side waited
    for the prefill side's blocks for every request and placement judged each of them."""
    need((*VLLM_STACK, "mooncake"), "CORUN_REQUIRE_VLLM_STACK", "the vLLM stack and Mooncake are")
    args = ["--quick", "--connector", "mooncake", "--model", "llama3-70b-tp8", "--requests", "12"]
    proc = subprocess.run([sys.executable, str(LAB / "stack_e2e.py"), "--stack", "vllm", *args],
                          cwd=LAB.parent, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    got = {}
    for line in proc.stdout.splitlines():
        if line.startswith("stack-e2e "):
            f = sc.parse_line(line)
            assert list(f)[:len(sc.LINE_FIELDS)] == list(sc.LINE_FIELDS), line
            assert (f["stack"], f["connector"], f["mode"], f["model"]) == ("vllm", "mooncake", "pull", "llama3-70b-tp8")
            assert f["bytes_bad"] == "0" and f["errors"] == "0" and f["pulls_failed"] == "0", line
            assert int(f["bytes_checked"]) == int(f["bytes_expected"]) > 0, line
            assert int(f["requests"]) == 12 and int(f["posted"]) == int(f["descriptors"]) > 0
            got[f["plugin"]] = f
    off, on = got["off"], got["on"]
    assert off["placed"] == off["fallback"] == off["waits"] == "0"
    assert int(on["waits"]) == 12 and int(on["placed"]) + int(on["partial"]) + int(on["fallback"]) == 12
    # corun's grouping never gives more groups than vLLM's rule on the same blocks.
    assert int(on["groups"]) <= int(on["groups_vllm_rule"])
    assert "stack-e2e-model stack=vllm connector=mooncake" in proc.stdout
