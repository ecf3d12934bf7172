"""``lab/stack_e2e.py --stack sglang --quick``: real KV bytes through SGLang 0.5.23's own
Mooncake backend (two processes, the Mooncake Transfer Engine over TCP), corun's plugin off
and on; every line's contract (issue 36).

Needs SGLang's runtime stack (torch, sglang 0.5.23, mooncake-transfer-engine): without it
the test skips naming what is missing, and fails instead with CORUN_REQUIRE_SGLANG_STACK=1.
"""

import os
import subprocess
import sys

import pytest

from needs import need

from lab import engine_counts, nixl_exit
from lab import stack_common as sc
from lab import stack_sglang

LAB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FIXED = ["stack", "connector", "plugin", "requests", "bytes_checked", "bytes_bad", "descriptors",
         "xfer_ms_p50", "xfer_ms_p99", "placed", "fallback", "errors"]


@pytest.fixture(scope="module")
def lines():
    need(("torch", "sglang", "mooncake"), "CORUN_REQUIRE_SGLANG_STACK",
         "SGLang's runtime stack (torch, sglang, mooncake-transfer-engine) is")
    proc = subprocess.run([sys.executable, os.path.join(LAB, "stack_e2e.py"), "--stack",
                           "sglang", "--quick"], capture_output=True, text=True, timeout=600,
                          cwd=os.path.dirname(LAB))
    out = [line for line in proc.stdout.splitlines() if line.startswith("stack-e2e ")]
    assert len(out) == 2, f"want 2 stack-e2e lines, got:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return out


def _expected_bytes():
    # The requests' KV size, from the stream alone: every token's K and V in every layer
    # of the SGLang run's default model (one KV head of 128, bf16, 32 layers).
    args = sc.parse(sc.parser("t"), ["--quick"])
    ps = args.workload_spec.page_tokens
    pages = 128 * 2**20 // (ps * 64 * 256)  # the quick prefill pool: 128 MiB
    stream = sc.request_stream(args.workload_spec, args.requests, args.seed, ps, pages)
    per_token = 2 * 32 * 1 * 128 * 2
    return args.requests, sum(r.tokens(ps) for r in stream) * per_token


def test_each_line_is_the_issues_line_and_every_byte_arrived(lines):
    requests, want = _expected_bytes()
    assert want > 0
    for line, plugin in zip(lines, ("off", "on")):
        keys = [f.split("=", 1)[0] for f in line.split()[1:]]
        assert keys[:len(FIXED)] == FIXED, line
        f = sc.parse_line(line)
        assert (f["stack"], f["connector"], f["plugin"]) == ("sglang", "mooncake", plugin)
        assert int(f["requests"]) == requests, line
        assert int(f["bytes_bad"]) == 0 and int(f["errors"]) == 0, line
        assert int(f["bytes_checked"]) == want, (line, want)
        assert int(f["descriptors"]) > 0 and float(f["xfer_ms_p50"]) > 0, line
        assert float(f["xfer_ms_p99"]) >= float(f["xfer_ms_p50"]), line
        assert f["loaded"] == "load_plugins", line  # corun came in through SGLang's loader


def test_plugin_on_moves_no_more_descriptors_and_is_loaded(lines):
    off, on = (sc.parse_line(line) for line in lines)
    assert int(on["descriptors"]) <= int(off["descriptors"]), lines
    # Off: SGLang's own code, nothing of corun ran; on: corun's helper did the grouping and
    # placement saw every request.
    assert int(off["group_calls"]) == 0 and int(off["placed"]) + int(off["fallback"]) == 0
    assert int(on["group_calls"]) > 0
    assert int(on["placed"]) + int(on["fallback"]) == int(on["requests"])
    # Transfer times are one noisy VM's (2 cores shared): on's median within 25% of off's.
    assert float(on["xfer_ms_p50"]) <= 1.25 * float(off["xfer_ms_p50"]), lines


# --- NIXL: the counting at the agent, on a real agent pair (the whole run is the full form's:
# its quick form takes longer than CI's budget for one more test) ----------------------------


def _nixl_counting_check() -> None:
    # SGLang's NIXL path posts a request as make_prepped_xfer of one id per page and buffer;
    # the counter must report those ids as handed and NIXL's own post-merge count as posted.
    import numpy as np

    os.environ["NIXL_TELEMETRY_ENABLE"] = "y"  # read when an agent is made
    from nixl_cu12._api import nixl_agent, nixl_agent_config

    page, pages = 1024, 16
    src = np.arange(page * pages, dtype=np.uint64).view(np.uint8)
    dst = np.zeros_like(src)
    a = nixl_agent("s2-src", nixl_agent_config(backends=["UCX"]))  # SGLang's: no capture_telemetry
    b = nixl_agent("s2-dst", nixl_agent_config(backends=["UCX"]))
    for agent, arr in ((a, src), (b, dst)):
        regs = agent.get_reg_descs(np.array([[arr.ctypes.data, arr.nbytes, 0]], np.uint64), "DRAM")
        assert agent.register_memory(regs) is not None
    a.add_remote_agent(b.get_agent_metadata())

    def rows(base):
        addrs = np.uint64(base) + np.arange(pages, dtype=np.uint64) * np.uint64(page)
        return np.column_stack((addrs, np.full_like(addrs, page), np.zeros_like(addrs)))

    local = a.prep_xfer_dlist("", rows(src.ctypes.data), "DRAM")
    remote = a.prep_xfer_dlist("s2-dst", rows(dst.ctypes.data), "DRAM")
    counted = engine_counts.NixlCounted(a)
    # Pages 2..5 -> 8..11 (one run), 9 -> 0, 12..13 -> 3..4 (one run): 7 ids, 3 runs.
    src_ids, dst_ids = [2, 3, 4, 5, 9, 12, 13], [8, 9, 10, 11, 0, 3, 4]
    handle = a.make_prepped_xfer("WRITE", local, src_ids, remote, dst_ids)
    state = a.transfer(handle)
    while state not in ("DONE", "ERR"):
        state = a.check_xfer_state(handle)
    assert state == "DONE"
    assert a.check_xfer_state(handle) == "DONE"  # polled again: counted once
    for s, d in zip(src_ids, dst_ids):
        assert np.array_equal(dst[d * page:(d + 1) * page], src[s * page:(s + 1) * page])
    assert (counted.calls, counted.descriptors, counted.failed) == (1, 7, 0)
    assert counted.extra == {"nixl_posted": 3}
    # The aux path: initialize_xfer of a list, its descCount() handed.
    descs = rows(src.ctypes.data)[:2], rows(dst.ctypes.data)[14:]
    handle = a.initialize_xfer("WRITE", a.get_xfer_descs(descs[0], "DRAM"),
                               a.get_xfer_descs(descs[1], "DRAM"), "s2-dst")
    state = a.transfer(handle)
    while state not in ("DONE", "ERR"):
        state = a.check_xfer_state(handle)
    assert (counted.calls, counted.descriptors, counted.failed) == (2, 9, 0)
    # NIXL merges only prepped descriptors: the two adjacent ones of this list post as two.
    assert counted.extra == {"nixl_posted": 5}
    nixl_exit.leave(0)  # past the checks: without NIXL's native teardown (lab.nixl_exit)


def test_nixl_counting_is_what_sglang_hands_and_what_nixl_posts():
    # In a process of its own, which leaves without NIXL's native teardown: a pytest
    # process that made NIXL agents crashed at exit after every test had passed.
    need(("nixl_cu12",), "CORUN_REQUIRE_SGLANG_STACK", "NIXL is")
    import multiprocessing

    child = multiprocessing.get_context("spawn").Process(target=_nixl_counting_check)
    child.start()
    child.join(300)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0, f"the NIXL counting check failed (exit code {child.exitcode})"


def test_connector_option_defaults_to_mooncake_and_names_results():
    ap = stack_sglang._parser()
    assert sc.parse(ap, ["--quick"]).connector == "mooncake"
    assert sc.parse(ap, ["--quick", "--connector", "nixl"]).connector == "nixl"
    with pytest.raises(SystemExit):
        sc.parse(ap, ["--connector", "rdma"])
    assert stack_sglang.results_name("mooncake") == "stack-e2e-sglang.txt"
    assert stack_sglang.results_name("nixl") == "stack-e2e-sglang-nixl.txt"
