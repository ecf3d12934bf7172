"""``corun.merge_contiguous_blocks`` (the drop-in for vLLM MoRIIO's block merge) against
the pure-Python reference everywhere, and against vLLM 0.33's own function (taken from
the installed wheel's ``moriio_connector.py``, as ``bench.py`` takes it) wherever numpy's
int64 arithmetic does not wrap: page-shaped requests in shuffled and descending runs,
several sizes, repeated offsets, the limits of int64, every small case, and every input
layout the function reads.

The vLLM comparison is skipped when vllm is not installed (``pip install --no-deps
vllm==0.33.0``), unless ``CORUN_REQUIRE_ENGINES=1`` (as in CI), which makes it a failure.
"""

import itertools
import os
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import corun
from corun import vllm_plugin
from reference import reference_merge_blocks as reference

import pools
import upstream

try:
    vllm_merge = upstream.vllm_moriio_merge()
except upstream.Missing:
    if os.environ.get("CORUN_REQUIRE_ENGINES") == "1":
        raise
    vllm_merge = None

needs_vllm = pytest.mark.skipif(vllm_merge is None, reason=upstream.HINT)
merge = corun.merge_contiguous_blocks
I64 = (-(2**63), 2**63 - 1)


def check(local, remote, sizes, assume_sorted=False, against_vllm=True):
    got = merge(local, remote, sizes, assume_sorted)
    assert got == reference(local, remote, sizes, assume_sorted)
    assert all(type(v) is int for column in got for v in column)
    if against_vllm and vllm_merge is not None:
        assert got == vllm_merge(local, remote, sizes, assume_sorted)
    return got


@st.composite
def page_requests(draw):
    """MoRIIO's own shape: blocks of one page size at multiples of it, both sides' ids in
    runs, the runs shuffled and some read backwards; sometimes a local block twice."""
    page = draw(st.sampled_from([1, 2, 4096, 2**20]))
    n = draw(st.integers(0, 200))
    breaks = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    brk = rng.random(n) < breaks
    local = (np.cumsum(np.where(brk, rng.integers(2, 50, n), 1)) + 3).tolist()
    remote = (np.cumsum(np.where(brk, rng.integers(-50, 50, n), 1)) + 100).tolist()
    starts = [0] + [i for i in range(1, n) if brk[i]]
    runs = [list(range(a, b)) for a, b in zip(starts, starts[1:] + [n]) if a < b]
    rng.shuffle(runs)
    order = [i for k, r in enumerate(runs) for i in (r[::-1] if k % 2 else r)]
    local = [local[i] * page for i in order]
    remote = [remote[i] * page for i in order]
    if n > 1 and draw(st.booleans()):
        local[draw(st.integers(0, n - 1))] = local[draw(st.integers(0, n - 1))]
    return local, remote, [page] * n


@needs_vllm
@settings(max_examples=400, deadline=None)
@given(page_requests(), st.booleans())
def test_pages_match_vllm(request, assume_sorted):
    check(*request, assume_sorted)


@needs_vllm
@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(-40, 40), st.integers(-40, 40), st.sampled_from([-2, 0, 1, 2, 3, 8])),
                max_size=60), st.booleans())
def test_any_sizes_match_vllm(blocks, assume_sorted):
    """Several sizes, zero and negative ones, overlaps and repeats: the rule as written."""
    local, remote, sizes = ([b[k] for b in blocks] for k in range(3))
    check(local, remote, sizes, assume_sorted)


LIMITS = sorted({I64[0], I64[0] + 1, -1, 0, 1, 2, 2**62, I64[1] - 1, I64[1]})


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(LIMITS), st.sampled_from(LIMITS), st.sampled_from(LIMITS)),
                max_size=12), st.booleans())
def test_limits_match_reference(blocks, assume_sorted):
    """Values at int64's limits: exact where numpy's int64 would wrap, or an
    OverflowError where a merged size leaves int64."""
    local, remote, sizes = ([b[k] for b in blocks] for k in range(3))
    want = reference(local, remote, sizes, assume_sorted)
    if all(I64[0] <= v <= I64[1] for v in want[2]):
        assert merge(local, remote, sizes, assume_sorted) == want
    else:
        with pytest.raises(OverflowError, match="int64"):
            merge(local, remote, sizes, assume_sorted)


@needs_vllm
def test_every_small_case_matches_vllm():
    """Every request of up to 3 blocks over a small alphabet of offsets and sizes."""
    offsets, sizes = [0, 1, 2, 3], [1, 2]
    for n in range(4):
        for local in itertools.product(offsets, repeat=n):
            for remote in itertools.product(offsets, repeat=n):
                for size in itertools.product(sizes, repeat=n) if n < 3 else [(1,) * n]:
                    for assume_sorted in (False, True):
                        check(list(local), list(remote), list(size), assume_sorted)


@needs_vllm
@pytest.mark.parametrize("breaks", [0.0, 0.05, 1.0])
def test_bench_inputs_match_vllm(breaks):
    """bench.py's order-free row: 16,384 blocks as MoRIIO is handed them."""
    check(*pools.make_orderfree(16384, breaks))


def test_layouts():
    """Lists, tuples, generators, numpy arrays and numpy scalars in lists read alike;
    what comes out is lists of Python ints."""
    local, remote, sizes = [8, 4, 0, 12], [108, 104, 100, 200], [4, 4, 4, 4]
    want = reference(local, remote, sizes)
    assert want == ([0, 12], [100, 200], [12, 4])
    for wrap in (list, tuple, iter, np.array, lambda v: np.array(v, dtype=np.int32),
                 lambda v: [np.int64(x) for x in v], lambda v: np.array(v)[::-1][::-1]):
        got = merge(wrap(local), wrap(remote), wrap(sizes))
        assert got == want
        assert all(type(v) is int for column in got for v in column)


def test_errors_name_the_parameters():
    with pytest.raises(ValueError, match="offsets_local has 2 items, offsets_remote 1, sizes 2"):
        merge([0, 1], [0], [1, 1])
    with pytest.raises(OverflowError, match=r"offsets_remote\[0\] = 9223372036854775808 does not fit int64"):
        merge([0], [2**63], [1])
    with pytest.raises(TypeError, match=r"offsets_local\[0\] = 0.5 is not an int"):
        merge([0.5], [0], [1])
    with pytest.raises(TypeError, match=r"sizes\[1\] = 'a' is not an int"):
        merge([0, 1], [0, 1], [1, "a"])
    with pytest.raises(TypeError, match="offsets_local must be a list or an iterable of ints, got NoneType"):
        merge(None, [0], [1])
    with pytest.raises(TypeError, match="offsets_remote must be a list or an iterable of ints, got int"):
        merge([0], 5, [1])
    assert merge([], [], []) == ([], [], [])


def test_input_lists_are_left_as_they_were():
    local, remote, sizes = [12, 8, 4], [2, 1, 0], [4, 4, 4]
    kept = (list(local), list(remote), list(sizes))
    assert merge(local, remote, sizes) == ([4, 8, 12], [0, 1, 2], [4, 4, 4])
    assert (local, remote, sizes) == kept


# --- through the plugin: vLLM's answer on every input class ------------------------------


def answer(f, *args):
    """What ``f(*args)`` gives: its result, or its exception's type."""
    try:
        return ("value", f(*args))
    except Exception as e:  # the exception vLLM raises is part of its answer
        return ("raises", type(e))


class IntLike:
    """An object with ``__int__`` only (vLLM's ``np.fromiter`` takes it, corun does not)."""

    def __init__(self, v):
        self.v = v

    def __int__(self):
        return self.v


def gen(values):
    return (v for v in values)


def build(case):
    """The case's arguments, afresh (a generator is used up by one call)."""
    return tuple(gen(v) if case == "generators" else v for v in CLASSES[case])


# Each class of input issue 37 lists: (local, remote, sizes[, assume_sorted]).
CLASSES = {
    "floats": ([0.0, 1.0], [5.0, 6.0], [1.0, 1.0]),
    "np.float64": ([np.float64(8), np.float64(0)], [np.float64(9), np.float64(1)], [4, 4]),
    "np.bool_": ([np.True_, np.False_], [np.False_, np.True_], [np.True_, np.True_]),
    "digit strings": (["0", "4"], ["8", "12"], ["4", "4"]),
    "Decimal": ([Decimal(0), Decimal(4)], [Decimal(8), Decimal(12)], [Decimal(4), Decimal(4)]),
    "Fraction": ([Fraction(0), Fraction(4)], [Fraction(8), Fraction(12)], [Fraction(4), Fraction(4)]),
    "__int__": ([IntLike(0), IntLike(4)], [IntLike(8), IntLike(12)], [IntLike(4), IntLike(4)]),
    "empty local": ([], [1], [2]),
    "lengths differ": ([0, 1], [0], [1, 1]),
    "wraps at +2^63": ([2**63 - 1, -(2**63)], [2**63 - 1, -(2**63)], [-1, -1]),
    "wraps, merged": ([-(2**62) - 1, 2**62], [-(2**62) - 1, 2**62], [2**63 - 2**62 - 1 + 2**62 - (2**64 - 2**63), 1]),
    "near -2^63": ([-(2**63), -(2**63) + 1], [-(2**63) + 5, -(2**63) + 6], [1, 1]),
    "outside int64": ([2**63], [0], [1]),
    "generators": ([0, 4], [8, 12], [4, 4]),  # each list read through a generator
    "tuples": ((0, 4), (8, 12), (4, 4)),
    "arrays": (np.array([4, 0]), np.array([12, 8]), np.array([4, 4])),
    "float arrays": (np.array([4.5, 0.0]), np.array([12.0, 8.0]), np.array([4.0, 4.0])),
    "assume_sorted=1": ([4, 0], [12, 8], [4, 4], 1),
    "ints": ([12, 8, 4], [2, 1, 0], [4, 4, 4]),
}


@needs_vllm
@pytest.mark.parametrize("case", sorted(CLASSES))
def test_the_plugin_gives_vllms_answer_on_every_input_class(case):
    """Through the plugin's MoRIIO merge (the function its patched method calls), each
    input class gives vLLM's own answer, exactly: values, types, exceptions."""
    def own(worker, *args):
        return vllm_merge(*args)

    want = answer(vllm_merge, *build(case))
    got = answer(lambda *a: vllm_plugin._moriio_merge(own, None, *a), *build(case))
    assert got == want, (case, got, want)
    if want[0] == "value":
        assert [[type(v) for v in col] for col in got[1]] == [[type(v) for v in col] for col in want[1]]


# Where corun.merge_contiguous_blocks itself answers otherwise than vLLM's (python/README
# lists each): it takes only ints (and objects with __index__), bool flags, lists or
# iterables, and answers in exact arithmetic.
CORUN_DIFFERS = {"floats", "np.float64", "np.bool_", "digit strings", "Decimal", "Fraction", "__int__",
                 "float arrays", "assume_sorted=1", "empty local", "generators", "wraps at +2^63"}


@needs_vllm
@pytest.mark.parametrize("case", sorted(CLASSES))
def test_coruns_own_differences_from_vllm_are_the_documented_ones(case):
    same = answer(merge, *build(case)) == answer(vllm_merge, *build(case))
    assert same == (case not in CORUN_DIFFERS), case


def test_the_plugin_routes_to_corun_only_what_corun_reads_as_vllm_does():
    """corun answers exact lists of ints in range; it is vLLM's function for the rest."""
    seen = []

    def own(worker, *args):
        seen.append(args)
        return "vllm's"

    vllm_plugin.reset_counters()
    assert vllm_plugin._moriio_merge(own, None, [8, 4, 0], [9, 5, 1], [4, 4, 4]) == ([0], [1], [12])
    for case in ("floats", "digit strings", "empty local", "wraps at +2^63", "tuples", "assume_sorted=1"):
        assert vllm_plugin._moriio_merge(own, None, *CLASSES[case]) == "vllm's", case
    got = vllm_plugin.counters()
    assert (got["moriio_calls"], got["moriio_vllm"], len(seen)) == (1, 6, 6)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(LIMITS), st.sampled_from(LIMITS), st.sampled_from(LIMITS)),
                min_size=1, max_size=8), st.booleans())
def test_wrapping_inputs_through_the_plugin_are_vllms(blocks, assume_sorted):
    """At int64's limits, where vLLM's numpy wraps: through the plugin, vLLM's answer."""
    if vllm_merge is None:
        pytest.skip(upstream.HINT)
    local, remote, sizes = ([b[k] for b in blocks] for k in range(3))
    want = answer(vllm_merge, local, remote, sizes, assume_sorted)
    got = answer(lambda *a: vllm_plugin._moriio_merge(lambda w, *x: vllm_merge(*x), None, *a),
                 local, remote, sizes, assume_sorted)
    assert got == want
