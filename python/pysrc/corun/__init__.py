"""Concurrent contiguous runs in paired page-index arrays, and the transfer descriptors
they become (fast drop-ins for SGLang's ``group_concurrent_contiguous`` and vLLM
MoRIIO's ``merge_contiguous_blocks``).

The functions are corun's Rust core (``corun._corun``, a compiled extension); see
``help(corun.transfer_descriptors)`` and the package's README. ``corun.adapters`` plugs
placement (``corun.place``) into vLLM's block pool and SGLang's paged allocator.
"""

from ._corun import (
    __version__,
    count_runs,
    group_concurrent_contiguous,
    merge_contiguous_blocks,
    place,
    runs,
    sort_by_destination,
    transfer_descriptors,
)

__all__ = [
    "__version__",
    "count_runs",
    "group_concurrent_contiguous",
    "merge_contiguous_blocks",
    "place",
    "runs",
    "sort_by_destination",
    "transfer_descriptors",
]
