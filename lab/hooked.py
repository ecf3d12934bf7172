"""The plugins' placement hooks called as their patches call them, on pools the lab
made: ``Plugin`` runs a hook's own body (``corun._vllm_place._place`` before vLLM's
``get_new_blocks``, ``corun._sglang_place._place_batch`` before SGLang's
``alloc_extend``) and times the stack's own allocation after it as the hook does, so that
the plugin's counters, budget and ``place_times()`` are what a serving process would
show, without a scheduler around the pool. ``Plugin.prepare(pool)`` is the hook on the
pool's making (vLLM's ``BlockPool.__init__``)."""

import time
from types import SimpleNamespace


class Plugin:
    """Placement as the plugin does it, under its budget per call: its own hook bodies
    (``corun._vllm_place._place``, ``corun._sglang_place._place_batch``), the stack's own
    allocation timed as the hooks time it, the plugin's counters and ``place_times()``.
    The hooks' patches are not installed (the pools here are the replay's): each call
    goes to the body the patch would call. Run in a process of its own (the plugin's
    state is per process: see ``workload_report``)."""

    def __init__(self, allocator):
        if allocator == "vllm":
            from corun import _vllm_place
            from corun._vllm_life import LIFE

            # The features a NIXL deployment with placement turns on (placement then
            # judges either-direction runs, as the replay counts them).
            LIFE.on.update({"place", "nixl_order"})
            _vllm_place.configure()  # CORUN_VLLM_PLACE_CACHED, as enable() reads it
            self.body = _vllm_place._place
            self.prepare = _vllm_place.prepare  # BlockPool.__init__'s hook: the mirror made
        else:
            from corun import _sglang_place
            from corun._sglang_life import LIFE

            LIFE.on.add("place")
            self.body = _sglang_place._place_batch
            self.prepare = lambda pool: None
        self.life = LIFE
        LIFE.budget.configure()
        LIFE.counters.reset()
        LIFE.budget.reset()

    def _stack(self, alloc, n):
        start = time.thread_time_ns()
        try:
            return alloc(n)
        finally:
            self.last_stack_ns = time.thread_time_ns() - start  # the stack's own, for the lab's lines
            self.life.budget.stack(n, self.last_stack_ns)

    def vllm(self, pool, remote):
        """The decode side's new blocks for `remote` (get_new_blocks, hooked)."""
        if len(remote):
            self.body(pool, remote, 0, len(remote))
        return self._stack(pool.get_new_blocks, len(remote))

    def sglang(self, pool, dst, alloc=None, bound=None):
        """The prefill side's pages for a batch of one request with decode pages `dst`
        (``alloc_extend``, hooked): the batch as the hook reads it (``batch_destinations``:
        the request's transfer infos), then ``alloc(n)`` for its ``n`` pages (default
        ``pool.alloc``, the port's), timed as the stack's own allocation. ``bound``: the
        pages past which the allocation merges its staged frees (default ``n``, the
        port's ``alloc``; ``alloc_extend``'s is ``n + 2`` for one request)."""
        n, ps = len(dst), pool.page_size
        info = SimpleNamespace(dst_kv_indices=dst, is_dummy=False)
        kv_mgr = SimpleNamespace(transfer_infos={0: {0: info}})
        req = SimpleNamespace(bootstrap_room=0, disagg_decode_prefix_len=0,
                              disagg_kv_sender=SimpleNamespace(kv_mgr=kv_mgr))
        self.body(pool, SimpleNamespace(reqs=[req]), [0], [n * ps], n if bound is None else bound)
        return self._stack(alloc or pool.alloc, n)

    def report(self):
        return {**self.life.counters.snapshot(), **self.life.budget.times(), "budget_us": self.life.budget.us}
