"""Concurrent contiguous runs in paired index arrays, and RDMA transfer descriptors."""

from typing import Literal, Optional, Sequence, Tuple, TypedDict, Union

import numpy as np
import numpy.typing as npt

__version__: str

IndexArray = Union[npt.NDArray[np.integer], Sequence[int]]
PerLayer = Union[npt.NDArray[np.integer], Sequence[int]]

def group_concurrent_contiguous(
    src_indices: IndexArray, dst_indices: IndexArray
) -> Tuple[list[list[int]], list[list[int]]]:
    """Groups positions where both sides advance by exactly 1 (a drop-in for SGLang's
    helper): ``(src_groups, dst_groups)``. Either side empty: ``([], [])``; other unequal
    lengths: ``ValueError``. Contiguity is exact (no int32 wrap); non-1-D input is a
    ``ValueError``; float and object arrays, and objects that are not sequences, are a
    ``TypeError``. Any array layout is accepted (misaligned, strided, byte-swapped)."""

def runs(
    src: IndexArray,
    dst: IndexArray,
    *,
    max_len: Optional[int] = None,
    direction: Literal["ascending", "either"] = "ascending",
) -> Tuple[npt.NDArray[np.integer], npt.NDArray[np.integer], npt.NDArray[np.int64]]:
    """``(src_starts, dst_starts, lengths)`` of every run (starts in each input's own dtype,
    ``np.asarray(src).dtype``; lengths int64); ``max_len`` (an int from 1) cuts longer runs
    into pieces; ``direction="either"`` merges runs that descend on both sides too (their
    lowest pages are ``starts - (lengths - 1)``). Unequal lengths: ``ValueError``; outputs
    too large: ``MemoryError``."""

def transfer_descriptors(
    src: IndexArray,
    dst: IndexArray,
    src_bases: PerLayer,
    dst_bases: PerLayer,
    item_lens: PerLayer,
    *,
    max_bytes: Optional[int] = None,
    form: Literal["arrays", "lists", "nixl"] = "arrays",
    src_dev_id: Optional[int] = 0,
    dst_dev_id: Optional[int] = 0,
    direction: Literal["ascending", "either"] = "ascending",
) -> Union[
    Tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.uint64]],
    Tuple[list[int], list[int], list[int]],
    Tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]],
]:
    """Descriptors for every layer buffer and run, layer-major: ``src_bases[l] + src[start]
    * item_lens[l]``, likewise for dst, ``run_len * item_lens[l]``; ``max_bytes`` cuts runs
    into pieces of whole items. ``form="arrays"``: ``(src_addrs, dst_addrs, lengths)`` uint64
    arrays; ``"lists"``: the same as lists of ints (Mooncake's ``batch_transfer_sync``);
    ``"nixl"``: ``(local, remote)`` Nx3 uint64 ``[addr, len, dev_id]`` arrays (NIXL's
    ``get_xfer_descs``). Either side empty: empty outputs. Negative indices, addresses past
    2**64, zero item lengths, a cap below one item, unequal lengths, uint64 indices from
    2**63 with negative ones, an unknown form: ``ValueError``; outputs too large for memory:
    ``MemoryError``. Every error names its parameter."""

class PlaceStats(TypedDict):
    bound: int
    placed: int
    own: int
    split: int
    fallback: bool

def place(
    first: IndexArray, free: IndexArray, *, direction: Literal["ascending", "either"] = "either"
) -> Tuple[npt.NDArray[np.integer], npt.NDArray[np.integer], PlaceStats]:
    """The second side's pages for a request, chosen so that its runs pair up with the first
    side's: ``(chosen, rest, stats)``. ``first``: the first side's pages in request order;
    ``free``: the second side's free pages in the allocator's priority order (a sorted
    array of free ids, or the front of a free queue: pass only as deep a prefix as
    placement may reach). ``chosen[i]`` pairs with ``first[i]``; ``rest`` is ``free``
    without the chosen pages, in order; ``stats`` counts concurrent runs: ``bound`` (the
    first side's own), ``placed``, ``own`` (the allocator's own choice
    ``free[:len(first)]``), ``split``, ``fallback``. ``free`` must hold distinct pages;
    fewer pages than ``first``: ``ValueError``."""

def sort_by_destination(
    src: IndexArray, dst: IndexArray
) -> Tuple[npt.NDArray[np.integer], npt.NDArray[np.integer]]:
    """The pairs sorted by destination, ``(src_sorted, dst_sorted)``: grouping them gives the
    fewest transfers for the set of pairs. A repeated destination: ``ValueError`` naming
    both positions."""
