"""Concurrent contiguous runs in paired index arrays, and RDMA transfer descriptors.

Where a result's type depends on an argument, ``@overload`` gives it exactly:
``transfer_descriptors`` on ``form``; ``runs``, ``place`` and ``sort_by_destination`` on
their inputs' dtypes (a list of ints is read as int64, or as uint64 when it holds values
from 2**63). Other combinations get ``npt.NDArray[np.integer[Any]]``."""

from typing import (
    Any,
    Iterable,
    List,
    Literal,
    Optional,
    Sequence,
    Tuple,
    TypedDict,
    TypeVar,
    Union,
    final,
    overload,
    type_check_only,
)

import numpy as np
import numpy.typing as npt

__all__ = [
    "group_concurrent_contiguous",
    "runs",
    "count_runs",
    "transfer_descriptors",
    "sort_by_destination",
    "place",
    "merge_contiguous_blocks",
    "__version__",
    "VllmQueueMirror",
    "VllmQueueTold",
]

__version__: str

# The extension defines none of the names below (stubtest checks that): each is private,
# or `@type_check_only`.
_IndexArray = Union[npt.NDArray[np.integer[Any]], Sequence[int]]
_PerLayer = Union[npt.NDArray[np.integer[Any]], Sequence[int]]
_Direction = Literal["ascending", "either"]
_Ints = npt.NDArray[np.integer[Any]]
_U64 = npt.NDArray[np.uint64]
# Any integer dtype, given back as it is: `runs`' starts are in each input's own dtype.
_S = TypeVar("_S", bound=np.integer[Any])
_D = TypeVar("_D", bound=np.integer[Any])
# The kernel's four types: a pair of arrays of one of them is placed or sorted in it
# (narrower dtypes and pairs of two types are widened: the general overload).
_K = TypeVar("_K", np.int32, np.int64, np.uint32, np.uint64)
# What a list of ints is read as.
_FromList = npt.NDArray[Union[np.int64, np.uint64]]

def group_concurrent_contiguous(
    src_indices: _IndexArray, dst_indices: _IndexArray
) -> Tuple[list[list[int]], list[list[int]]]:
    """Groups positions where both sides advance by exactly 1 (a drop-in for SGLang's
    helper): ``(src_groups, dst_groups)``. Either side empty: ``([], [])``; other unequal
    lengths: ``ValueError``. Contiguity is exact (no int32 wrap); non-1-D input is a
    ``ValueError``; float and object arrays, and objects that are not sequences, are a
    ``TypeError``. Any array layout is accepted (misaligned, strided, byte-swapped)."""

@overload
def runs(
    src: npt.NDArray[_S],
    dst: npt.NDArray[_D],
    *,
    max_len: Optional[int] = None,
    direction: _Direction = "ascending",
) -> Tuple[npt.NDArray[_S], npt.NDArray[_D], npt.NDArray[np.int64]]:
    """``(src_starts, dst_starts, lengths)`` of every run (starts in each input's own dtype,
    ``np.asarray(src).dtype``; lengths int64); ``max_len`` (an int from 1) cuts longer runs
    into pieces; ``direction="either"`` merges runs that descend on both sides too (their
    lowest pages are ``starts - (lengths - 1)``). Unequal lengths: ``ValueError``; outputs
    too large: ``MemoryError``."""

@overload
def runs(
    src: Sequence[int],
    dst: Sequence[int],
    *,
    max_len: Optional[int] = None,
    direction: _Direction = "ascending",
) -> Tuple[_FromList, _FromList, npt.NDArray[np.int64]]: ...
@overload
def runs(
    src: _IndexArray,
    dst: _IndexArray,
    *,
    max_len: Optional[int] = None,
    direction: _Direction = "ascending",
) -> Tuple[_Ints, _Ints, npt.NDArray[np.int64]]: ...
def count_runs(
    src: _IndexArray,
    dst: _IndexArray,
    *,
    max_len: Optional[int] = None,
    direction: _Direction = "ascending",
) -> int:
    """The number of runs ``runs`` returns with the same arguments, with no array built
    (``len(runs(src, dst, ...)[2])``). Unequal lengths: ``ValueError``."""

@overload
def transfer_descriptors(
    src: _IndexArray,
    dst: _IndexArray,
    src_bases: _PerLayer,
    dst_bases: _PerLayer,
    item_lens: _PerLayer,
    *,
    max_bytes: Optional[int] = None,
    form: Literal["arrays"] = "arrays",
    src_dev_id: Optional[int] = None,
    dst_dev_id: Optional[int] = None,
    direction: _Direction = "ascending",
) -> Tuple[_U64, _U64, _U64]:
    """Descriptors for every layer buffer and run, layer-major: ``src_bases[l] + src[start]
    * item_lens[l]``, likewise for dst, ``run_len * item_lens[l]``; ``max_bytes`` cuts runs
    into pieces of whole items. ``form="arrays"``: ``(src_addrs, dst_addrs, lengths)`` uint64
    arrays; ``"lists"``: the same as lists of ints (Mooncake's ``batch_transfer_sync``);
    ``"nixl"``: ``(local, remote)`` Nx3 uint64 ``[addr, len, dev_id]`` arrays (NIXL's
    ``get_xfer_descs``), with ``src_dev_id`` and ``dst_dev_id`` (``None``: 0) in the third
    column (device ids with another form: ``ValueError``). Negative indices, addresses past
    2**64, zero item lengths, a cap below one item, unequal lengths (one empty side
    included), uint64 indices from 2**63 with negative ones, an unknown form:
    ``ValueError``; outputs too large for memory:
    ``MemoryError``. Every error names its parameter."""

@overload
def transfer_descriptors(
    src: _IndexArray,
    dst: _IndexArray,
    src_bases: _PerLayer,
    dst_bases: _PerLayer,
    item_lens: _PerLayer,
    *,
    max_bytes: Optional[int] = None,
    form: Literal["lists"],
    src_dev_id: Optional[int] = None,
    dst_dev_id: Optional[int] = None,
    direction: _Direction = "ascending",
) -> Tuple[list[int], list[int], list[int]]: ...
@overload
def transfer_descriptors(
    src: _IndexArray,
    dst: _IndexArray,
    src_bases: _PerLayer,
    dst_bases: _PerLayer,
    item_lens: _PerLayer,
    *,
    max_bytes: Optional[int] = None,
    form: Literal["nixl"],
    src_dev_id: Optional[int] = None,
    dst_dev_id: Optional[int] = None,
    direction: _Direction = "ascending",
) -> Tuple[_U64, _U64]: ...
@overload
def transfer_descriptors(
    src: _IndexArray,
    dst: _IndexArray,
    src_bases: _PerLayer,
    dst_bases: _PerLayer,
    item_lens: _PerLayer,
    *,
    max_bytes: Optional[int] = None,
    form: str = "arrays",
    src_dev_id: Optional[int] = None,
    dst_dev_id: Optional[int] = None,
    direction: _Direction = "ascending",
) -> Union[Tuple[_U64, _U64, _U64], Tuple[list[int], list[int], list[int]], Tuple[_U64, _U64]]:
    """A ``form`` only known at run time: any of the three (another string: ``ValueError``)."""

@type_check_only
class PlaceStats(TypedDict):
    """``place``'s counts of concurrent runs (a plain dict at run time)."""

    bound: int
    """The first side's own runs: the best possible."""
    placed: int
    """With the chosen pages."""
    own: int
    """With the allocator's own choice, ``free[:len(first)]``."""
    split: int
    """Runs that no free extent held whole."""
    fallback: bool
    """The chosen pages are the allocator's own choice, which placing did not beat."""

@overload
def place(
    first: npt.NDArray[_K], free: npt.NDArray[_K], *, direction: _Direction = "either"
) -> Tuple[npt.NDArray[_K], npt.NDArray[_K], PlaceStats]:
    """The second side's pages for a request, chosen so that its runs pair up with the first
    side's: ``(chosen, rest, stats)``, both arrays in the pair's common dtype. ``first``:
    the first side's pages in request order; ``free``: the second side's free pages in the
    allocator's priority order (a sorted array of free ids, or the front of a free queue:
    pass only as deep a prefix as placement may reach). ``chosen[i]`` pairs with
    ``first[i]``; ``rest`` is ``free`` without the chosen pages, in order; ``stats`` counts
    concurrent runs (``PlaceStats``). ``free`` must hold distinct pages; fewer pages than
    ``first``: ``ValueError``."""

@overload
def place(
    first: Sequence[int], free: Sequence[int], *, direction: _Direction = "either"
) -> Tuple[_FromList, _FromList, PlaceStats]: ...
@overload
def place(
    first: _IndexArray, free: _IndexArray, *, direction: _Direction = "either"
) -> Tuple[_Ints, _Ints, PlaceStats]: ...
@overload
def sort_by_destination(
    src: npt.NDArray[_K], dst: npt.NDArray[_K]
) -> Tuple[npt.NDArray[_K], npt.NDArray[_K]]:
    """The pairs sorted by destination, ``(src_sorted, dst_sorted)``, in the pair's common
    dtype: grouping them gives the fewest transfers for the set of pairs. A repeated
    destination: ``ValueError`` naming both positions."""

@overload
def sort_by_destination(
    src: Sequence[int], dst: Sequence[int]
) -> Tuple[_FromList, _FromList]: ...
@overload
def sort_by_destination(src: _IndexArray, dst: _IndexArray) -> Tuple[_Ints, _Ints]: ...

def merge_contiguous_blocks(
    offsets_local: Iterable[int],
    offsets_remote: Iterable[int],
    sizes: Iterable[int],
    assume_sorted: bool = False,
) -> Tuple[list[int], list[int], list[int]]:
    """vLLM MoRIIO's ``merge_contiguous_blocks`` (without ``self``): the blocks sorted by
    local offset (unless ``assume_sorted``, or already sorted), neighbours merged where
    both offsets continue the previous block; ``(offsets_local, offsets_remote, sizes)``
    as lists of ints, equal to vLLM 0.33's. Unequal lengths: ``ValueError`` naming all
    three; a value outside int64, or a merged size that would wrap there:
    ``OverflowError``."""

# vLLM's free block queue, read and reordered for ``corun.adapters.vllm_place_front``
# (the adapter is the interface; the package does not re-export these).

@final
class VllmQueueMirror:
    """The order of a vLLM free queue as block ids, kept in step by being told of every
    change (``corun.adapters`` wraps the queue's methods to tell it)."""

    broken: bool
    told: int
    def __new__(cls, queue: Any, blocks: int) -> VllmQueueMirror: ...
    @property
    def count(self) -> int: ...
    def in_step(self, queue: Any) -> bool: ...
    def catch_up(self, queue: Any) -> None: ...
    def front(self, count: int) -> npt.NDArray[np.int64]: ...
    def window(self, count: int, depth: int) -> npt.NDArray[np.int64]: ...
    def removed(self, block: Any) -> None: ...
    def appended(self, blocks: Iterable[Any]) -> None: ...
    def prepended(self, blocks: Iterable[Any]) -> None: ...
    def moved_front(self, ids: Sequence[int]) -> None: ...
    def reread(self, queue: Any) -> None: ...
    def set_broken(self) -> None: ...

@final
class VllmQueueTold:
    """A vLLM free queue method, wrapped: calls it, then tells the mirror its change."""

    def __new__(cls, mirror: VllmQueueMirror, name: str, method: Any) -> VllmQueueTold: ...
    def __call__(self, *args: Any) -> Any: ...
    def __reduce__(self) -> Any: ...
