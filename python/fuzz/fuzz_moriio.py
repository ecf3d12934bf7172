"""Coverage-guided fuzzing of ``corun.merge_contiguous_blocks`` on its page path (atheris).

Every input is page-shaped, as MoRIIO's transfers are: one positive size for every block
and every offset a multiple of it, so corun takes its page path (the page ids sorted by
``sort_by_destination``, then the concurrent runs; a shift for a power-of-two page, a
division for any other). The local and remote page ids are runs of random lengths going
up or down, in any order, from a narrow range (repeats and ties) or a wide one (near the
int64 limit for the page size); the remote side follows the local one by an offset, or
not. The result must equal the pure-Python reference of MoRIIO's rule
(``tests.reference.reference_merge_blocks``, exact ints); where the reference's merged
values leave int64 (numpy's would wrap), corun's is an ``OverflowError``.

    python python/fuzz/fuzz_moriio.py -max_total_time=60    # a campaign, from the root
    cd python && python -m fuzz.fuzz_moriio -atheris_runs=20000   # or as a module

Either way python/ is first on sys.path, so that ``tests.reference`` is importable (as
``fuzz.fuzz_layouts``).
"""

import sys

if not __package__:
    # Run as a file (``python python/fuzz/fuzz_moriio.py``, as the docs write it), python/fuzz/
    # is first on sys.path: python/ goes first instead, as ``-m`` from python/ has it,
    # so that the test kit is ``tests.*`` either way.
    import os.path

    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import atheris  # noqa: E402

with atheris.instrument_imports():
    import corun
    from tests.reference import reference_merge_blocks

I64 = (-(2**63), 2**63 - 1)
# Page sizes: powers of two (the shift), others (the division), 1 (ids are offsets).
PAGES = (1, 2, 16, 4096, 2**20, 3, 48, 1000, 2**31 - 1)


def page_ids(fdp, n, lo, hi):
    """``n`` ids in ``lo..=hi``: runs of 1 to 32 going up or down, each from a new start."""
    out = []
    while len(out) < n:
        start, k = fdp.ConsumeIntInRange(lo, hi), fdp.ConsumeIntInRange(1, 32)
        step = 1 if fdp.ConsumeBool() else -1
        out.extend(min(hi, max(lo, start + step * i)) for i in range(min(k, n - len(out))))
    return out


def remote_ids(fdp, local, lo, hi):
    """The remote ids: the local ones moved by one offset (every run merges), with some
    positions replaced (runs broken, on one side only), or independent runs."""
    if fdp.ConsumeBool():
        return page_ids(fdp, len(local), lo, hi)
    shift = fdp.ConsumeIntInRange(-64, 64)
    out = [min(hi, max(lo, v + shift)) for v in local]
    for _ in range(fdp.ConsumeIntInRange(0, 4)):
        if out:
            out[fdp.ConsumeIntInRange(0, len(out) - 1)] = fdp.ConsumeIntInRange(lo, hi)
    return out


def fits(result):
    return all(I64[0] <= v <= I64[1] for side in result for v in side)


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    page = PAGES[fdp.ConsumeIntInRange(0, len(PAGES) - 1)] if fdp.ConsumeBool() else None
    if page is None:
        page = fdp.ConsumeIntInRange(1, 2**40)
    n = fdp.ConsumeIntInRange(0, 300)
    widest = I64[1] // page
    if fdp.ConsumeBool():
        lo, hi = 0, fdp.ConsumeIntInRange(0, 2 * n + 8)  # narrow: repeats and ties
    else:
        lo, hi = -widest, widest  # wide: offsets up to the int64 limit
    local = page_ids(fdp, n, lo, hi)
    remote = remote_ids(fdp, local, lo, hi)
    assume_sorted = fdp.ConsumeIntInRange(0, 7) == 0
    args = ([v * page for v in local], [v * page for v in remote], [page] * n, assume_sorted)
    want = reference_merge_blocks(*args)
    try:
        got = corun.merge_contiguous_blocks(*args)
    except OverflowError:
        if fits(want):
            raise
        return
    if not fits(want):
        raise AssertionError(f"no OverflowError where the merge leaves int64: {args!r}")
    if tuple(got) != tuple(want):
        raise AssertionError(f"merge_contiguous_blocks{args!r}\n  corun:     {got!r}\n  reference: {want!r}")


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
