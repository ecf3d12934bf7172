"""When vLLM 0.33.0's NIXL worker started and finished each request's transfer, from its
own calls (:class:`Timing`), for ``lab.vllm_engine``'s sides; Mooncake's is
``lab.vllm_mooncake.Timing``."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List


class Timing:
    """Per request: when vLLM started its transfer (pull: ``_read_blocks_for_req`` called
    on the decode side; push: ``_xfer_blocks_for_req`` called by the prefill side's
    ``nixl-push-writer`` thread), how long it spent posting (inside that call), the ids it
    handed NIXL (``make_prepped_xfer``) and when NIXL said DONE for its last handle; and
    vLLM's own transfer stats (``NixlKVConnectorStats``: NIXL's descCount, post and
    transfer durations). Wraps the worker's calls without changing what they do."""

    def __init__(self, worker, mode: str = "pull"):
        self.start: Dict[str, float] = {}
        self.post: Dict[str, float] = {}
        self.done: Dict[str, float] = {}
        self.handles: Dict[Any, str] = {}
        # A DONE handle's request until vLLM reads its telemetry; per request, NIXL's
        # descriptors posted and bytes moved (its telemetry's descCount, totalBytes).
        self.finished: Dict[Any, str] = {}
        self.desc_count: Dict[str, int] = {}
        self.total_bytes: Dict[str, int] = {}
        self.handed = 0
        self.stats: Dict[str, List[float]] = {}
        # The request whose transfer the calling thread is posting: push posts from the
        # writer thread while the engine thread polls.
        self.local = threading.local()
        self.lock = threading.Lock()
        name = "_xfer_blocks_for_req" if mode == "push" else "_read_blocks_for_req"
        post = getattr(worker, name)
        nixl = worker.nixl_wrapper
        make = nixl.make_prepped_xfer  # the plugin's ordering wrapper, when it is on
        check = nixl.check_xfer_state
        telemetry = nixl.get_xfer_telemetry

        def timed_post(*args, **kwargs):
            # Both take (req_id, meta); push calls them by keyword.
            req_id = kwargs["req_id"] if "req_id" in kwargs else args[0]
            t = time.perf_counter()
            with self.lock:
                self.start.setdefault(req_id, t)
            self.local.current = req_id
            try:
                return post(*args, **kwargs)
            finally:
                self.local.current = None
                with self.lock:
                    self.post[req_id] = self.post.get(req_id, 0.0) + time.perf_counter() - t

        def counted_make(*args, **kwargs):
            ids = args[2] if len(args) > 2 else kwargs.get("local_xfer_side_desc_ids", ())
            handle = make(*args, **kwargs)
            current = getattr(self.local, "current", None)
            with self.lock:
                self.handed += len(ids)
                if current is not None:
                    self.handles[handle] = current
            return handle

        def timed_check(handle):
            state = check(handle)
            if state == "DONE":
                with self.lock:
                    if handle in self.handles:
                        rid = self.finished[handle] = self.handles.pop(handle)
                        self.done[rid] = time.perf_counter()
            return state

        def counted_telemetry(handle):
            # vLLM reads a handle's telemetry right after its DONE (base_worker.py, about
            # line 3423): the request's share of NIXL's descCount and totalBytes.
            res = telemetry(handle)
            with self.lock:
                rid = self.finished.pop(handle, None)
                if res is not None and rid is not None:
                    self.desc_count[rid] = self.desc_count.get(rid, 0) + int(res.descCount)
                    self.total_bytes[rid] = self.total_bytes.get(rid, 0) + int(res.totalBytes)
            return res

        setattr(worker, name, timed_post)
        nixl.make_prepped_xfer = counted_make
        nixl.check_xfer_state = timed_check
        nixl.get_xfer_telemetry = counted_telemetry

    def pending(self) -> int:
        """Handles posted and not yet seen DONE."""
        with self.lock:
            return len(self.handles)

    def add_stats(self, stats):
        for k, v in stats.data.items():
            self.stats.setdefault(k, []).extend(v)

    def summary(self):
        rids = [r for r in self.start if r in self.done]
        xfer = [(self.done[r] - self.start[r]) * 1e3 for r in rids]
        post = [self.post[r] * 1e3 for r in rids]
        s = self.stats
        # engine_ms: from the posting call's return to NIXL's DONE for the last handle.
        return dict(xfer_ms=xfer, handed=self.handed, post_ms=post,
                    per_posted=[self.desc_count.get(r, 0) for r in rids],
                    per_bytes=[self.total_bytes.get(r, 0) for r in rids],
                    engine_ms=[x - p for x, p in zip(xfer, post)],
                    nixl_posted=int(sum(s.get("num_descriptors", []))),
                    nixl_post_s=float(sum(s.get("post_duration", []))),
                    nixl_xfer_s=float(sum(s.get("transfer_duration", []))))
