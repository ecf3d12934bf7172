"""The vLLM plugin's lifecycle (``corun._plugin.Lifecycle``): its features, the vLLM
versions it was tested with, its patches, counters and placement budget. One object,
read by the plugin's face (``corun.vllm_plugin``) and its placement hooks
(``corun._vllm_place``), so that neither imports the other."""

from __future__ import annotations

from ._plugin import Lifecycle, installed_version

__all__ = ["ENV", "FEATURES", "LIFE", "TESTED"]

#: vLLM versions the plugin was tested with (``python/tests/vllm_suite.py``).
TESTED = ("0.33.0",)
#: The features ``CORUN_VLLM`` can name (or ``all``).
FEATURES = ("place", "nixl_order", "mooncake", "moriio")
#: The environment variable that names the features to turn on.
ENV = "CORUN_VLLM"

LIFE = Lifecycle(
    "vLLM",
    ENV,
    FEATURES,
    TESTED,
    lambda: installed_version("vllm"),
    counters=(
        "placed",  # allocations whose blocks placement chose
        "partial",  # ... whose head placement chose, within the budget (the rest: vLLM's order)
        "fallback",  # allocations left to vLLM's own order (nothing better, not pairable, no budget)
        "nixl_transfers",  # NIXL transfers ordered
        "nixl_before",  # their descriptors under NIXL's merge rule, in vLLM's order
        "nixl_after",  # ... in corun's order
        "mooncake_calls",  # groupings done by corun for the Mooncake connector
        "mooncake_before",  # their groups (descriptors) under vLLM's rule
        "mooncake_after",  # ... under corun's (runs descending on both sides grouped too)
        "mooncake_waits",  # decode-side allocations that waited for the prefill side's blocks
        "mooncake_wait_us",  # ... the time they waited, in all
        "moriio_calls",  # MoRIIO merges answered by corun
        "moriio_vllm",  # MoRIIO merges routed to vLLM's own function (see _install_moriio)
    ),
    hooks=FEATURES,
)
