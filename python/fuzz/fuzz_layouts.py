"""Coverage-guided fuzzing of the Python API over array layouts and values (atheris).

Each input picks, for src and dst, a dtype, a byte order, a layout (strategies.LAYOUTS:
misaligned, strided by any byte count, reversed, record field, overlapping, broadcast...)
and values (drawn near the dtype's limits, or raw), then calls every public function and
checks the one differential rule of tests/test_layouts.py: the result on that layout is
the result on a native contiguous copy, and that is the pure-Python reference's.

    python python/fuzz/fuzz_layouts.py -max_total_time=60    # a campaign, from the root
    cd python && python -m fuzz.fuzz_layouts -atheris_runs=20000   # or as a module

Either way python/ is first on sys.path, and the test kit it shares with
tests/test_layouts.py is imported as ``tests.reference`` and ``tests.strategies``.

Coverage: atheris instruments the Python it imports (this harness, the layout builder,
the reference); corun's own branches are the Rust ones, fuzzed by cargo-fuzz (fuzz/).
"""

import sys

if not __package__:
    # Run as a file (``python python/fuzz/fuzz_layouts.py``, as the docs write it), python/fuzz/
    # is first on sys.path: python/ goes first instead, as ``-m`` from python/ has it,
    # so that the test kit is ``tests.*`` either way.
    import os.path

    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import atheris  # noqa: E402

with atheris.instrument_imports():
    import numpy as np
    import corun
    from tests.reference import reference, reference_descriptors, reference_runs
    from tests.strategies import INT_DTYPES, LAYOUTS, SWAPPED, alphabet, build, native_copy, outcome


def array(fdp, n, dtype):
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    letters = alphabet(dtype)
    vals, v = [], fdp.ConsumeIntInRange(lo, hi)
    for _ in range(n):
        mode = fdp.ConsumeIntInRange(0, 3)
        if mode == 0:
            v = letters[fdp.ConsumeIntInRange(0, len(letters) - 1)]
        elif mode == 1:
            v = fdp.ConsumeIntInRange(lo, hi)
        else:  # continue the run (wrapping past MAX, as stored values do)
            v = lo + (v + 1 - lo) % (hi - lo + 1)
        vals.append(v)
    layout = LAYOUTS[fdp.ConsumeIntInRange(0, len(LAYOUTS) - 1)]
    order = "=" if fdp.ConsumeBool() else SWAPPED
    shift, extra = fdp.ConsumeIntInRange(0, 7), fdp.ConsumeIntInRange(0, 3)
    return build(vals, dtype, layout, order, shift, extra, fdp.ConsumeBytes(8) or b"\x01")


def one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    n = fdp.ConsumeIntInRange(0, 70)
    src = array(fdp, n, INT_DTYPES[fdp.ConsumeIntInRange(0, len(INT_DTYPES) - 1)])
    dst = array(fdp, n, INT_DTYPES[fdp.ConsumeIntInRange(0, len(INT_DTYPES) - 1)])
    cs, cd = native_copy(src), native_copy(dst)
    ls, ld = src.tolist(), dst.tolist()

    got = outcome(corun.group_concurrent_contiguous, src, dst)
    assert got == outcome(corun.group_concurrent_contiguous, cs, cd)
    assert got == reference(ls, ld), (got, ls, ld)

    max_len = fdp.ConsumeIntInRange(0, 9) or None
    got = outcome(corun.runs, src, dst, max_len=max_len)
    assert [v for _, v in got] == [v for _, v in outcome(corun.runs, cs, cd, max_len=max_len)]
    assert tuple(v for _, v in got) == reference_runs(ls, ld, max_len)
    assert got[0][0] == src.dtype.str and got[1][0] == dst.dtype.str

    layers = fdp.ConsumeIntInRange(1, 3)
    sb = [fdp.ConsumeIntInRange(0, 2**64 - 1) if fdp.ConsumeBool() else 0 for _ in range(layers)]
    db = [fdp.ConsumeIntInRange(0, 2**40) for _ in range(layers)]
    il = [fdp.ConsumeIntInRange(1, 4096) for _ in range(layers)]
    cap = fdp.ConsumeIntInRange(0, 5) * max(il) or None
    form = ["arrays", "lists", "nixl"][fdp.ConsumeIntInRange(0, 2)]
    got = outcome(corun.transfer_descriptors, src, dst, sb, db, il, max_bytes=cap, form=form)
    assert got == outcome(corun.transfer_descriptors, cs, cd, sb, db, il, max_bytes=cap, form=form)
    want = reference_descriptors(ls, ld, sb, db, il, cap) if n else ([], [], [])
    if want is None:
        assert got[0] is ValueError, got
    elif form == "arrays":
        assert tuple(v for _, v in got) == want
    elif form == "lists":
        assert got == want


def main():
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
