"""The one loader of upstream code: SGLang's, vLLM's and the engines' own files, as the
installed wheels hold them, with one install hint.

corun is measured and tested against the serving stacks' real code, not a rewrite of it.
Importing their modules often pulls in most of the stack (torch, CUDA, the config
system), so a definition is taken from its source file by name (``ast``) and compiled
with the few globals it uses; the text is upstream's, unchanged. Where a file imports
little, ``load`` executes the whole file as a module instead.

- ``path(dist, relpath)``: a file inside an installed package (``dist`` is its import
  name: ``sglang``, ``vllm``).
- ``source``, ``find``, ``lines``, ``compile_def``: the pieces the loaders below are made
  of (``sglang_ref`` uses them for SGLang's backend loops).
- ``sglang_group()``: SGLang's ``group_concurrent_contiguous``.
- ``vllm_moriio_merge()``: vLLM MoRIIO's ``merge_contiguous_blocks``, callable as
  ``f(offsets_local, offsets_remote, sizes, assume_sorted=False)``.
- ``vllm_queue_classes()``: vLLM's ``(KVCacheBlock, FreeKVCacheBlockQueue)``.
- ``vllm_tests_package(where)``: vLLM's test tree from its sdist (``tests/``, which
  ``vllm_suite`` unpacks) importable as the package ``tests``, sys.path untouched.

Anything missing raises ``Missing``, whose message ends with ``HINT``. A command that
needs whole packages (an engine, a stack) calls ``require(command, names)`` first: one
line naming what is missing and the ``pip install`` that brings it, never a traceback
from deep inside a run.
"""

import ast
import functools
import importlib.util
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import numpy as np
import numpy.typing as npt

# The versions corun is tested with; --no-deps: their modules are read from the files,
# so the stacks' own dependencies (torch among them) are not needed.
HINT = ("pip install --no-deps sglang==0.5.23 vllm==0.33.0 "
        "mooncake-transfer-engine-non-cuda nixl-cu12")


# What the lab's commands import, by the name ``require`` takes: (the module imported,
# what it is, the install that brings it, whether to load it to check: the engines are
# native libraries whose own dependencies may be missing; the stacks are found, not
# imported, as importing them takes seconds).
PACKAGES = {
    "mooncake": ("mooncake.engine", "the Mooncake Transfer Engine",
                 "pip install mooncake-transfer-engine-non-cuda (it links Debian's libibverbs1)", True),
    "nixl": ("nixl_cu12", "NIXL", "pip install --no-deps nixl-cu12 (UCX: Debian's libucx-dev)", True),
    "vllm": ("vllm", "vLLM 0.33.0", "pip install vllm==0.33.0 (the full install, with torch)", False),
    "sglang": ("sglang", "SGLang 0.5.23", "pip install --no-deps sglang==0.5.23", False),
    "torch": ("torch", "PyTorch", "pip install torch (vllm==0.33.0 brings it)", False),
}


def absent(names):
    """``(name, why)`` for each of ``names`` (keys of ``PACKAGES``) this Python cannot
    use, in order: not installed, or (an engine) installed but not loading."""
    out = []
    for name in names:
        module, _, _, load = PACKAGES[name]
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package missing, or a broken one
            found = False
        if not found:
            out.append((name, "is not installed"))
            continue
        if load:
            try:
                importlib.import_module(module)
            except ImportError as e:  # a native library it links is missing
                out.append((name, f"does not load ({e})"))
    return out


def require(command, names):
    """Exits (status 2) with one message per package that ``command`` needs and this
    Python cannot use: what it is, its module, why, and the install that brings it."""
    gone = absent(names)
    if gone:
        lines = [f"{command}: {PACKAGES[n][1]} (module {PACKAGES[n][0]}) {why}: {PACKAGES[n][2]}"
                 for n, why in gone]
        print("\n".join(lines), file=sys.stderr, flush=True)
        sys.exit(2)


class Missing(RuntimeError):
    """Upstream code that is not installed, or not where the tested version has it."""

    def __init__(self, what):
        super().__init__(f"{what}; install the tested versions: {HINT}")


def path(dist, relpath):
    """The file ``relpath`` (``/``-separated) inside the installed package ``dist``."""
    try:
        spec = importlib.util.find_spec(dist)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise Missing(f"{dist} is not installed")
    out = os.path.join(list(spec.submodule_search_locations)[0], *relpath.split("/"))
    if not os.path.isfile(out):
        raise Missing(f"{dist} has no {relpath}: is it the tested version?")
    return out


def load(dist, relpath, name):
    """The file ``relpath`` of ``dist`` executed as a module named ``name`` (not entered
    in ``sys.modules``): for a file whose own imports are light where its package's
    ``__init__`` is not."""
    spec = importlib.util.spec_from_file_location(name, path(dist, relpath))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=None)
def source(dist, relpath):
    """``(text, tree)`` of a file of ``dist``: its text and its ``ast``."""
    with open(path(dist, relpath)) as f:
        text = f.read()
    return text, ast.parse(text)


def find(tree, name, args=None, where=""):
    """The first function or class named ``name`` in ``tree`` (nested ones included);
    with ``args``, a function whose parameters are exactly those names."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            if args is None or (isinstance(node, ast.FunctionDef)
                                and [a.arg for a in node.args.args] == args):
                return node
    raise Missing(f"{name} not found{' in ' + where if where else ''}: is it the tested version?")


def lines(text, node):
    """The source lines of ``node``, dedented by its own column (it may be nested in a
    class); a class's decorators included (``@dataclass`` makes the class), a function's
    not (a method's ``@torch...`` would need what the loader avoids importing)."""
    decorators = node.decorator_list if isinstance(node, ast.ClassDef) else []
    first = min([node.lineno] + [d.lineno for d in decorators])
    return [line[node.col_offset:] for line in text.splitlines()[first - 1:node.end_lineno]]


# What upstream's annotations and decorators name, for code compiled without its imports.
GLOBALS = {"np": np, "npt": npt, "List": List, "Tuple": Tuple, "Optional": Optional,
           "dataclass": dataclass, "field": field, "Iterable": Iterable,
           "Iterator": Iterator, "Sequence": Sequence}


def compile_def(text, node, env=None, label="upstream"):
    """Compiles the definition ``node`` of ``text`` with ``GLOBALS`` and ``env`` as its
    globals; returns what it defines."""
    scope = {"__name__": __name__, **GLOBALS, **(env or {})}
    exec(compile("\n".join(lines(text, node)), f"<{label} {node.name}>", "exec"), scope)
    return scope[node.name]


SGLANG_UTILS = "srt/disaggregation/common/utils.py"
MORIIO = "distributed/kv_transfer/kv_connector/v1/moriio/moriio_connector.py"
KV_CACHE_UTILS = "v1/core/kv_cache_utils.py"


@functools.lru_cache(maxsize=None)
def sglang_group():
    """SGLang 0.5.23's ``group_concurrent_contiguous`` (``srt/disaggregation/common/utils.py``)."""
    text, tree = source("sglang", SGLANG_UTILS)
    return compile_def(text, find(tree, "group_concurrent_contiguous", where=SGLANG_UTILS),
                       label="sglang")


@functools.lru_cache(maxsize=None)
def vllm_moriio_merge():
    """vLLM 0.33's MoRIIO ``merge_contiguous_blocks``: sorts the pairs by the local offset,
    merges neighbours adjacent on both sides. A method that never reads ``self``: returned
    bound to ``None``, as ``f(offsets_local, offsets_remote, sizes, assume_sorted=False)``."""
    text, tree = source("vllm", MORIIO)
    merge = compile_def(text, find(tree, "merge_contiguous_blocks", where=MORIIO), label="vllm")
    return functools.partial(merge, None)


@functools.lru_cache(maxsize=None)
def vllm_queue_classes():
    """vLLM 0.33's ``KVCacheBlock`` and ``FreeKVCacheBlockQueue`` (``v1/core/kv_cache_utils.py``)."""
    text, tree = source("vllm", KV_CACHE_UTILS)
    env = {"BlockHashWithGroupId": object}
    top = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    out = []
    for name in ("KVCacheBlock", "FreeKVCacheBlockQueue"):
        if name not in top:
            raise Missing(f"vLLM's {name} not found in {KV_CACHE_UTILS}: is it the tested version?")
        # One scope for both: the queue's annotations name the block class.
        env[name] = compile_def(text, top[name], env, label="vllm")
        out.append(env[name])
    return tuple(out)


def vllm_tests_package(where):
    """vLLM's test tree ``where`` (its ``tests/`` directory) as the package ``tests``: its
    modules import each other as ``tests.v1...``, and they are found through the package's
    own ``__path__``, so sys.path stays as it is and nothing on it can shadow them."""
    where = os.fspath(where)
    have = sys.modules.get("tests")
    if have is not None and list(getattr(have, "__path__", [])) == [where]:
        return have
    init = os.path.join(where, "__init__.py")
    if not os.path.isfile(init):
        raise Missing(f"vLLM's test tree has no {init}")
    spec = importlib.util.spec_from_file_location("tests", init, submodule_search_locations=[where])
    module = importlib.util.module_from_spec(spec)
    sys.modules["tests"] = module
    spec.loader.exec_module(module)
    return module
