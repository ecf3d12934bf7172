"""SGLang's real code, loaded from the installed package's own files.

corun is measured and tested against SGLang 0.5.23 (``pip install --no-deps
sglang==0.5.23``), not a re-implementation. Importing its modules pulls in most of
sglang (torch among it), so the functions are taken from the source files by name
(``ast``) and compiled with the few names they use. The text is SGLang's, unchanged.

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
``ImportError`` naming the install command when it is not.
"""

import ast
import importlib.util
import os
from typing import List, Optional, Tuple

import numpy as np
import numpy.typing as npt

INSTALL = "pip install --no-deps sglang==0.5.23"


def _root():
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"SGLang is not installed: {INSTALL}")
    return os.path.join(list(spec.submodule_search_locations)[0], "srt", "disaggregation")


def available():
    try:
        _root()
        return True
    except ImportError:
        return False


def _source(path):
    with open(os.path.join(_root(), path)) as f:
        text = f.read()
    return text, ast.parse(text)


def _lines(text, node):
    """The source lines of `node`, dedented by its own column (it may be nested)."""
    return [line[node.col_offset:] for line in text.splitlines()[node.lineno - 1:node.end_lineno]]


def _compile(node, text, names):
    """Compiles the function `node` of `text` with `names` as its globals."""
    code = "\n".join(_lines(text, node))
    env = {"np": np, "npt": npt, "List": List, "Tuple": Tuple, "Optional": Optional, **names}
    exec(compile(code, f"<sglang {node.name}>", "exec"), env)
    return env[node.name]


def _find(tree, name, args=None):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            if args is None or [a.arg for a in node.args.args] == args:
                return node
    raise ImportError(f"SGLang's {name} not found: is it version 0.5.23? ({INSTALL})")


_cache = {}


def _load(key, make):
    if key not in _cache:
        _cache[key] = make()
    return _cache[key]


def group_concurrent_contiguous(src_indices, dst_indices):
    """SGLang's helper itself."""
    def make():
        text, tree = _source("common/utils.py")
        return _compile(_find(tree, "group_concurrent_contiguous"), text, {})
    return _load("helper", make)(src_indices, dst_indices)


def _mooncake():
    text, tree = _source("mooncake/conn.py")
    blocks = _compile(
        _find(tree, "set_transfer_blocks", ["src_ptr", "dst_ptr", "token_item_len", "groups"]),
        text, {})
    transfer = _compile(_find(tree, "_transfer_data"), text, {})
    return blocks, transfer


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
    text, tree = _source("nixl/conn.py")
    make_req_array = _compile(_find(tree, "make_req_array"), text, {})
    body = _find(tree, "_send_kvcache_generic").body
    names = lambda stmt: {t.id for t in getattr(stmt, "targets", []) if isinstance(t, ast.Name)}
    first = next(i for i, st in enumerate(body) if "prefill_starts" in names(st))
    last = next(i for i, st in enumerate(body) if isinstance(st, ast.For)
                and isinstance(st.iter, ast.Name) and st.iter.id == "layers_params")
    lines = []
    for st in body[first:last + 1]:
        lines.extend(_lines(text, st))
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
