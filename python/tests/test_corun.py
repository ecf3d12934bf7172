"""corun's Python functions against the pure-Python reference (reference.py), written from the
semantics (exact integer arithmetic), on run-built inputs near the dtype limits."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import corun
from reference import reference, reference_descriptors, reference_runs

DTYPES = [np.int32, np.int64, np.uint32, np.uint64]


# --- the helper's documented cases ------------------------------------------------


def test_single_group():
    src = np.array([4, 5, 6, 7], dtype=np.int32)
    dst = np.array([10, 11, 12, 13], dtype=np.int32)
    assert corun.group_concurrent_contiguous(src, dst) == ([[4, 5, 6, 7]], [[10, 11, 12, 13]])


def test_split_when_either_side_breaks():
    src = np.array([1, 2, 3, 10, 11, 12], dtype=np.int64)
    dst = np.array([5, 6, 9, 10, 11, 13], dtype=np.int64)
    got = corun.group_concurrent_contiguous(src, dst)
    assert got == ([[1, 2], [3], [10, 11], [12]], [[5, 6], [9], [10, 11], [13]])
    assert got == reference(src, dst)


def test_both_empty_and_one_side_empty():
    e = np.array([], dtype=np.int32)
    assert corun.group_concurrent_contiguous(e, e) == ([], [])
    assert corun.group_concurrent_contiguous(np.arange(5, dtype=np.int32), e) == ([], [])
    assert corun.group_concurrent_contiguous(e, np.arange(5, dtype=np.int32)) == ([], [])


def test_mismatch_message_is_the_helpers():
    with pytest.raises(ValueError) as e:
        corun.group_concurrent_contiguous(np.arange(4), np.arange(3))
    assert str(e.value) == (
        "group_concurrent_contiguous requires equal-length src/dst index arrays, got 4 and 3"
    )


# --- documented differences -------------------------------------------------------


def test_int32_wrap_is_a_break():
    src = np.array([2147483647, -2147483648], dtype=np.int32)
    dst = np.array([0, 1], dtype=np.int32)
    assert corun.group_concurrent_contiguous(src, dst) == ([[2147483647], [-2147483648]], [[0], [1]])


def test_lists_and_other_integer_dtypes():
    assert corun.group_concurrent_contiguous([1, 2, 9], [3, 4, 5]) == ([[1, 2], [9]], [[3, 4], [5]])
    for dt in [np.int8, np.int16, np.uint8, np.uint16, ">i4", ">u8"]:
        src, dst = np.array([1, 2, 9], dtype=dt), np.array([3, 4, 5], dtype=dt)
        assert corun.group_concurrent_contiguous(src, dst) == ([[1, 2], [9]], [[3, 4], [5]])


def test_mixed_dtypes():
    src, dst = np.array([1, 2, 3], dtype=np.int32), np.array([7, 8, 10], dtype=np.uint64)
    assert corun.group_concurrent_contiguous(src, dst) == ([[1, 2], [3]], [[7, 8], [10]])
    s, d, n = corun.runs(src, dst)
    assert s.dtype == np.int32 and d.dtype == np.uint64, "starts keep each side's dtype"
    assert list(s) == [1, 3] and list(d) == [7, 10] and list(n) == [2, 1]


def test_mixed_dtypes_near_the_limits():
    # uint64 past int64 with a signed side: no lossy cast may join or split runs.
    top = 2**64 - 1
    u = np.array([top, 0, 2**63 - 1, 2**63, 2**63 + 1], dtype=np.uint64)
    for signed in (np.int32, np.int64):
        for other in ([0, 1, 2, 3, 4], [-5, -4, -3, -2, -1]):
            i = np.array(other, dtype=signed)
            for src, dst in ((u, i), (i, u)):
                got = corun.group_concurrent_contiguous(src, dst)
                assert got == reference(src, dst), (src, dst)
                s, d, n = corun.runs(src, dst)
                assert list(n) == [1, 1, 3] and s.dtype == src.dtype and d.dtype == dst.dtype
    # Addresses need the values: a common type where one exists, else a clear error.
    u = np.array([2**63, 2**63 + 1], dtype=np.uint64)
    sa, da, ln = corun.transfer_descriptors(u, np.array([0, 1], dtype=np.int32), [0], [0], [1])
    assert list(sa) == [2**63] and list(da) == [0] and list(ln) == [2]
    with pytest.raises(ValueError, match="no common index type"):
        corun.transfer_descriptors(u, np.array([-1, 0], dtype=np.int64), [0], [0], [1])


def test_non_contiguous_views():
    base = np.arange(20, dtype=np.int64)
    assert corun.group_concurrent_contiguous(base[::2], base[::2]) == reference(base[::2], base[::2])
    src, dst, lens = corun.runs(base[::-1], base[::-1])
    assert list(lens) == [1] * 20


@pytest.mark.parametrize("func", [corun.group_concurrent_contiguous, corun.runs])
def test_bad_input_is_a_clear_error(func):
    with pytest.raises(ValueError, match="1-D"):
        func(np.zeros((2, 3), dtype=np.int32), np.zeros((2, 3), dtype=np.int32))
    with pytest.raises(ValueError, match="1-D"):
        func(np.int32(3), np.int32(4))
    with pytest.raises(TypeError, match="integer"):
        func(np.array([1.0, 2.0]), np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="integer"):
        func(np.array(["a", "b"], dtype=object), np.array(["a", "b"], dtype=object))
    with pytest.raises(TypeError, match="integer"):
        func(np.array([True, False]), np.array([True, False]))


# --- runs -------------------------------------------------------------------------


def test_runs_arrays():
    src = np.array([10, 11, 12, 40, 41, 7], dtype=np.uint32)
    dst = np.array([3, 4, 5, 6, 7, 8], dtype=np.uint32)
    s, d, n = corun.runs(src, dst)
    assert s.dtype == np.uint32 and d.dtype == np.uint32 and n.dtype == np.int64
    assert (s.tolist(), d.tolist(), n.tolist()) == ([10, 40, 7], [3, 6, 8], [3, 2, 1])
    s, d, n = corun.runs(src, dst, max_len=2)
    assert (s.tolist(), n.tolist()) == ([10, 12, 40, 7], [2, 1, 2, 1])


def test_runs_errors():
    with pytest.raises(ValueError, match="equal-length"):
        corun.runs(np.arange(3), np.arange(0))
    for bad in [0, -1]:
        with pytest.raises(ValueError, match="max_len"):
            corun.runs(np.arange(3), np.arange(3), max_len=bad)
    s, d, n = corun.runs(np.array([], dtype=np.int32), np.array([], dtype=np.int32))
    assert len(s) == len(d) == len(n) == 0


# --- transfer_descriptors ---------------------------------------------------------


def test_descriptors_kv_layers():
    src = np.array([10, 11, 12, 40], dtype=np.int32)
    dst = np.array([0, 1, 2, 3], dtype=np.int32)
    page = 16384
    src_bases = [0x7F00_0000_0000 + (b << 30) for b in range(128)]
    dst_bases = np.array([0x5500_0000_0000 + (b << 30) for b in range(128)], dtype=np.uint64)
    item_lens = [page] * 128
    sa, da, ln = corun.transfer_descriptors(src, dst, src_bases, dst_bases, item_lens)
    assert sa.dtype == da.dtype == ln.dtype == np.uint64
    assert len(sa) == 256
    want = reference_descriptors(src, dst, src_bases, dst_bases.tolist(), item_lens)
    assert (sa.tolist(), da.tolist(), ln.tolist()) == want


def test_descriptors_cap_and_empty():
    src = np.arange(10, dtype=np.int64)
    sa, da, ln = corun.transfer_descriptors(src, src, [0], [0], [4096], max_bytes=3 * 4096 + 5)
    assert ln.tolist() == [3 * 4096] * 3 + [4096]
    e = np.array([], dtype=np.int32)
    out = corun.transfer_descriptors(e, e, [0], [0], [4096])
    assert all(len(x) == 0 for x in out)
    # One side empty is a length mismatch (as in runs and the Rust and C cores), both named.
    for a, b, want in [(src, e, "10 and 0"), (e, src, "0 and 10")]:
        with pytest.raises(ValueError, match=f"equal-length src/dst index arrays, got {want}"):
            corun.transfer_descriptors(a, b, [0], [0], [4096])


def test_device_ids_only_with_nixl_rows():
    src = np.arange(4, dtype=np.int64)
    local, remote = corun.transfer_descriptors(src, src, [0], [0], [8], form="nixl",
                                               src_dev_id=3, dst_dev_id=5)
    assert local[:, 2].tolist() == [3] and remote[:, 2].tolist() == [5]
    for form in ("arrays", "lists"):
        for name in ("src_dev_id", "dst_dev_id"):
            with pytest.raises(ValueError, match=f'{name} is only used with form="nixl"'):
                corun.transfer_descriptors(src, src, [0], [0], [8], form=form, **{name: 1})
        # None is the default, not a device id.
        corun.transfer_descriptors(src, src, [0], [0], [8], form=form, src_dev_id=None)


def test_descriptors_errors():
    src = np.array([5, -3, 4], dtype=np.int32)
    with pytest.raises(ValueError, match="negative index at position 1"):
        corun.transfer_descriptors(src, src, [0], [0], [4096])
    big = np.array([2**63], dtype=np.uint64)
    with pytest.raises(ValueError, match="overflow"):
        corun.transfer_descriptors(big, big, [0], [0], [4])
    with pytest.raises(ValueError, match="item length of 0"):
        corun.transfer_descriptors([1], [1], [0, 0], [0, 0], [8, 0])
    with pytest.raises(ValueError, match="smaller than one item"):
        corun.transfer_descriptors([1], [1], [0], [0], [4096], max_bytes=100)
    with pytest.raises(ValueError, match="one entry per layer"):
        corun.transfer_descriptors([1], [1], [0, 1], [0], [8])
    with pytest.raises(ValueError, match="0..2"):
        corun.transfer_descriptors([1], [1], [-1], [0], [8])
    with pytest.raises(ValueError, match="equal-length"):
        corun.transfer_descriptors([1, 2], [1], [0], [0], [8])
    with pytest.raises(ValueError, match="max_bytes"):
        corun.transfer_descriptors([1], [1], [0], [0], [8], max_bytes=0)
    with pytest.raises(TypeError):
        corun.transfer_descriptors([1.5], [1.5], [0], [0], [8])


# --- properties -------------------------------------------------------------------


@st.composite
def pairs(draw):
    """Arrays built from runs, starting near the dtype's limits or anywhere."""
    dtype = draw(st.sampled_from(DTYPES))
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    near = st.sampled_from([lo, lo + 1, -1 if lo < 0 else 0, 0, 1, hi - 70, hi - 1, hi])
    start = st.one_of(near, st.integers(lo, hi))
    s, d = draw(start), draw(start)
    src, dst = [], []
    for _ in range(draw(st.integers(0, 12))):
        n = draw(st.one_of(st.integers(1, 4), st.integers(1, 150)))
        for _ in range(n):
            src.append(s)
            dst.append(d)
            s, d = s + 1, d + 1
        jump = draw(st.sampled_from(["both", "src", "dst", "anchor", "none"]))
        if jump in ("both", "src"):
            s += draw(st.sampled_from([-1, 0, 2, 1000]))
        if jump in ("both", "dst"):
            d += draw(st.sampled_from([-1, 0, 2, -1000]))
        if jump == "anchor":
            s, d = draw(near), draw(near)
    wrap = lambda v: ((v - lo) % (hi - lo + 1)) + lo  # noqa: E731 (climbing past MAX wraps)
    return np.array([wrap(v) for v in src], dtype=dtype), np.array([wrap(v) for v in dst], dtype=dtype)


@settings(max_examples=300, deadline=None)
@given(pairs())
def test_groups_match_reference(p):
    src, dst = p
    assert corun.group_concurrent_contiguous(src, dst) == reference(src, dst)


@settings(max_examples=300, deadline=None)
@given(pairs(), st.one_of(st.none(), st.integers(1, 70)))
def test_runs_match_reference(p, max_len):
    src, dst = p
    s, d, n = corun.runs(src, dst, max_len=max_len)
    assert (s.tolist(), d.tolist(), n.tolist()) == reference_runs(src, dst, max_len)


@settings(max_examples=200, deadline=None)
@given(
    pairs(),
    st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 2**40), st.sampled_from([1, 64, 4096, 16384])), min_size=1, max_size=5),
    st.one_of(st.none(), st.integers(1, 10)),
)
def test_descriptors_match_reference(p, layers, cap_items):
    src, dst = p
    sb, db, il = (list(x) for x in zip(*layers))
    max_bytes = cap_items * max(il) if cap_items else None
    want = reference_descriptors(src, dst, sb, db, il, max_bytes)
    if want is None:
        with pytest.raises(ValueError):
            corun.transfer_descriptors(src, dst, sb, db, il, max_bytes=max_bytes)
    else:
        got = corun.transfer_descriptors(src, dst, sb, db, il, max_bytes=max_bytes)
        assert tuple(x.tolist() for x in got) == want
