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


def spans(src, dst, max_len=None, direction="ascending"):
    """(start, length) of every run: a run's first pair sets its way (up by 1 on both
    sides, or, with ``direction="either"``, down by 1 on both), it goes on while every pair
    steps that way, and a cut at ``max_len`` ends it (the next run starts afresh)."""
    s, d = [int(v) for v in src], [int(v) for v in dst]
    if len(s) != len(d):
        raise ValueError(f"lengths {len(s)} and {len(d)}")
    out, i = [], 0
    moves = lambda k, by: s[k + 1] == s[k] + by and d[k + 1] == d[k] + by  # noqa: E731
    while i < len(s):
        by = 1
        if direction == "either" and i + 1 < len(s) and not moves(i, 1) and moves(i, -1):
            by = -1
        end = i + 1
        while end < len(s) and (max_len is None or end - i < max_len) and moves(end - 1, by):
            end += 1
        out.append((i, end - i))
        i = end
    return out


def reference_runs(src, dst, max_len=None, direction="ascending"):
    """``runs``: (src_starts, dst_starts, lengths) as lists."""
    s, d = [int(v) for v in src], [int(v) for v in dst]
    got = spans(s, d, max_len, direction)
    return [s[a] for a, _ in got], [d[a] for a, _ in got], [n for _, n in got]


def reference_descriptors(src, dst, src_bases, dst_bases, item_lens, max_bytes=None,
                          direction="ascending"):
    """The per-layer loop consumers write, with the byte cap cutting whole items (a
    descending run's pieces start at their lowest page); None where corun must raise (a
    negative index, or an end past 2**64)."""
    sa, da, ln = [], [], []
    s, d = [int(v) for v in src], [int(v) for v in dst]
    groups = [(s[a:a + n], d[a:a + n]) for a, n in spans(s, d, None, direction)] if s and d else []
    for sb, db, il in zip(src_bases, dst_bases, item_lens):
        per = max_bytes // il if max_bytes else None
        for gs, gd in groups:
            for k in range(0, len(gs), per or len(gs)):
                n = min(per or len(gs), len(gs) - k)
                sa.append(sb + min(gs[k:k + n]) * il)
                da.append(db + min(gd[k:k + n]) * il)
                ln.append(n * il)
    negative = any(v < 0 for g in groups for side in g for v in side)
    if negative or any(a + n > 2**64 for a, n in zip(sa + da, ln * 2)):
        return None
    return sa, da, ln


def reference_place(first, free, direction="either"):
    """``place``: (chosen, rest, stats), from the rule in its docs, a page at a time.
    A page twice in ``first`` or ``free`` is a ``ValueError`` naming the list and the
    first two positions of the smallest such page. Runs of ``first`` (``spans`` of first
    with itself) longest first, ties by position; extents are the sets of consecutive ids
    in ``free``, wherever they stand; each run takes the top of the extent with the least
    room that holds it (the lowest ids on ties); runs that fit nowhere are filled piece
    by piece from the top of the extent with the most room (the lowest ids on ties); each
    piece is written in its run's direction; the allocator's own choice ``free[:n]``
    unless placing is strictly better."""
    f, fr = [int(v) for v in first], [int(v) for v in free]
    n = len(f)
    if len(fr) < n:
        raise ValueError(f"free holds {len(fr)} pages, fewer than the {n} the request needs")
    for name, pages in (("first", f), ("free", fr)):
        twice = sorted({v for v in pages if pages.count(v) > 1})
        if twice:
            at = [i for i, v in enumerate(pages) if v == twice[0]]
            raise ValueError(f"{name} holds one page at positions {at[0]} and {at[1]}: "
                             "a page can be handed out only once")
    runs = sorted(spans(f, f, direction=direction), key=lambda r: (-r[1], r[0]))
    bound = len(runs)
    chosen = [None] * n
    extents = []  # [lowest id, room]
    for v in sorted(fr):
        if extents and extents[-1][0] + extents[-1][1] == v:
            extents[-1][1] += 1
        else:
            extents.append([v, 1])

    def give(s, ln, e):
        low = e[0] + e[1] - ln
        ids = list(range(low, low + ln))
        if ln >= 2 and f[s + 1] < f[s]:
            ids.reverse()
        chosen[s:s + ln] = ids
        e[1] -= ln

    left = []
    for s, ln in runs:
        fits = [e for e in extents if e[1] >= ln]
        if fits:
            give(s, ln, min(fits, key=lambda e: (e[1], e[0])))
        else:
            left.append((s, ln))
    split = len(left)
    for s, ln in left:
        done = 0
        while done < ln:
            e = min(extents, key=lambda e: (-e[1], e[0]))
            m = min(e[1], ln - done)
            give(s + done, m, e)
            done += m
    placed = len(spans(f, chosen, direction=direction)) if n else 0
    own = len(spans(f, fr[:n], direction=direction))
    if placed >= own:
        return fr[:n], fr[n:], dict(bound=bound, placed=own, own=own, split=split, fallback=True)
    taken = set(chosen)
    rest = [p for p in fr if p not in taken]
    return chosen, rest, dict(bound=bound, placed=placed, own=own, split=split, fallback=False)


def reference_merge_blocks(offsets_local, offsets_remote, sizes, assume_sorted=False):
    """vLLM MoRIIO's ``merge_contiguous_blocks`` as its docstring-free code reads, in exact
    arithmetic: blocks sorted stably by local offset (unless ``assume_sorted`` or already
    sorted), each merged into the one before when both its offsets are the previous
    block's plus the previous block's size; a merged size is ``local[last] + size[last] -
    local[first]``."""
    loc, rem, siz = ([int(v) for v in x] for x in (offsets_local, offsets_remote, sizes))
    if not len(loc) == len(rem) == len(siz):
        raise ValueError("lengths differ")
    order = list(range(len(loc)))
    if not assume_sorted and any(loc[i] > loc[i + 1] for i in range(len(loc) - 1)):
        order.sort(key=lambda i: loc[i])  # Python's sort is stable
    out_l, out_r, out_s = [], [], []
    first = prev = None
    for i in order + [None]:
        joins = (i is not None and prev is not None and loc[i] - loc[prev] == siz[prev]
                 and rem[i] - rem[prev] == siz[prev])
        if first is not None and not joins:
            out_l.append(loc[first])
            out_r.append(rem[first])
            out_s.append(loc[prev] + siz[prev] - loc[first])
        if not joins:
            first = i
        prev = i
    return out_l, out_r, out_s
