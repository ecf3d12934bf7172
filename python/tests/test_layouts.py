"""Every array layout numpy hands out gives the result of a native, contiguous copy, and
the copy's result is the pure-Python reference's: for every public function, every
integer dtype, both byte orders, misaligned, strided (by any byte count), reversed,
record fields, overlapping and broadcast views (strategies.py draws them)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import corun
from reference import reference, reference_descriptors, reference_runs
from strategies import INT_DTYPES, LAYOUTS, SWAPPED, build, laid_out, layout_pairs, native_copy, outcome


def layers():
    return st.lists(
        st.tuples(st.integers(0, 2**40), st.integers(0, 2**40), st.sampled_from([1, 8, 4096])),
        min_size=1,
        max_size=3,
    )


@settings(max_examples=400, deadline=None)
@given(layout_pairs())
def test_groups_any_layout(p):
    src, dst = p
    got = outcome(corun.group_concurrent_contiguous, src, dst)
    assert got == outcome(corun.group_concurrent_contiguous, native_copy(src), native_copy(dst))
    assert got == reference(src.tolist(), dst.tolist())


@settings(max_examples=400, deadline=None)
@given(layout_pairs(), st.one_of(st.none(), st.integers(1, 9)))
def test_runs_any_layout(p, max_len):
    src, dst = p
    got = outcome(corun.runs, src, dst, max_len=max_len)
    copy = outcome(corun.runs, native_copy(src), native_copy(dst), max_len=max_len)
    # Values agree with the copy's; dtypes are each input's own.
    assert [v for _, v in got] == [v for _, v in copy]
    assert [d for d, _ in got] == [src.dtype.str, dst.dtype.str, np.dtype(np.int64).str]
    assert tuple(v for _, v in got) == reference_runs(src.tolist(), dst.tolist(), max_len)


@settings(max_examples=300, deadline=None)
@given(layout_pairs(), layers(), st.one_of(st.none(), st.integers(1, 5)), st.sampled_from(["arrays", "lists", "nixl"]))
def test_descriptors_any_layout(p, lay, cap, form):
    src, dst = p
    sb, db, il = (list(x) for x in zip(*lay))
    max_bytes = cap * max(il) if cap else None
    kw = dict(max_bytes=max_bytes, form=form)
    got = outcome(corun.transfer_descriptors, src, dst, sb, db, il, **kw)
    assert got == outcome(corun.transfer_descriptors, native_copy(src), native_copy(dst), sb, db, il, **kw)
    want = reference_descriptors(src.tolist(), dst.tolist(), sb, db, il, max_bytes)
    if len(src) == 0:
        want = ([], [], [])
    if want is None:
        assert got[0] is ValueError, got
    elif form == "nixl":
        local, remote = (v for _, v in got)
        assert [r[:2] for r in local] == [[a, n] for a, n in zip(want[0], want[2])]
        assert [r[:2] for r in remote] == [[a, n] for a, n in zip(want[1], want[2])]
    elif form == "lists":
        assert got == want
    else:
        assert tuple(v for _, v in got) == want


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.data())
def test_per_layer_values_any_layout(n_layers, data):
    # The per-layer bases and item lengths may be arrays of any layout too.
    src = np.array([3, 4, 5, 9], dtype=np.int32)
    dst = np.arange(4, dtype=np.int32)
    arrays = [data.draw(laid_out(n_layers, "u8")) for _ in range(3)]
    sb, db, il = arrays
    plain = [a.tolist() for a in arrays]
    assert outcome(corun.transfer_descriptors, src, dst, sb, db, il) == outcome(
        corun.transfer_descriptors, src, dst, *plain
    )


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("order", ["=", SWAPPED])
def test_every_layout_small_exhaustive(layout, dtype, order):
    # Every layout x dtype x byte order x misalignment x stride, on one run-structured input.
    vals = [3, 4, 5, 9, 10, 1][: 6 if np.iinfo(dtype).max > 10 else 0]
    for shift in range(8):
        for extra in range(4):
            a = build(vals, dtype, layout, order, shift, extra, b"\x03\x04\x05\x06")
            c = native_copy(a)
            want = reference(c.tolist(), c.tolist())
            assert corun.group_concurrent_contiguous(a, a) == want
            assert corun.group_concurrent_contiguous(a, c) == want
            s, d, n = corun.runs(a, c)
            assert (s.tolist(), d.tolist(), n.tolist()) == reference_runs(c.tolist(), c.tolist())
            assert s.dtype == a.dtype
            assert outcome(corun.transfer_descriptors, a, c, [0], [1 << 40], [4096]) == outcome(
                corun.transfer_descriptors, c, c, [0], [1 << 40], [4096]
            )


def test_issue_repros():
    # The misaligned record field and the offset buffer that gave wrong addresses.
    rec = np.zeros(4, dtype=[("flag", "u1"), ("page", "<i4")])
    rec["page"] = [3, 4, 5, 9]
    dst = np.arange(4, dtype=np.int32)
    assert corun.group_concurrent_contiguous(rec["page"], dst) == ([[3, 4, 5], [9]], [[0, 1, 2], [3]])
    assert corun.transfer_descriptors(rec["page"], dst, [0], [0], [4096])[0].tolist() == [12288, 36864]
    buf = b"\x00" + np.arange(10, dtype=np.int64).tobytes()
    a = np.frombuffer(buf, np.int64, count=10, offset=1)
    assert not a.flags.aligned
    s, d, n = corun.runs(a, a)
    assert (s.tolist(), d.tolist(), n.tolist()) == ([0], [0], [10])
    sa, da, ln = corun.transfer_descriptors(a, a, [0], [0], [8])
    assert (sa.tolist(), da.tolist(), ln.tolist()) == ([0], [0], [80])


@settings(max_examples=300, deadline=None)
@given(layout_pairs(), st.one_of(st.none(), st.integers(1, 9)), st.booleans())
def test_either_direction_any_layout(p, max_len, descend):
    # Descending runs (vLLM's recycled blocks), in any layout, against the reference.
    src, dst = p
    if descend:
        src, dst = src[::-1], dst[::-1]
    got = corun.runs(src, dst, max_len=max_len, direction="either")
    assert tuple(x.tolist() for x in got) == reference_runs(src.tolist(), dst.tolist(), max_len, "either")
    if len(src):
        want = reference_descriptors(src.tolist(), dst.tolist(), [0], [1 << 40], [64], None, "either")
        out = outcome(corun.transfer_descriptors, src, dst, [0], [1 << 40], [64], direction="either")
        if want is None:
            assert out[0] is ValueError
        else:
            assert tuple(v for _, v in out) == want


def test_either_direction_merges_descending_runs():
    src = np.array([99, 98, 97, 10, 11], np.int32)
    dst = np.array([9, 8, 7, 20, 21], np.int32)
    s, d, n = corun.runs(src, dst, direction="either")
    assert (s.tolist(), d.tolist(), n.tolist()) == ([99, 10], [9, 20], [3, 2])
    assert len(corun.runs(src, dst)[0]) == 4
    sa, da, ln = corun.transfer_descriptors(src, dst, [0], [1 << 20], [64], direction="either")
    assert (sa.tolist(), da.tolist(), ln.tolist()) == ([97 * 64, 10 * 64], [(1 << 20) + 7 * 64, (1 << 20) + 20 * 64], [192, 128])
    with pytest.raises(ValueError, match="direction must be"):
        corun.runs(src, dst, direction="down")
    # SGLang's helper keeps SGLang's semantics.
    assert corun.group_concurrent_contiguous(src, dst) == ([[99], [98], [97], [10, 11]], [[9], [8], [7], [20, 21]])


@settings(max_examples=200, deadline=None)
@given(st.permutations(list(range(12))), st.integers(-5, 5), laid_out(12, "i8"))
def test_sort_by_destination_any_layout(order, shift, src):
    dst = np.array(order, dtype=np.int64) + shift
    s, d = corun.sort_by_destination(src, dst)
    want = sorted(zip(src.tolist(), dst.tolist()), key=lambda p: p[1])
    assert list(zip(s.tolist(), d.tolist())) == want


def test_sort_by_destination_errors():
    with pytest.raises(ValueError, match=r"dst\[1\] and dst\[3\] are the same page"):
        corun.sort_by_destination([1, 2, 3, 4], [7, 5, 6, 5])
    with pytest.raises(ValueError, match="equal-length"):
        corun.sort_by_destination([1, 2], [1])


@settings(max_examples=400, deadline=None)
@given(layout_pairs(), st.one_of(st.none(), st.integers(1, 9)), st.sampled_from(["ascending", "either"]),
       st.booleans())
def test_count_runs_is_len_of_runs(p, max_len, direction, descend):
    # count_runs agrees with the reference's runs (and so with runs) in every layout, dtype
    # pair, direction and cap, and fails exactly where runs fails, with the same error.
    src, dst = p
    if descend:
        src, dst = src[::-1], dst[::-1]
    count = lambda *a, **k: (corun.count_runs(*a, **k),)  # noqa: E731 (outcome takes tuples)
    got = outcome(count, src, dst, max_len=max_len, direction=direction)
    runs = outcome(corun.runs, src, dst, max_len=max_len, direction=direction)
    if isinstance(runs[0], type):
        assert got == runs
        return
    want = reference_runs(src.tolist(), dst.tolist(), max_len, direction)
    assert got == (len(want[2]),) == (len(runs[2][1]),)
    assert got == outcome(count, native_copy(src), native_copy(dst), max_len=max_len, direction=direction)


def test_count_runs_errors_name_the_parameters():
    with pytest.raises(ValueError, match="count_runs requires equal-length src/dst index arrays, got 3 and 0"):
        corun.count_runs([1, 2, 3], [])
    with pytest.raises(ValueError, match="max_len"):
        corun.count_runs([1], [1], max_len=0)
    with pytest.raises(ValueError, match="direction"):
        corun.count_runs([1], [1], direction="down")
    assert corun.count_runs([], []) == 0
    assert corun.count_runs(np.array([2**64 - 1, 0], np.uint64), np.array([-1, 0], np.int64)) == 2
