"""Placement's CPU budget per call: what a serving stack's scheduler can give it.

Placement runs inside the stack's scheduler loop (vLLM's ``allocate_slots``, SGLang's
batch allocation), which is single-threaded: while it runs, no request of that server
decodes a token. So each plugin bounds one placement call:

    CORUN_VLLM_BUDGET_US=2000     # the vLLM plugin; the default, in microseconds
    CORUN_SGLANG_BUDGET_US=2000   # the SGLang plugin; 0: no placement at all

A call for a request of ``n`` pages may take the larger of that setting and a quarter of
the stack's own allocation of ``n`` pages (vLLM's ``get_new_blocks``, SGLang's
``alloc_extend``), at the lowest cost per page this process has measured for the
stack's own call (none before its first). Before each call the plugin estimates the
call's CPU time from the highest cost per item (a page of the request or of the window
placement reads) its calls have shown, doubled for a call larger than any before, and
places the longest head of the request that fits: all of it (counted ``placed``), its
first runs (``partial``: the rest of the request takes the stack's own order, and the
request is kept placed only with fewer runs than the stack's own pages), or none
(``fallback``). Every call's CPU time (``time.thread_time_ns``, the scheduler thread's
own) is kept: :meth:`Budget.times` gives its p50, p99 and maximum.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from typing import Callable, Deque, Dict, Mapping, Optional

__all__ = ["Budget", "DEFAULT_US", "SHARE"]

# The setting's default, microseconds: a decode step is 10-30 ms, and a scheduler can
# give placement a few milliseconds of it.
DEFAULT_US = 2000
# The share of the stack's own allocation of the same request that a call may take.
SHARE = 0.25
# The first estimates, before any call was measured: high, so that the first calls stay
# in budget (measured here: 30-60 ns an item for vLLM's queue, 15-40 for SGLang's list,
# and 20-60 us a call).
_FIRST_ITEM_NS = 400.0
_FIRST_CALL_NS = 100_000.0
# Calls of fewer items than this tell the cost of a call, larger ones that of an item.
_SMALL = 512
# Call times kept for the percentiles.
_KEEP = 100_000


class Budget:
    """One plugin's budget: its setting (``env``), what its calls and the stack's own
    allocations cost, and its calls' CPU times."""

    def __init__(self, env: str) -> None:
        self.env = env
        self.us = DEFAULT_US
        self._lock = threading.Lock()
        self._times: Deque[int] = collections.deque(maxlen=_KEEP)
        self._item_ns = _FIRST_ITEM_NS
        self._call_ns = _FIRST_CALL_NS
        self._seen = 0  # the most items a measured call read
        self._stack_ns: Optional[float] = None  # the stack's own allocation, per page

    def configure(self, environ: Optional[Mapping[str, str]] = None) -> int:
        """Reads the setting from ``environ`` (default: the process's environment):
        unset or empty is the default; anything but a whole number of microseconds, 0
        or more, is a ``ValueError`` naming the variable and its value."""
        value = (os.environ if environ is None else environ).get(self.env, "").strip()
        if not value:
            self.us = DEFAULT_US
            return self.us
        try:
            us = int(value)
        except ValueError:
            us = -1
        if us < 0:
            raise ValueError(
                f"corun: {self.env}={value!r} is not a budget: a whole number of "
                f"microseconds, 0 or more (0: no placement; default {DEFAULT_US})"
            )
        self.us = us
        return us

    def limit_ns(self, n: int) -> float:
        """The most CPU time a call for ``n`` pages may take (0 when placement is off)."""
        if self.us == 0:
            return 0.0
        stack = SHARE * self._stack_ns * n if self._stack_ns is not None else 0.0
        return max(self.us * 1000.0, stack)

    def estimate_ns(self, items: int) -> float:
        """A call's CPU time, estimated high, for ``items`` pages read."""
        grow = 1.0 if items <= self._seen else 2.0
        return self._call_ns + self._item_ns * items * grow

    def pages(self, n: int, items: Callable[[int], int]) -> int:
        """How many of a request's first ``n`` pages a call may place, ``items(k)`` being
        the pages a call placing ``k`` of them reads: ``n``, fewer, or 0."""
        limit = self.limit_ns(n)
        if n <= 0 or limit <= 0:
            return 0
        if self.estimate_ns(items(n)) <= limit:
            return n
        lo, hi = 0, n  # est(lo) fits (or lo == 0), est(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self.estimate_ns(items(mid)) <= limit else (lo, mid)
        return lo

    def placed(self, items: int, ns: int) -> None:
        """Records a placement call that read ``items`` pages and took ``ns`` of CPU."""
        with self._lock:
            self._times.append(ns)
            if items < _SMALL:
                self._call_ns = max(float(ns), 0.9 * self._call_ns + 0.1 * ns)
            else:
                rate = max(0.0, ns - self._call_ns) / items
                self._item_ns = max(rate, 0.9 * self._item_ns + 0.1 * rate)
                self._seen = max(self._seen, items)

    def stack(self, n: int, ns: int) -> None:
        """Records the stack's own allocation of ``n`` pages taking ``ns`` of CPU (the
        lowest rate per page seen, decaying slowly up: the budget errs short)."""
        if n < 64:
            return  # mostly the call's own cost: it would overstate the rate
        rate = ns / n
        with self._lock:
            old = self._stack_ns
            self._stack_ns = rate if old is None else min(rate, 0.99 * old + 0.01 * rate)

    def times(self) -> Dict[str, float]:
        """The calls' CPU times since the start or :meth:`reset`: ``calls``, and
        ``p50_us``, ``p99_us``, ``max_us`` (0 without calls)."""
        with self._lock:
            ts = sorted(self._times)
        if not ts:
            return {"calls": 0, "p50_us": 0.0, "p99_us": 0.0, "max_us": 0.0}
        at = lambda q: ts[min(len(ts) - 1, int(q * len(ts)))] / 1000.0  # noqa: E731
        return {"calls": len(ts), "p50_us": at(0.5), "p99_us": at(0.99), "max_us": ts[-1] / 1000.0}

    def reset(self) -> None:
        """Forgets the calls' times (what the costs taught stays)."""
        with self._lock:
            self._times.clear()


def now_ns() -> int:
    """This thread's CPU time, in nanoseconds."""
    return time.thread_time_ns()
