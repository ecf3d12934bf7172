"""Memory limits, bad parameters and the environment: every failure is an exception
that names what was wrong (a ``MemoryError`` for memory), never a panic or an abort."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import corun

# --- memory -----------------------------------------------------------------------

LIMITED = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    import corun

    def vm_bytes():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024

    n = {n}
    src = np.arange(0, 2 * n, 2, dtype=np.int32)   # every position its own run
    dst = np.arange(n, dtype=np.int32)
    layers = [0] * {layers}
    lens = [8] * {layers}
    big = np.arange(2 * n, dtype=np.int64)
    # From here on only {headroom} MiB more address space: the call's own outputs (or
    # copies) cannot fit.
    resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + ({headroom} << 20), resource.RLIM_INFINITY))
    try:
        {call}
    except MemoryError as e:
        print("MemoryError:", e)
        sys.exit(0)
    print("no error")
    sys.exit(3)
    """
)

CALLS = {
    "group_concurrent_contiguous": "corun.group_concurrent_contiguous(src, dst)",
    "runs": "corun.runs(src, dst)",
    "runs, max_len": "corun.runs(src, dst, max_len=3)",
    "transfer_descriptors arrays": "corun.transfer_descriptors(src, dst, layers, layers, lens)",
    "transfer_descriptors lists": "corun.transfer_descriptors(src, dst, layers, layers, lens, form='lists')",
    "transfer_descriptors nixl": "corun.transfer_descriptors(src, dst, layers, layers, lens, form='nixl')",
    # A strided input is copied: the copy is what cannot fit.
    "runs, strided copy": "corun.runs(big[::2], big[1::2])",
    "group_concurrent_contiguous, strided copy": "corun.group_concurrent_contiguous(big[::2], big[1::2])",
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_memory_limit_is_a_memory_error(name):
    layers = 64 if name.startswith("transfer") else 1
    script = LIMITED.format(n=4_000_000, layers=layers, headroom=48, call=CALLS[name])
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-2000:])
    assert "MemoryError: corun: cannot allocate" in r.stdout, r.stdout
    assert "bytes" in r.stdout  # how big


@pytest.mark.parametrize("form", ["arrays", "lists", "nixl"])
def test_outputs_too_large_for_any_memory(form):
    # 100,000 singleton runs x 10**6 layer buffers: 10**11 descriptors.
    src = np.arange(0, 200_000, 2, dtype=np.int32)
    n = 10**6
    with pytest.raises(MemoryError, match="cannot allocate"):
        corun.transfer_descriptors(src, src, [0] * n, [0] * n, [1] * n, form=form)


# --- parameters -------------------------------------------------------------------

S, D = np.arange(4, dtype=np.int32), np.arange(4, dtype=np.int32)


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        (dict(max_bytes=2**200), ValueError, "max_bytes must be in 1..2**64"),
        (dict(max_bytes=0), ValueError, "max_bytes"),
        (dict(max_bytes=True), TypeError, "max_bytes must be an int"),
        (dict(max_bytes=4.0), TypeError, "max_bytes must be an int"),
        (dict(src_dev_id=-1), ValueError, "src_dev_id must be in 0..2**64"),
        (dict(dst_dev_id=2**64), ValueError, "dst_dev_id must be in 0..2**64"),
        (dict(form="csv"), ValueError, "form must be"),
    ],
)
def test_descriptor_parameters_are_named(kwargs, exc, words):
    with pytest.raises(exc, match=words.replace("*", r"\*").replace(".", r"\.")):
        corun.transfer_descriptors(S, D, [0], [0], [8], **kwargs)


@pytest.mark.parametrize(
    "max_len, exc, words",
    [(2**70, ValueError, "max_len must be in"), (0, ValueError, "max_len"), (-1, ValueError, "max_len"),
     (True, TypeError, "max_len must be an int"), (2.0, TypeError, "max_len must be an int")],
)
def test_max_len_is_named(max_len, exc, words):
    with pytest.raises(exc, match=words):
        corun.runs(S, D, max_len=max_len)


def test_numpy_ints_are_ints():
    s, d, n = corun.runs(S, D, max_len=np.int64(2))
    assert n.tolist() == [2, 2]
    out = corun.transfer_descriptors(S, D, np.array([0], np.uint64), [0], [np.int32(8)], max_bytes=np.uint64(16))
    assert out[2].tolist() == [16, 16]


@pytest.mark.parametrize(
    "item_lens, exc, words",
    [
        (8, TypeError, "item_lens must be a sequence of ints, one per layer buffer, got int"),
        ("8", TypeError, "item_lens must be a sequence"),
        (None, TypeError, "item_lens must be a sequence"),
        ([8, True], TypeError, r"item_lens\[1\] must be an int"),
        ([8, 1.5], TypeError, r"item_lens\[1\] must be an int"),
        ([8, -1], ValueError, r"item_lens\[1\] = -1 is not in 0..2\*\*64"),
        ([8, 2**64], ValueError, r"item_lens\[1\] = 18446744073709551616 is not in"),
        ([8, 0], ValueError, r"item_lens\[1\] is 0"),
    ],
)
def test_per_layer_entries_are_named(item_lens, exc, words):
    with pytest.raises(exc, match=words):
        corun.transfer_descriptors(S, D, [0, 0], [0, 0], item_lens)


@pytest.mark.parametrize("func", [corun.group_concurrent_contiguous, corun.runs])
@pytest.mark.parametrize(
    "bad, kind",
    [((i for i in range(3)), "generator"), (None, "NoneType"), ({1, 2}, "set"), ("abc", "str"), (b"ab", "bytes"), (7, "int")],
)
def test_non_sequences_say_what_they_are(func, bad, kind):
    with pytest.raises(TypeError, match=f"must be a 1-D array or a sequence of integer indices, got {kind}"):
        func(bad, [1, 2, 3])


def test_lists_that_fit_no_dtype_name_the_entries():
    with pytest.raises(ValueError, match=r"src mixes a negative index \(src\[0\] = -1\) with one from 2\*\*63 \(src\[1\]"):
        corun.runs([-1, 2**63], [0, 1])
    with pytest.raises(ValueError, match=r"dst\[1\] = 18446744073709551616 does not fit in 64 bits"):
        corun.runs([0, 1], [0, 2**64])
    with pytest.raises(TypeError, match=r"src\[1\] must be an integer index, got 1.5"):
        corun.runs([0, 1.5], [0, 1])
    # Lists of ints that do fit are exact, whatever numpy would have guessed.
    s, d, n = corun.runs([2**63, 2**63 + 1], [0, 1])
    assert s.dtype == np.uint64 and s.tolist() == [2**63] and n.tolist() == [2]


def test_no_common_type_names_the_negative_index():
    u = np.array([2**63, 2**63 + 1], dtype=np.uint64)
    with pytest.raises(ValueError, match=r"negative index at position 1: dst\[1\] = -7"):
        corun.transfer_descriptors(u, np.array([0, -7]), [0], [0], [1])


def test_messages_do_not_count_outputs_python_never_sees():
    with pytest.raises(ValueError) as e:
        corun.transfer_descriptors(np.array([5, 6, -3]), np.array([0, 1, 2]), [0, 0], [0, 0], [8, 8])
    assert "written" not in str(e.value)
    assert "src[2] = -3" in str(e.value)
    with pytest.raises(ValueError) as e:
        corun.transfer_descriptors(np.array([2**61], np.uint64), np.array([0], np.uint64), [0], [0], [16])
    assert "written" not in str(e.value) and "overflow" in str(e.value)


def test_runs_starts_are_in_each_inputs_own_dtype():
    vals = [1, 2, 5]
    for dt in ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", ">i4", ">u8", "<i2"]:
        a = np.array(vals, dtype=dt)
        s, d, n = corun.runs(a, np.arange(3, dtype=np.int32))
        assert s.dtype == a.dtype and d.dtype == np.int32 and n.dtype == np.int64
        assert s.tolist() == [1, 5]
    s, _, _ = corun.runs(vals, vals)
    assert s.dtype == np.asarray(vals).dtype


# --- the environment ---------------------------------------------------------------


def run_python(code, **env):
    e = dict(os.environ)
    e.pop("CORUN_INT_CACHE", None)
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=60)


@pytest.mark.parametrize("value", ["-1", "abc", "1e6", "2000000", "+5", "1.5"])
def test_bad_int_cache_is_an_error_at_import(value):
    r = run_python("import corun", CORUN_INT_CACHE=value)
    assert r.returncode != 0
    assert "ValueError: CORUN_INT_CACHE must be a whole number" in r.stderr
    assert repr(value) in r.stderr or f'"{value}"' in r.stderr, r.stderr


SHARED = """
import os, corun
import numpy as np
src = np.arange(1000, 1004, dtype=np.int32)
a = corun.group_concurrent_contiguous(src, src)[0][0][0]
os.environ["CORUN_INT_CACHE"] = "0"  # read at import only: no effect now
b = corun.group_concurrent_contiguous(src, src)[0][0][0]
print(a is b)
"""


@pytest.mark.parametrize("value, shared", [(None, "True"), ("", "True"), (" ", "True"), ("0", "False"), ("100", "False"), ("1048576", "True")])
def test_int_cache_is_read_at_import(value, shared):
    env = {} if value is None else {"CORUN_INT_CACHE": value}
    r = run_python(SHARED, **env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == shared
