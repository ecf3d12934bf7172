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
call's CPU time (:meth:`Budget.estimate_ns`) from what its calls of that size have cost
per item (a page of the request or of the window placement reads; sizes in powers of
two, the costliest of the recent calls of a size), a size not yet seen priced from the
largest size below it, 1.25x a doubling (caches miss more as a call grows: measured
here, 390-480 ns a request page from 1K to 64K pages through vLLM's queue), and aims at
90% of the budget; it places the longest head of the request that fits: all of it (counted ``placed``), its
first runs (``partial``: the rest of the request takes the stack's own order, and the
request is kept placed only with fewer runs than the stack's own pages), or none
(``fallback``). Every call's CPU time (``time.thread_time_ns``, the scheduler thread's
own) is kept: :meth:`Budget.times` gives its p50, p99 and maximum. Python's cyclic
collector is held off during a call (:meth:`Budget.run`): a collection walks every
object of the process (the stack's millions of blocks: 30 ms measured here), a cost of
the process that would otherwise fall in whichever call allocated last; it runs at the
stack's next allocation instead, as it would without the plugin.
"""

from __future__ import annotations

import collections
import gc
import math
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
# in budget (measured here: 80-100 ns an item through vLLM's queue, 15-40 for SGLang's
# list, and 20-60 us a call).
_FIRST_ITEM_NS = 400.0
_FIRST_CALL_NS = 100_000.0
# Calls of fewer items than this tell the cost of a call, larger ones that of an item.
_SMALL = 512
# A size not yet seen: this much more per item for each doubling past the largest seen.
_GROWTH = 1.25
# The share of the budget an estimate aims at (the rest: the noise of a shared machine).
_AIM = 0.9
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
        self._call_ns = _FIRST_CALL_NS
        # Cost per item by size class (items.bit_length()): the costliest recent call.
        self._item_ns: Dict[int, float] = {}
        self._most = 0  # the most items a measured call read
        self._stack_ns: Optional[float] = None  # the stack's own allocation, per page
        self._call = threading.local()  # the limit of the call this thread is in
        self._over = 0  # calls that took longer than their limit

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

    def item_ns(self, items: int) -> float:
        """The cost per item of a call that reads ``items`` (see the module docs)."""
        size = items.bit_length()
        rate = self._item_ns.get(size)
        if rate is not None:
            return rate
        below = [s for s in self._item_ns if s < size]
        if not below:
            # Smaller than any call seen: as the nearest size above (none: the first guess).
            above = [s for s in self._item_ns if s > size]
            return self._item_ns[min(above)] if above else _FIRST_ITEM_NS
        # Past the largest call seen, by the doublings past it (not by size class: a
        # call just past a class's edge costs as one just below it).
        grow = max(0.0, math.log2(items / self._most)) if self._most else 0.0
        return float(max(self._item_ns[s] for s in below) * _GROWTH**grow)

    def estimate_ns(self, items: int) -> float:
        """A call's CPU time, estimated high, for ``items`` pages read."""
        return self._call_ns + self.item_ns(items) * items

    def pages(self, n: int, items: Callable[[int], int]) -> int:
        """How many of a request's first ``n`` pages a call may place, ``items(k)`` being
        the pages a call placing ``k`` of them reads: ``n``, fewer, or 0."""
        limit = self.limit_ns(n)
        self._call.limit = limit
        if n <= 0 or limit <= 0:
            return 0
        aim = _AIM * limit
        if self.estimate_ns(items(n)) <= aim:
            return n
        lo, hi = 0, n  # est(lo) fits (or lo == 0), est(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self.estimate_ns(items(mid)) <= aim else (lo, mid)
        return lo

    def run(self, work: Callable[[], int]) -> None:
        """One placement call: ``work()`` returns the items it read; its CPU time is
        recorded (:meth:`placed`), the cyclic collector held off while it runs."""
        collecting = gc.isenabled()
        gc.disable()
        self._call.limit = self.us * 1000.0  # until pages() says the call's own
        start, items = now_ns(), 0
        try:
            items = work()
        finally:
            ns = now_ns() - start
            self.placed(items, ns)
            if ns > self._call.limit:
                with self._lock:
                    self._over += 1
            if collecting:
                gc.enable()

    def placed(self, items: int, ns: int) -> None:
        """Records a placement call that read ``items`` pages and took ``ns`` of CPU."""
        with self._lock:
            self._times.append(ns)
            if items < _SMALL:
                # The typical call's fixed cost (a slow one moves it a tenth of the way).
                self._call_ns = 0.9 * self._call_ns + 0.1 * ns
            else:
                rate = max(0.0, ns - self._call_ns) / items
                size = items.bit_length()
                old = self._item_ns.get(size)
                self._item_ns[size] = rate if old is None else max(rate, 0.9 * old + 0.1 * rate)
                self._most = max(self._most, items)

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
        """The calls' CPU times since the start or :meth:`reset`: ``calls``, ``p50_us``,
        ``p99_us``, ``max_us`` (0 without calls) and ``over``, the calls of
        :meth:`run` that took longer than their limit (the estimate fell short)."""
        with self._lock:
            ts, over = sorted(self._times), self._over
        if not ts:
            return {"calls": 0, "p50_us": 0.0, "p99_us": 0.0, "max_us": 0.0, "over": over}

        def at(q: float) -> float:
            return ts[min(len(ts) - 1, int(q * len(ts)))] / 1000.0

        return {"calls": len(ts), "p50_us": at(0.5), "p99_us": at(0.99), "max_us": ts[-1] / 1000.0, "over": over}

    def reset(self) -> None:
        """Forgets the calls' times (what the costs taught stays)."""
        with self._lock:
            self._times.clear()
            self._over = 0


def now_ns() -> int:
    """This thread's CPU time, in nanoseconds."""
    return time.thread_time_ns()
