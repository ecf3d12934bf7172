"""The transfer engines' calls counted where a stack makes them, without changing what they
do: descriptors handed, calls, failures, seconds inside the engine, and for NIXL the
descriptors it posted after its own merge (``lab.kit.nixl_posted``). ``lab.stack_sglang``'s
sides wrap SGLang's engines with them."""

from __future__ import annotations

import threading
import time
from typing import Dict

from lab import kit


class MooncakeCounted:
    """Wraps the engine object's ``batch_transfer_sync*`` methods: descriptors, calls,
    failures (a return below 0 or an exception), seconds inside the engine. The calls
    are synchronous: their seconds are the transfer's, post and wait together."""

    asynchronous = False

    def posted(self) -> int:
        """Descriptors the engine took (it merges none)."""
        return self.descriptors

    def __init__(self, engine):
        self.descriptors = self.calls = self.failed = 0
        self.seconds = 0.0
        self.extra: Dict[str, int] = {}
        for name in dir(engine):
            if name.startswith("batch_transfer_sync"):
                setattr(engine, name, self._wrap(getattr(engine, name)))

    def _wrap(self, own):
        def counted(session_id, buffers, peer_addresses, lengths, *rest, **kw):
            self.calls += 1
            self.descriptors += len(buffers)
            t = time.perf_counter()
            try:
                ret = own(session_id, buffers, peer_addresses, lengths, *rest, **kw)
            except BaseException:
                self.failed += 1
                raise
            finally:
                self.seconds += time.perf_counter() - t
            if ret is None or ret < 0:
                self.failed += 1
            return ret

        return counted


class NixlCounted:
    """Wraps the calls SGLang's ``NixlKVManager`` makes on its NIXL agent: the descriptors
    handed (``make_prepped_xfer``'s ids, ``initialize_xfer``'s list), transfers made,
    failures (an exception, or ERR from ``transfer`` / ``check_xfer_state``), seconds
    inside the making and posting calls, and ``extra["nixl_posted"]``: the descriptors
    NIXL posted after its merge, from each transfer's telemetry once it is DONE. The
    prefill side's transfer workers are threads, hence the lock. NIXL posts
    asynchronously: the seconds are the prep and the post, the wait is the caller's."""

    asynchronous = True

    def posted(self) -> int:
        """Descriptors NIXL posted after its merge, of the transfers DONE so far."""
        with self._lock:
            return int(self.extra["nixl_posted"])

    def __init__(self, agent):
        self.agent = agent
        self.descriptors = self.calls = self.failed = 0
        self.seconds = 0.0
        self.extra = {"nixl_posted": 0}
        self._lock = threading.Lock()
        self._pending: Dict[int, object] = {}  # id(handle) -> handle, until DONE or ERR
        make, init = agent.make_prepped_xfer, agent.initialize_xfer
        post, check = agent.transfer, agent.check_xfer_state

        def make_prepped_xfer(op, local, local_ids, remote, remote_ids, *rest, **kw):
            return self._made(len(local_ids), make, op, local, local_ids, remote, remote_ids,
                              *rest, **kw)

        def initialize_xfer(op, local_descs, remote_descs, *rest, **kw):
            return self._made(local_descs.descCount(), init, op, local_descs, remote_descs,
                              *rest, **kw)

        def transfer(handle, *rest, **kw):
            return self._state(handle, self._timed(post, handle, *rest, **kw))

        def check_xfer_state(handle):
            return self._state(handle, self._timed(check, handle, timed=False))

        agent.make_prepped_xfer, agent.initialize_xfer = make_prepped_xfer, initialize_xfer
        agent.transfer, agent.check_xfer_state = transfer, check_xfer_state

    def _timed(self, own, *args, timed=True, **kw):
        t = time.perf_counter()
        try:
            return own(*args, **kw)
        except BaseException:
            with self._lock:
                self.failed += 1
            raise
        finally:
            if timed:
                with self._lock:
                    self.seconds += time.perf_counter() - t

    def _made(self, descriptors, own, *args, **kw):
        handle = self._timed(own, *args, **kw)
        with self._lock:
            self.calls += 1
            self.descriptors += descriptors
            if handle:
                self._pending[id(handle)] = handle
        return handle

    def _state(self, handle, state):
        """Counts a handle's end once: ERR a failure, DONE its telemetry's descCount."""
        if state in ("DONE", "ERR"):
            with self._lock:
                mine = self._pending.pop(id(handle), None) is not None
            if mine and state == "ERR":
                with self._lock:
                    self.failed += 1
            elif mine:
                posted = kit.nixl_posted(self.agent, handle)
                with self._lock:
                    self.extra["nixl_posted"] += posted
        return state
