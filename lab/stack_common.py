"""What the whole-stack end-to-end runs share (``lab/stack_e2e.py --stack vllm|sglang``).

- :func:`parser`: the options every stack takes (``--requests N --seed S --workload NAME
  --quick``); a stack adds its own to the parser it gets.
- :func:`request_stream`: the requests of a run, from a request-stream workload
  (``lab.workloads``): each request's length in blocks and which of its blocks repeat an
  earlier request's prefix (the workload's ``prefix_share``), so that both stacks' prefix
  caches see the same stream.
- The KV pattern: every 8-byte word of a token's K or V in a layer is derived from
  (owner, layer, K/V, token position, word), where the owner is the request whose prompt
  first had that token (a shared prefix keeps its first owner, so a prefix-cache hit holds
  the same bytes a fresh prefill would write). :func:`fill` writes it, :func:`check` counts
  the bytes that differ, both vectorised over a request's tokens.
- :class:`WayResult`, :func:`alternate` (plugin off and on alternating, a fresh run per
  way), :func:`stack_line` (the exact ``stack-e2e ...`` line) and :func:`percentiles`.
- :func:`tee_results`: the full run's output into the results folder (``lab.results``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from lab import workloads

#: The workload a run takes unless ``--workload`` names another.
DEFAULT_WORKLOAD = "p16-occ80-g0"
#: Requests a run takes unless ``--requests`` says (``--quick``: ``QUICK_REQUESTS``).
DEFAULT_REQUESTS = 160
QUICK_REQUESTS = 24
#: The fixed fields of a ``stack-e2e`` line, in order; extra fields come after them.
LINE_FIELDS = ("stack", "connector", "mode", "plugin", "requests", "bytes_checked", "bytes_bad",
               "descriptors", "xfer_ms_p50", "xfer_ms_p99", "placed", "fallback", "errors",
               "partial", "place_us_p50", "place_us_p99", "place_us_max", "model",
               "block_tokens", "posted", "post_ms_p50", "engine_ms_p50")
WAYS = ("off", "on")


@dataclass(frozen=True)
class ModelShape:
    """A served model's KV cache as one rank holds it: ``layers``, ``kv_heads`` per rank of
    ``head_dim`` bf16 values each for K and for V, or with ``mla`` one latent of
    ``head_dim`` values per token and layer (DeepSeek's MLA: no K and V apart)."""

    name: str
    layers: int
    kv_heads: int
    head_dim: int
    mla: bool = False

    @property
    def buffers(self) -> int:
        """Registered buffers (regions) a side: K and V per layer, or one latent per layer."""
        return self.layers * (1 if self.mla else 2)

    @property
    def token_bytes(self) -> int:
        """Bytes of one token in one buffer (bf16)."""
        return self.kv_heads * self.head_dim * 2


#: The model shapes every stack run takes (``--model``).
MODELS = {m.name: m for m in (
    ModelShape("llama3-8b", 32, 8, 128),  # the vLLM stack run's shape: 8 KV heads, one rank
    ModelShape("llama3-8b-tp8", 32, 1, 128),  # the same at TP8: the SGLang stack run's shape
    ModelShape("llama3-70b-tp8", 80, 1, 128),  # 80 layers, 8 KV heads over 8 ranks
    ModelShape("deepseek-v3-mla", 61, 1, 576, mla=True),  # 512 latent + 64 rope, one buffer a layer
)}


# --- options and the request stream -------------------------------------------------------


def parser(description: str, model: str = "llama3-8b") -> argparse.ArgumentParser:
    """An argument parser with the options every stack takes (``model``: the stack's
    default ``--model``)."""
    ap = argparse.ArgumentParser(description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=list(MODELS), default=model,
                    help=f"the KV cache's shape (default {model})")
    ap.add_argument("--block-tokens", type=int, default=None, metavar="N",
                    help="tokens a block (page); default: the workload's")
    ap.add_argument("--requests", type=int, default=None,
                    help=f"requests per way (default {DEFAULT_REQUESTS}; --quick: {QUICK_REQUESTS})")
    ap.add_argument("--seed", type=int, default=7, help="the request stream's seed (default 7)")
    ap.add_argument("--workload", default=DEFAULT_WORKLOAD,
                    help=f"a request-stream workload of lab.workloads (default {DEFAULT_WORKLOAD})")
    ap.add_argument("--quick", action="store_true", help="a short run (CI): small pools, few requests")
    return ap


def parse(ap: argparse.ArgumentParser, argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """Parses ``argv``; fills ``requests`` from ``--quick``; an unknown ``--workload`` is a
    usage error naming the known ones; ``args.workload_spec`` is its ``Workload``."""
    args = ap.parse_args(argv)
    if args.requests is None:
        args.requests = QUICK_REQUESTS if args.quick else DEFAULT_REQUESTS
    if args.requests < 1:
        ap.error(f"--requests must be at least 1, got {args.requests}")
    try:
        args.workload_spec = workloads.by_name(args.workload)
    except (KeyError, ValueError):
        ap.error(f"--workload: no workload named {args.workload!r} (known: {', '.join(workloads.names())})")
    if args.block_tokens is not None:
        if args.block_tokens < 1:
            ap.error(f"--block-tokens must be at least 1, got {args.block_tokens}")
        args.workload_spec = dataclasses.replace(args.workload_spec, page_tokens=args.block_tokens)
    args.block_tokens = args.workload_spec.page_tokens
    args.model_spec = MODELS[args.model]
    return args


@dataclass(frozen=True)
class StreamRequest:
    """One request of the stream: ``index`` (its position), ``blocks`` (its prompt's length
    in blocks) and ``owners``: per block, the request whose prompt first had it (``index``
    itself, or an earlier request's for a shared prefix)."""

    index: int
    blocks: int
    owners: Tuple[int, ...]

    def tokens(self, block_size: int) -> int:
        """The prompt's length in tokens (whole blocks)."""
        return self.blocks * block_size


def request_stream(workload, requests: int, seed: int, block_size: int, pool_blocks: int,
                   recent: int = 64) -> Iterator[StreamRequest]:
    """``requests`` requests of ``workload``: lengths by ``lab.workloads.request_blocks`` in
    ``block_size``-token blocks, at most a quarter of ``pool_blocks``; a share
    ``workload.prefix_share`` repeat 20-80% of a recent request's prefix (one of the last
    ``recent``), as the replay's stream does."""
    rng = np.random.default_rng(seed)
    roots: List[StreamRequest] = []
    for r in range(requests):
        n = workloads.request_blocks(rng, block_size, pool_blocks)
        owners = [r] * n
        if roots and rng.random() < workload.prefix_share:
            root = roots[int(rng.integers(len(roots)))]
            # A shared prefix is at most the root's length and leaves this request a block
            # of its own (vLLM recomputes the last prompt token, so a prompt is never a
            # full hit).
            shared = min(int(n * rng.uniform(0.2, 0.8)), root.blocks, n - 1)
            owners[:shared] = root.owners[:shared]
        req = StreamRequest(r, n, tuple(owners))
        roots.append(req)
        if len(roots) > recent:
            roots.pop(0)
        yield req


def token_owners(req: StreamRequest, block_size: int) -> np.ndarray:
    """The owner of each of the request's prompt tokens."""
    return np.repeat(np.asarray(req.owners, dtype=np.uint64), block_size)


def prompt_token_ids(req: StreamRequest, block_size: int, vocab: int = 30000) -> List[int]:
    """Token ids of the prompt: a function of (owner, position), so a shared prefix has the
    same ids (and the same block hashes) as its owner's prompt, and others differ."""
    pos = np.arange(req.tokens(block_size), dtype=np.uint64)
    ids = (token_owners(req, block_size) * np.uint64(0x9E3779B1) + pos * np.uint64(2654435761)) % np.uint64(vocab)
    return ids.astype(np.int64).tolist()


# --- the KV pattern -------------------------------------------------------------------------

_WORD_MIX = np.uint64(0x9E3779B97F4A7C15)


def _bases(owners: np.ndarray, layer: int, kv: int, tokens: np.ndarray) -> np.ndarray:
    # 0xA5 tag, owner (20 bits), layer (7), K/V (1), token position (28).
    o = np.asarray(owners, dtype=np.uint64) & np.uint64(0xFFFFF)
    t = np.asarray(tokens, dtype=np.uint64) & np.uint64(0xFFFFFFF)
    head = np.uint64((0xA5 << 56) | ((layer & 0x7F) << 29) | ((kv & 1) << 28))
    return head | (o << np.uint64(36)) | t


def pattern(owners: np.ndarray, layer: int, kv: int, tokens: np.ndarray,
            trailing: Tuple[int, ...]) -> np.ndarray:
    """The pattern's words, shaped ``broadcast(owners, tokens).shape + trailing``: the
    leading axes name tokens, the trailing ones (heads, words) a token's K or V of one
    layer, numbered in C order so that a word moved within a token is caught too."""
    bases = _bases(owners, layer, kv, tokens)
    words = int(np.prod(trailing))
    mix = (np.arange(1, words + 1, dtype=np.uint64) * _WORD_MIX).reshape(trailing)
    return np.bitwise_xor(bases.reshape(bases.shape + (1,) * len(trailing)), mix)


def fill(out: np.ndarray, owners: np.ndarray, layer: int, kv: int, tokens: np.ndarray) -> None:
    """Writes the pattern into ``out``, a uint64 view shaped ``tokens.shape + trailing``
    (say ``(tokens, words)``: one row per token, its K or V of one layer)."""
    out[...] = pattern(owners, layer, kv, tokens, out.shape[np.ndim(tokens):])


def check(got: np.ndarray, owners: np.ndarray, layer: int, kv: int, tokens: np.ndarray) -> int:
    """The bytes of ``got`` (shaped as :func:`fill`'s ``out``) that differ from the pattern."""
    want = pattern(owners, layer, kv, tokens, got.shape[np.ndim(tokens):])
    if np.array_equal(got, want):
        return 0
    return int(np.count_nonzero(np.ascontiguousarray(got).view(np.uint8) != want.view(np.uint8)))


# --- results and lines ----------------------------------------------------------------------


@dataclass
class WayResult:
    """What one way (a mode, plugin off or on) did. ``bytes_expected`` is the requests'
    whole KV size from the stream (what ``bytes_checked`` must equal); ``extra`` holds the
    stack's own fields, printed after the fixed ones in insertion order."""

    requests: int = 0
    bytes_checked: int = 0
    bytes_bad: int = 0
    bytes_expected: int = 0
    descriptors: int = 0
    xfer_ms: List[float] = field(default_factory=list)
    placed: int = 0
    fallback: int = 0
    errors: int = 0
    partial: int = 0
    # The plugin's CPU time per placement call (its `place_times()`, the placing side's).
    place_us: Dict[str, float] = field(default_factory=dict)
    model: str = ""
    block_tokens: int = 0
    # Descriptors the engine posted after any merge of its own; per request, the time to
    # post its transfer and the time from posted to done (each stack says how it splits).
    posted: int = 0
    post_ms: List[float] = field(default_factory=list)
    engine_ms: List[float] = field(default_factory=list)
    # Per request, where the stack can tell: descriptors posted and KV bytes moved (the
    # points of lab.cost_model's fit; empty: the line's means stand for its requests).
    per_posted: List[int] = field(default_factory=list)
    per_bytes: List[int] = field(default_factory=list)
    extra: Dict[str, object] = field(default_factory=dict)

    def placement_times(self, times: Dict[str, float]) -> None:
        """Keeps a side's ``place_times()`` if it placed more often than one kept."""
        if times.get("calls", 0) >= self.place_us.get("calls", 0):
            self.place_us = dict(times)


def percentiles(values: Sequence[float]) -> Tuple[float, float]:
    """(p50, p99) of ``values`` (numpy's linear interpolation); (nan, nan) for none."""
    if not len(values):
        return float("nan"), float("nan")
    p50, p99 = np.percentile(np.asarray(values, dtype=np.float64), [50, 99])
    return float(p50), float(p99)


def _value(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def stack_line(stack: str, connector: str, mode: Optional[str], plugin: str, r: WayResult) -> str:
    """The ``stack-e2e`` line of one way: the fixed fields in order, then ``r.extra``
    (``bytes_expected`` first among them). ``mode=None``: a stack with one mode (SGLang's)
    has no ``mode`` field."""
    p50, p99 = percentiles(r.xfer_ms)
    fixed = dict(stack=stack, connector=connector, mode=mode, plugin=plugin, requests=r.requests,
                 bytes_checked=r.bytes_checked, bytes_bad=r.bytes_bad, descriptors=r.descriptors,
                 xfer_ms_p50=p50, xfer_ms_p99=p99, placed=r.placed, fallback=r.fallback,
                 errors=r.errors, partial=r.partial,
                 **{f"place_us_{q}": float(r.place_us.get(f"{q}_us", 0.0)) for q in ("p50", "p99", "max")},
                 model=r.model, block_tokens=r.block_tokens, posted=r.posted,
                 post_ms_p50=percentiles(r.post_ms)[0], engine_ms_p50=percentiles(r.engine_ms)[0])
    if mode is None:
        del fixed["mode"]
    extra = dict(bytes_expected=r.bytes_expected, **r.extra)
    return "stack-e2e " + " ".join(f"{k}={_value(v)}" for k, v in {**fixed, **extra}.items())


def alias_nixl() -> None:
    """The ``nixl`` meta package's module names bound to nixl-cu12's (a shim both stacks
    need: vLLM's and SGLang's connectors ``import nixl._api``, which nixl-cu12 installs as
    ``nixl_cu12._api``)."""
    import importlib

    import nixl_cu12

    sys.modules.setdefault("nixl", nixl_cu12)
    for m in ("_api", "_bindings"):
        sys.modules.setdefault(f"nixl.{m}", importlib.import_module(f"nixl_cu12.{m}"))


def parse_line(line: str) -> Dict[str, str]:
    """The ``key=value`` fields of a ``stack-e2e`` line (for tests and readers)."""
    if not line.startswith("stack-e2e "):
        raise ValueError(f"not a stack-e2e line: {line!r}")
    return dict(f.split("=", 1) for f in line.split()[1:])


class Progress:
    """A ``stack-e2e-progress`` line on stderr at most every ``every`` seconds while a way
    runs (a full way takes minutes and prints nothing else until it is done)."""

    def __init__(self, label: str, total: int, every: float = 30.0):
        import time

        self.label, self.total, self.every = label, total, every
        self._clock = time.monotonic
        self.start = self.last = self._clock()

    def tick(self, done: int) -> None:
        now = self._clock()
        if now - self.last >= self.every:
            self.last = now
            print(f"stack-e2e-progress {self.label} requests={done}/{self.total} "
                  f"elapsed_s={now - self.start:.0f}", file=sys.stderr, flush=True)


def alternate(run_way: Callable[[str, str], WayResult], modes: Sequence[str]
              ) -> Dict[Tuple[str, str], WayResult]:
    """Runs every mode both ways, ``run_way(mode, plugin)`` (``plugin`` ``"off"`` or
    ``"on"``; each call must start fresh processes), alternating which way goes first from
    one mode to the next so that neither always runs on a cold or a warm machine."""
    out: Dict[Tuple[str, str], WayResult] = {}
    for k, mode in enumerate(modes):
        for plugin in (WAYS if k % 2 == 0 else WAYS[::-1]):
            out[(mode, plugin)] = run_way(mode, plugin)
    return out


def report(stack: str, connector: str, got: Dict[Tuple[str, str], WayResult],
           out: Callable[[str], None] = print) -> List[str]:
    """Prints one line per mode and way (off before on) and returns them."""
    lines = []
    for mode in dict.fromkeys(m for m, _ in got):
        for plugin in WAYS:
            if (mode, plugin) in got:
                lines.append(stack_line(stack, connector, mode, plugin, got[(mode, plugin)]))
                out(lines[-1])
    return lines


def tee_results(name: str, args: argparse.Namespace) -> Optional[str]:
    """The full run's output also into the results folder (``lab.results.tee``); a
    ``--quick`` run (CI's) writes nothing. Returns the path, or None."""
    if args.quick:
        return None
    from lab import results

    return results.tee(name)
