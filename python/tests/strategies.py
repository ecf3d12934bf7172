"""Hypothesis strategies over index *values* and array *layouts*.

Values come from two generators: runs (starts near the dtype's limits, climbing and
jumping, so the interesting breaks are common) and free draws from a small alphabet at
the dtype's limits (which runs alone rarely make: a break by -1, a repeat, MAX then MIN).

Layouts are every way numpy hands out a 1-D integer array: contiguous, read-only,
misaligned (a buffer at an odd byte offset), strided by a byte count that need not be a
multiple of the item size, reversed (negative strides), a field of a packed record,
overlapping `as_strided` views, broadcast (stride 0), and either byte order. A layout
changes where the bytes are, never what the array holds: the oracle for every layout is
the same function on a native, contiguous copy (`native_copy`).
"""

import sys

import numpy as np
from hypothesis import strategies as st

INT_DTYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]
LAYOUTS = [
    "contiguous",
    "readonly",
    "offset",
    "strided",
    "reversed",
    "record",
    "overlapping",
    "broadcast",
]
SWAPPED = ">" if sys.byteorder == "little" else "<"


def alphabet(dtype):
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    picks = (lo, lo + 1, lo + 2, -2, -1, 0, 1, 2, 3, 4, hi - 2, hi - 1, hi)
    return sorted({v for v in picks if lo <= v <= hi})


@st.composite
def values(draw, dtype, n):
    """`n` values of `dtype`: from the alphabet, or built from runs."""
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    if draw(st.booleans()):
        return draw(st.lists(st.sampled_from(alphabet(dtype)), min_size=n, max_size=n))
    near = st.sampled_from(alphabet(dtype))
    v, out = draw(st.one_of(near, st.integers(lo, hi))), []
    while len(out) < n:
        for _ in range(draw(st.integers(1, 9))):
            out.append(lo + (v - lo) % (hi - lo + 1))  # climbing past MAX wraps
            v += 1
        jump = draw(st.sampled_from(["none", "step", "anchor"]))
        if jump == "step":
            v += draw(st.sampled_from([-2, -1, 1, 5]))
        elif jump == "anchor":
            v = draw(near)
    return out[:n]


def build(vals, dtype, layout, byteorder="=", shift=0, extra=0, seed_bytes=b""):
    """An array holding `vals` (or, for `overlapping`, bytes from `seed_bytes`) in
    `layout`. `shift` is a byte offset (1..7 misaligns), `extra` bytes are added to the
    stride of strided layouts (so it need not be a multiple of the item size)."""
    dt = np.dtype(dtype).newbyteorder(byteorder)
    n, size = len(vals), dt.itemsize
    if layout == "contiguous":
        return np.array(vals, dtype=dt)
    if layout == "readonly":
        a = np.array(vals, dtype=dt)
        a.setflags(write=False)
        return a
    if layout == "offset":
        a = np.ndarray((n,), dt, buffer=bytearray(shift + n * size + 1), offset=shift)
        a[:] = vals
        return a
    if layout in ("strided", "reversed"):
        stride = 2 * size + extra
        room = shift + max(n - 1, 0) * stride + size
        if layout == "strided":
            a = np.ndarray((n,), dt, bytearray(room), offset=shift, strides=(stride,))
        else:
            first = shift + max(n - 1, 0) * stride
            a = np.ndarray((n,), dt, bytearray(room), offset=first, strides=(-stride,))
        a[:] = vals
        return a
    if layout == "record":
        rec = np.zeros(n, dtype=np.dtype([("flag", "u1"), ("page", dt), ("tail", "u1", shift % 3)]))
        rec["page"] = vals
        return rec["page"]
    if layout == "overlapping":
        # Items that share bytes: the contents are whatever the bytes say.
        stride = 1 + extra % size
        need = shift + max(n - 1, 0) * stride + size
        raw = np.frombuffer((seed_bytes * (need // max(len(seed_bytes), 1) + 1))[:need].ljust(need, b"\x01"), "u1")
        return np.lib.stride_tricks.as_strided(
            np.ndarray((1,), dt, raw, offset=shift), shape=(n,), strides=(stride,), writeable=False
        )
    if layout == "broadcast":
        return np.broadcast_to(np.array(vals[:1] or [0], dtype=dt), (n,))
    raise ValueError(layout)


@st.composite
def laid_out(draw, n, dtype=None):
    """One index array of length `n` in a drawn dtype, byte order and layout."""
    dtype = dtype or draw(st.sampled_from(INT_DTYPES))
    vals = draw(values(dtype, n))
    layout = draw(st.sampled_from(LAYOUTS))
    order = draw(st.sampled_from(["=", SWAPPED]))
    shift, extra = draw(st.integers(0, 7)), draw(st.integers(0, 3))
    seed = draw(st.binary(min_size=1, max_size=16))
    return build(vals, dtype, layout, order, shift, extra, seed)


@st.composite
def layout_pairs(draw, max_len=40):
    """`(src, dst)` of one length, each in a layout of its own, of one dtype or two."""
    n = draw(st.one_of(st.integers(0, 3), st.integers(0, max_len)))
    dtype = draw(st.sampled_from(INT_DTYPES))
    other = draw(st.sampled_from([dtype, *INT_DTYPES]))
    return draw(laid_out(n, dtype)), draw(laid_out(n, other))


def native_copy(a):
    """The oracle's input: the same values, native byte order, aligned and contiguous."""
    c = np.array(a, dtype=a.dtype.newbyteorder("="), order="C", copy=True)
    assert c.flags.aligned and c.flags.c_contiguous
    return c


def outcome(f, *args, **kwargs):
    """What a call gives, in a form two calls compare by: its value with arrays as (dtype,
    list), or its exception's type and message. The one differential rule of the layout
    tests and the atheris target: `outcome` on a layout equals `outcome` on its native copy."""
    try:
        out = f(*args, **kwargs)
    except (ValueError, TypeError, MemoryError) as e:
        return type(e), str(e)
    return tuple((x.dtype.str, x.tolist()) if isinstance(x, np.ndarray) else x for x in out)
