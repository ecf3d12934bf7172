"""The KV of ``lab.vllm_engine``'s caches: its shape (:class:`KvShape`, from a
``lab.stack_common.MODELS`` entry and a block size) and ``lab.stack_common``'s pattern
written into (:func:`write_tokens`) and checked in (:func:`check_blocks`) its LBHNC
blocks, one uint64 view a layer."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab import stack_common as sc


@dataclass(frozen=True)
class KvShape:
    """One side's KV: ``layers`` of blocks of ``block`` tokens x ``heads`` x (K | V of
    ``head`` bf16), LBHNC (one region a layer, K and V in it)."""

    layers: int
    heads: int
    head: int
    block: int

    @classmethod
    def of(cls, model: str, block: int) -> "KvShape":
        m = sc.MODELS[model]
        return cls(m.layers, m.kv_heads, m.head_dim, block)

    @property
    def words(self) -> int:
        """A token's K (or V) of one head, in uint64 words (32 for 128 bf16)."""
        return self.head * 2 // 8

    @property
    def block_bytes(self) -> int:
        """One block, every layer, K and V (2 MiB for llama3-8b's 16-token blocks)."""
        return self.layers * 2 * self.block * self.heads * self.head * 2



def write_tokens(words, shape: KvShape, blocks, owners, start, end):
    """The pattern into the slots of the request's tokens ``start``..``end`` (``blocks``:
    all of its block ids; ``owners``: per block). Only those slots are written: a
    block's other slots keep what a transfer brought, so its check still tests them."""
    n = shape.block
    a, b = -(-start // n), end // n  # the whole blocks inside the range
    if a < b:
        _write(words, shape, blocks[a:b], owners, a, 0, n)
    for blk in sorted({start // n, (end - 1) // n} - set(range(a, b))):
        lo, hi = max(start, blk * n) - blk * n, min(end, (blk + 1) * n) - blk * n
        if lo < hi:
            _write(words, shape, blocks[blk:blk + 1], owners, blk, lo, hi)


def _write(words, shape: KvShape, blocks, owners, first, lo, hi):
    """Slots ``lo``..``hi`` of the request's blocks ``first``.. (ids ``blocks``)."""
    idx, w_ = np.asarray(blocks, dtype=np.int64), shape.words
    tokens = np.arange(first, first + len(idx))[:, None] * shape.block + np.arange(lo, hi)[None, :]
    own = np.repeat(owners[first:first + len(idx)][:, None], hi - lo, axis=1)
    for layer, w in enumerate(words):
        for kv in (0, 1):
            # [blocks, N, H, words] of the pattern, stored [blocks, H, N, words].
            pat = sc.pattern(own, layer, kv, tokens, (shape.heads, w_))
            w[idx, :, lo:hi, kv * w_:(kv + 1) * w_] = pat.transpose(0, 2, 1, 3)


def check_blocks(words, shape: KvShape, blocks, owners):
    """(bytes checked, bytes bad) over every block of the request's prompt."""
    idx, n, w_ = np.asarray(blocks, dtype=np.int64), shape.block, shape.words
    tokens = np.arange(len(idx))[:, None] * n + np.arange(n)[None, :]
    own = np.repeat(owners[:len(idx)][:, None], n, axis=1)
    checked = bad = 0
    for layer, w in enumerate(words):
        got = w[idx]
        for kv in (0, 1):
            part = got[:, :, :, kv * w_:(kv + 1) * w_].transpose(0, 2, 1, 3)
            bad += sc.check(part, own, layer, kv, tokens)
            checked += part.nbytes
    return checked, bad
