"""The vLLM plugin's ``nixl_order`` on NIXL's agents: every agent a NIXL worker makes
gets a ``make_prepped_xfer`` that lists each transfer's descriptor ids in corun's order
(``vllm_plugin.nixl_order``, counted and guarded there), and ``disable()`` takes the
wrappers off again (:func:`unwrap_agents`)."""

from __future__ import annotations

import functools
import inspect
import weakref
from typing import Any, Callable, List, Tuple

from ._guard import guarded
from ._vllm_life import LIFE

#: ``(local, remote) -> (local, remote)``: the ids as the transfer should list them.
Order = Callable[[Any, Any], Tuple[Any, Any]]


def _ordering(make_prepped_xfer: Callable[..., Any], order: Order) -> Callable[..., Any]:
    """``make_prepped_xfer`` with each transfer's descriptor ids put in ``order`` (calls
    naming the ids by keyword pass through unchanged)."""

    @functools.wraps(make_prepped_xfer)
    def corun_make_prepped_xfer(*args: Any, **kwargs: Any) -> Any:
        if len(args) >= 5:
            local, remote = order(args[2], args[4])
            args = (args[0], args[1], local, args[3], remote, *args[5:])
        return make_prepped_xfer(*args, **kwargs)

    corun_make_prepped_xfer.corun_ordered = True  # type: ignore[attr-defined]
    return corun_make_prepped_xfer


# Every NIXL agent whose make_prepped_xfer corun wrapped (weakly held: an agent vLLM
# drops is not kept alive), so that disable() can take the wrappers off again.
_ORDERED: "weakref.WeakSet[Any]" = weakref.WeakSet()
_ORDERED_UNTRACKED: List[Any] = []  # agents that take no weak reference


def _wrap_worker(worker: Any, order: Order) -> None:
    wrapper = worker.nixl_wrapper
    raw = wrapper.make_prepped_xfer
    # Only an agent's own method is wrapped (NIXL's agent, or a stand-in class): a mock
    # attribute stays itself, so what a test asks of it still answers.
    if inspect.ismethod(raw) and not getattr(raw, "corun_ordered", False):
        wrapper.make_prepped_xfer = _ordering(raw, order)
        try:
            _ORDERED.add(wrapper)
        except TypeError:
            _ORDERED_UNTRACKED.append(wrapper)


def unwrap_agents() -> None:
    """Takes corun's ordering off every agent :func:`_wrap_worker` wrapped: the agent's
    own ``make_prepped_xfer`` (its class's) again."""
    agents = [*_ORDERED, *_ORDERED_UNTRACKED]
    _ORDERED.clear()
    _ORDERED_UNTRACKED.clear()
    for agent in agents:
        attrs = getattr(agent, "__dict__", {})
        if getattr(attrs.get("make_prepped_xfer"), "corun_ordered", False):
            del attrs["make_prepped_xfer"]


_wrap_worker_safely = guarded(LIFE.counters, "nixl_order", lambda worker, order: None)(_wrap_worker)


def install(order: Order) -> None:
    """Orders every NIXL agent a NIXL worker makes from now on (its ``__init__`` patched
    through the plugin's lifecycle)."""
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl import base_worker  # type: ignore[import-not-found, unused-ignore]

    cls = base_worker.NixlBaseConnectorWorker
    init = cls.__dict__["__init__"]

    @functools.wraps(init)
    def corun_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        # Every transfer (pull reads, mixed reads, push writes) goes through the agent's
        # make_prepped_xfer: ordering it there covers them all.
        _wrap_worker_safely(self, order)

    LIFE.patch(cls, "__init__", corun_init)
