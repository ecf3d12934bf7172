"""The pure-Python reference of corun's Python functions, written from the documented
semantics in exact integer arithmetic (Python ints): no numpy arithmetic, no corun."""


def reference(src, dst):
    """``group_concurrent_contiguous``: either side empty -> ([], []), else equal lengths,
    groups where both sides step by exactly +1."""
    s, d = [int(v) for v in src], [int(v) for v in dst]
    if len(s) == 0 or len(d) == 0:
        return [], []
    if len(s) != len(d):
        raise ValueError(
            "group_concurrent_contiguous requires equal-length src/dst index arrays, "
            f"got {len(s)} and {len(d)}"
        )
    gs, gd = [[s[0]]], [[d[0]]]
    for i in range(1, len(s)):
        if s[i] == s[i - 1] + 1 and d[i] == d[i - 1] + 1:
            gs[-1].append(s[i])
            gd[-1].append(d[i])
        else:
            gs.append([s[i]])
            gd.append([d[i]])
    return gs, gd


def reference_runs(src, dst, max_len=None):
    """``runs``: (src_starts, dst_starts, lengths) as lists, runs cut at ``max_len``."""
    starts_s, starts_d, lens = [], [], []
    for gs, gd in zip(*reference(src, dst)):
        for k in range(0, len(gs), max_len or len(gs)):
            starts_s.append(gs[k])
            starts_d.append(gd[k])
            lens.append(min(max_len or len(gs), len(gs) - k))
    return starts_s, starts_d, lens


def reference_descriptors(src, dst, src_bases, dst_bases, item_lens, max_bytes=None):
    """The per-layer loop consumers write, with the byte cap cutting whole items; None
    where corun must raise (a negative index, or an end past 2**64)."""
    sa, da, ln = [], [], []
    groups = list(zip(*reference(src, dst)))
    for sb, db, il in zip(src_bases, dst_bases, item_lens):
        per = max_bytes // il if max_bytes else None
        for gs, gd in groups:
            for k in range(0, len(gs), per or len(gs)):
                n = min(per or len(gs), len(gs) - k)
                sa.append(sb + gs[k] * il)
                da.append(db + gd[k] * il)
                ln.append(n * il)
    negative = any(v < 0 for g in groups for side in g for v in side)
    if negative or any(a + n > 2**64 for a, n in zip(sa + da, ln * 2)):
        return None
    return sa, da, ln
