"""SGLang's real code, loaded from the installed package's own files.

corun is measured and tested against SGLang 0.5.23 (``upstream.HINT``), not a
re-implementation. Importing its modules pulls in most of sglang (torch among it), so the
functions are taken from the source files by name (``ast``) and compiled with the few
names they use. The text is SGLang's, unchanged.

- ``group_concurrent_contiguous``: ``srt/disaggregation/common/utils.py``.
- ``mooncake_blocks(groups, layers)``: the Mooncake backend's per-layer loop
  (``set_transfer_blocks`` in ``srt/disaggregation/mooncake/conn.py``, the variant that
  takes the groups), then ``_transfer_data``'s ``zip`` into the three lists that
  ``batch_transfer_sync`` takes.
- ``nixl_reqs(groups, layers, src_dev, dst_dev)``: the NIXL backend's descriptor arrays
  (the numpy loop and ``make_req_array`` of ``_send_kvcache_generic`` in
  ``srt/disaggregation/nixl/conn.py``), the local and remote Nx3 ``[addr, len, dev]``
  uint64 arrays that ``get_xfer_descs`` takes.

``available()`` says whether sglang is installed; every other function raises
``upstream.Missing`` (its message ends with the install line) when it is not. The files
are read by ``upstream``, the one loader of upstream code.
"""

import ast

import numpy as np

import upstream

# SGLang's files, under its package.
UTILS = upstream.SGLANG_UTILS
MOONCAKE = "srt/disaggregation/mooncake/conn.py"
NIXL = "srt/disaggregation/nixl/conn.py"


def available():
    """Whether SGLang's files are installed (``upstream.Missing`` says how if not)."""
    try:
        upstream.path("sglang", UTILS)
        return True
    except upstream.Missing:
        return False


def _def(relpath, name, args=None):
    text, tree = upstream.source("sglang", relpath)
    return upstream.compile_def(text, upstream.find(tree, name, args, where=relpath), label="sglang")


_cache = {}


def _load(key, make):
    if key not in _cache:
        _cache[key] = make()
    return _cache[key]


def group_concurrent_contiguous(src_indices, dst_indices):
    """SGLang's helper itself."""
    return upstream.sglang_group()(src_indices, dst_indices)


def _mooncake():
    blocks = _def(MOONCAKE, "set_transfer_blocks", ["src_ptr", "dst_ptr", "token_item_len", "groups"])
    return blocks, _def(MOONCAKE, "_transfer_data")


class _Capture:
    """Stands in for the engine: `_transfer_data` hands it the three lists."""

    def batch_transfer_sync(self, session_id, src_addrs, dst_addrs, lengths):
        return src_addrs, dst_addrs, lengths


class _Self:
    engine = _Capture()


def mooncake_blocks(groups, layers):
    """The Mooncake backend's descriptor path for ``groups`` (the helper's result) and
    ``layers`` (``(src_ptr, dst_ptr, item_len)`` per layer buffer): every layer's blocks
    through ``set_transfer_blocks``, then ``_transfer_data``'s lists. Returns
    ``(src_addrs, dst_addrs, lengths)``, lists of Python ints."""
    blocks, transfer = _load("mooncake", _mooncake)
    transfer_blocks = []
    for src_ptr, dst_ptr, item_len in layers:
        transfer_blocks.extend(blocks(src_ptr, dst_ptr, item_len, groups))
    if not transfer_blocks:
        return [], [], []
    return transfer(_Self(), "session", transfer_blocks)


def _nixl():
    """``make_req_array`` and the statements of ``_send_kvcache_generic`` that turn the
    groups into per-layer address and length arrays (from ``prefill_starts = ...``
    through the ``for ... in layers_params`` loop), compiled as they stand."""
    text, tree = upstream.source("sglang", NIXL)
    make_req_array = _def(NIXL, "make_req_array")
    body = upstream.find(tree, "_send_kvcache_generic", where=NIXL).body
    names = lambda stmt: {t.id for t in getattr(stmt, "targets", []) if isinstance(t, ast.Name)}
    first = next(i for i, st in enumerate(body) if "prefill_starts" in names(st))
    last = next(i for i, st in enumerate(body) if isinstance(st, ast.For)
                and isinstance(st.iter, ast.Name) and st.iter.id == "layers_params")
    lines = []
    for st in body[first:last + 1]:
        lines.extend(upstream.lines(text, st))
    loop = compile("\n".join(lines), "<sglang _send_kvcache_generic>", "exec")
    return make_req_array, loop


def nixl_reqs(groups, layers, src_dev=0, dst_dev=0):
    """The NIXL backend's non-prepped descriptor arrays for ``groups`` and ``layers``:
    ``_send_kvcache_generic``'s per-layer numpy loop (its pointers and item lengths as
    ``np.uint64``, as it converts them), then its ``make_req_array``. Returns the local
    and remote Nx3 uint64 arrays."""
    make_req_array, loop = _load("nixl", _nixl)
    env = {
        "np": np,
        "prefill_kv_blocks": groups[0],
        "dst_kv_blocks": groups[1],
        "layers_params": [tuple(np.uint64(x) for x in layer) for layer in layers],
        "src_addrs": [], "src_lens": [], "dst_addrs": [], "dst_lens": [],
    }
    exec(loop, env)
    return (make_req_array(env["src_addrs"], env["src_lens"], src_dev),
            make_req_array(env["dst_addrs"], env["dst_lens"], dst_dev))
