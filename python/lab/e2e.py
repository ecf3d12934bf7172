"""KV pages through real transfer engines, end to end, every byte verified.

A prefill process (this one) and a decode process (spawned) each hold a KV pool shaped
like a served model's: 64 layers x (K, V) = 128 layer buffers of ``pool`` pages of
``--page-bytes`` bytes (default 256: one token of one 128-dim bf16 KV head, what a rank
of Qwen2.5-32B, 64 layers and 8 KV heads, holds at tensor parallelism 8 with page size
1). Every 8-byte word of the prefill pool names its layer, K or V, page and offset. A
request's page lists (``workloads``: allocator traces, 5% breaks, singletons) move
through each engine in each way:

- ``sglang``: SGLang 0.5.23's real helper, then that backend's real per-layer loop
  (``sglang_ref``), into the engine.
- ``per_page``: one descriptor per page per layer buffer: NIXL's prepped lists (how
  SGLang's and vLLM's NIXL connectors send KV pages: prepared once for the whole pool,
  indices per transfer) and per-page Mooncake batches.
- ``corun``: ``corun.transfer_descriptors`` in the form the engine takes (NIXL: Nx3
  arrays; Mooncake: lists, and arrays measured beside them). On NIXL, when the runs are
  nearly as many as the pages (``NIXL_PREPPED_ABOVE``), there is nothing to merge, and
  corun hands over the pool's prepped per-page lists with indices instead: NIXL takes
  those at about 0.2 µs per descriptor against 0.35 µs for Nx3 arrays (descriptors and
  handoff of the all-singletons rows, N = 16,384, in
  ``results/intel-xeon-avx512f-2cpu/2026-11-30-09dddf3/e2e-nixl.txt``).
  ``corun.count_runs`` counts the runs first (no arrays built).

Mooncake's TCP transport rejects a batch of 4,096 transfers ("TCP lane queue-full"), so
every Mooncake way posts batches of ``MOONCAKE_BATCH``. After each way the decode side
checks every byte of every page it was sent, and that every other byte of its pool is
still zero, then clears the pages for the next way.

    python python/e2e.py            # N = 2,048 and 16,384 pages, every workload, both engines
    python python/e2e.py --quick    # N = 256, a pool of 1,024 pages: seconds
    python python/e2e.py --replay 40   # 40 requests per allocator from replay.py, every way

With ``--replay`` the requests come from the real allocators (``replay.py``: vLLM 0.33's
free queue, SGLang's paged allocator) and move in the ways of issue 22 and 23 side by side
(ascending, either-direction, order-free, placed), each request verified; the last lines,
one per engine and allocator:
``e2e-replay engine=<name> allocator=<vllm|sglang> requests=<n> verified=yes asc=<d>/<ms>ms
either=<d>/<ms>ms orderfree=<d>/<ms>ms placed=<d>/<ms>ms``. On NIXL, vLLM's requests also
go the way vLLM 0.33's NIXL connector posts them (prepped descriptor lists, one
descriptor per region and block, ids as its ``_compute_desc_ids`` computes them,
``make_prepped_xfer`` in vLLM's order: ``vllm_ids``) and with the same ids in corun's order
(each run descending on both sides listed ascending, so that NIXL's own merge of
neighbours adjacent in the same order takes it: ``ordered_ids``); the line gains
``vllm_ids=<ids>/<ms>ms vllm_ids_nixl=<d> ordered_ids=<ids>/<ms>ms ordered_ids_nixl=<d>``,
ids per buffer and the descriptors per buffer NIXL posted after its merge (its
telemetry's ``descCount``). NIXL 1.5 merges prepped descriptors itself (``make_prepped_xfer``,
unless ``skip_desc_merge``): vLLM's order posts as many as its ascending runs (``asc``),
corun's order as many as its either-direction runs (``either``).

The last lines, one per engine and workload:
``e2e engine=<name> workload=<name> pages=<N> verified=yes corun_ms=<x> sglang_ms=<y> per_page_ms=<z>``
(for the largest N run).
"""

import argparse
import multiprocessing as mp
import time

import numpy as np

import corun
from corun.vllm_plugin import nixl_order
from lab import replay as rp
from lab import nixl_exit, results, sglang_ref, upstream, workloads

LAYERS = 64
BUFFERS = 2 * LAYERS
MOONCAKE_BATCH = 512
XFER_TIMEOUT = 120.0  # seconds a NIXL transfer may take before it is an error


class TransferError(RuntimeError):
    """A transfer that did not complete: names the engine, the cause and how far it got."""


# --- the KV pool ------------------------------------------------------------------


def words(buf, pages, per_page):
    """The prefill pool's words of buffer ``buf`` (``2 * layer + kv``) for ``pages``:
    0xA5 tag, layer, K/V, page, offset."""
    layer, kv = divmod(buf, 2)
    head = np.uint64((0xA5 << 56) | (layer << 48) | (kv << 47))
    return head | (np.asarray(pages, np.uint64)[:, None] << np.uint64(24)) | np.arange(per_page, dtype=np.uint64)


class Pool:
    """``BUFFERS`` layer buffers of ``pages`` pages of ``page_bytes``, in one mapping."""

    def __init__(self, pages, page_bytes, fill):
        self.pages, self.page_bytes = pages, page_bytes
        self.words = page_bytes // 8
        self.mem = np.zeros((BUFFERS, pages, self.words), dtype=np.uint64)
        if fill:
            for b in range(BUFFERS):
                self.mem[b] = words(b, np.arange(pages), self.words)
        self.base = self.mem.ctypes.data
        self.nbytes = self.mem.nbytes
        self.buffer_bytes = pages * page_bytes

    def bases(self):
        return [self.base + b * self.buffer_bytes for b in range(BUFFERS)]

    def check(self, src, dst, sent=BUFFERS, unknown=()):
        """Every page ``dst[i]`` of the first ``sent`` buffers holds prefill page
        ``src[i]``; every other byte is zero, but in the buffers ``unknown`` (those of a
        batch an engine failed part-way), which are only cleared. Clears the pages it
        checked. Returns an error message or None."""
        others = np.ones(self.pages, dtype=bool)
        others[dst] = False
        for b in range(BUFFERS):
            if b in unknown:
                self.mem[b] = 0
                continue
            if b >= sent:
                if self.mem[b].any():
                    page = int(np.flatnonzero(self.mem[b].any(axis=1))[0])
                    return f"buffer {b}: page {page} was written but not sent"
                continue
            got = self.mem[b, dst]
            want = words(b, src, self.words)
            if not np.array_equal(got, want):
                bad = int(np.flatnonzero((got != want).any(axis=1))[0])
                return (f"buffer {b}: page {int(dst[bad])} (position {bad}) does not hold "
                        f"prefill page {int(src[bad])}")
            if self.mem[b, others].any():
                page = int(np.flatnonzero(others & self.mem[b].any(axis=1))[0])
                return f"buffer {b}: page {page} was written but not sent"
            self.mem[b, dst] = 0
        return None


# --- engines ----------------------------------------------------------------------


class Mooncake:
    name = "mooncake"

    def __init__(self, role):
        from mooncake.engine import TransferEngine

        self.engine = TransferEngine()
        if self.engine.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") != 0:
            raise TransferError("mooncake: initialize failed")

    def register(self, pool):
        if self.engine.register_memory(pool.base, pool.nbytes) != 0:
            raise TransferError(f"mooncake: register_memory of {pool.nbytes} bytes failed")

    def address(self):
        return f"127.0.0.1:{self.engine.get_rpc_port()}"

    def connect(self, peer_address):
        self.peer = peer_address

    def post(self, src_addrs, dst_addrs, lengths, batch=MOONCAKE_BATCH):
        """Posts the descriptors in batches, in order; stops at the first failed batch
        and raises ``TransferError`` naming it and how much was done before it."""
        n = len(src_addrs)
        for k, i in enumerate(range(0, n, batch)):
            j = min(n, i + batch)
            ret = self.engine.batch_transfer_sync_write(
                self.peer, src_addrs[i:j], dst_addrs[i:j], lengths[i:j])
            if ret != 0:
                raise TransferError(
                    f"mooncake: batch {k} (descriptors {i}..{j - 1} of {n}) to {self.peer} "
                    f"failed with {ret}; descriptors 0..{i - 1} were written, none after")


class Nixl:
    name = "nixl"

    def __init__(self, role):
        from nixl_cu12._api import nixl_agent, nixl_agent_config

        self.role = role
        # Telemetry: each transfer's descriptor count after NIXL's own merge (descCount).
        self.agent = nixl_agent(role, nixl_agent_config(backends=["UCX"], capture_telemetry=True))
        self.prepped = None

    def register(self, pool):
        self.pool = pool
        descs = self.agent.get_reg_descs(np.array([[pool.base, pool.nbytes, 0]], np.uint64), "DRAM")
        if self.agent.register_memory(descs) is None:
            raise TransferError("nixl: register_memory failed")

    def address(self):
        return self.agent.get_agent_metadata()

    def connect(self, peer_metadata):
        self.peer = self.agent.add_remote_agent(peer_metadata)
        name = self.peer
        self.peer_name = name.decode() if isinstance(name, bytes) else str(name)

    def run(self, handle, what, done=None):
        """Posts ``handle`` and polls it until done; an error state, an engine exception,
        or no completion within ``XFER_TIMEOUT``, raises ``TransferError``. Returns
        ``done(handle)`` (called once done, before the handle is released), or None."""
        if not handle:
            raise TransferError(f"nixl: {what}: the transfer could not be created")
        try:
            state = self.engine_call(what, self.agent.transfer, handle)
            deadline = time.monotonic() + XFER_TIMEOUT
            while state not in ("DONE", "ERR"):
                if time.monotonic() > deadline:
                    raise TransferError(f"nixl: {what}: not done after {XFER_TIMEOUT:.0f} s")
                state = self.engine_call(what, self.agent.check_xfer_state, handle)
            if state == "ERR":
                raise TransferError(f"nixl: {what} to {self.peer_name} failed (state ERR)")
            return None if done is None else self.engine_call(what, done, handle)
        finally:
            self.agent.release_xfer_handle(handle)

    def engine_call(self, what, f, *args):
        """``f(*args)``, with NIXL's exceptions (a peer that disconnected, say) raised as
        ``TransferError`` naming the transfer and the peer."""
        try:
            return f(*args)
        except Exception as e:
            raise TransferError(f"nixl: {what} to {self.peer_name}: {type(e).__name__}: {e}") from e

    def xfer(self, local, remote, what):
        """Nx3 ``[addr, len, dev]`` arrays: descriptor lists, then the transfer."""
        t = time.perf_counter()
        handle = self.engine_call(what, self.agent.initialize_xfer,
            "WRITE", self.agent.get_xfer_descs(local, "DRAM"),
            self.agent.get_xfer_descs(remote, "DRAM"), self.peer)
        handoff = time.perf_counter() - t
        self.run(handle, what)
        return handoff

    def prepped_xfer(self, local_ids, remote_ids, what, parts):
        """A transfer of the pool's prepped descriptors by id (``prep``), as vLLM's and
        SGLang's connectors post KV pages: ``make_prepped_xfer("WRITE", local handle,
        local ids, remote handle, remote ids)``, then the transfer. Adds ``handoff`` and
        ``transfer`` to ``parts``; returns the descriptors NIXL posted after its merge of
        neighbours adjacent on both sides in the same order (its telemetry's descCount)."""
        handle = timed(parts, "handoff", lambda: self.engine_call(
            what, self.agent.make_prepped_xfer, "WRITE", self.prepped[0], local_ids,
            self.prepped[1], remote_ids))
        # The telemetry is read once the transfer is done (before, NIXL says NOT_POSTED).
        return timed(parts, "transfer", lambda: self.run(
            handle, what, lambda h: self.agent.get_xfer_telemetry(h).descCount))

    def prep(self, remote_pool_base, pool):
        """Prepared per-page descriptor lists for the whole pool, local and remote, as
        SGLang's NIXL connector makes them at registration (not timed per transfer)."""
        def rows(base):
            addrs = (np.uint64(base) + np.arange(BUFFERS * pool.pages, dtype=np.uint64)
                     * np.uint64(pool.page_bytes))
            return np.column_stack((addrs, np.full_like(addrs, pool.page_bytes), np.zeros_like(addrs)))
        self.prepped = (
            self.agent.prep_xfer_dlist("", rows(pool.base), "DRAM"),
            self.agent.prep_xfer_dlist(self.peer, rows(remote_pool_base), "DRAM"),
        )


ENGINES = {"mooncake": Mooncake, "nixl": Nixl}

# Runs per page above which corun hands NIXL the prepped per-page lists (see the module
# docs): the break-even of 0.2 µs per page descriptor against 0.35 µs per run descriptor.
NIXL_PREPPED_ABOVE = 0.6


def decode_main(engine_name, pool_pages, page_bytes, conn):
    """The decode process: a zeroed pool, registered; checks what it was sent."""
    try:
        pool = Pool(pool_pages, page_bytes, fill=False)
        engine = ENGINES[engine_name]("decode")
        engine.register(pool)
        conn.send(("ready", engine.address(), pool.base))
        if engine_name == "nixl":
            engine.connect(conn.recv())
        while True:
            msg = conn.recv()
            if msg[0] == "exit":
                return
            _, src, dst, sent, unknown = msg
            conn.send(pool.check(src, dst, sent, unknown))
    except Exception as e:  # reported to the prefill side, which raises it
        conn.send(("error", f"{type(e).__name__}: {e}"))


class Session:
    """A prefill pool and engine here, a decode pool and engine in a spawned process."""

    def __init__(self, engine_name, pool_pages, page_bytes):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=decode_main, args=(engine_name, pool_pages, page_bytes, child))
        self.proc.start()
        self.pool = Pool(pool_pages, page_bytes, fill=True)
        self.engine = ENGINES[engine_name]("prefill")
        self.engine.register(self.pool)
        msg = self.recv()
        if msg[0] != "ready":
            raise TransferError(f"decode process: {msg[1]}")
        _, address, self.remote_base = msg
        self.engine.connect(address)
        if engine_name == "nixl":
            self.conn.send(self.engine.address())
        self.src_bases = self.pool.bases()
        self.dst_bases = [self.remote_base + b * self.pool.buffer_bytes for b in range(BUFFERS)]
        self.item_lens = [page_bytes] * BUFFERS

    def recv(self, timeout=600):
        if not self.conn.poll(timeout):
            raise TransferError("decode process did not answer")
        return self.conn.recv()

    def check(self, src, dst, sent=BUFFERS, unknown=()):
        self.conn.send(("check", src, dst, sent, tuple(unknown)))
        err = self.recv()
        if err is not None:
            raise TransferError(f"verification failed: {err}")

    def close(self):
        if self.proc.is_alive():
            self.conn.send(("exit",))
            self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()

    def layers(self):
        return list(zip(self.src_bases, self.dst_bases, self.item_lens))

    def check_pages(self, src, dst):
        """The corun way refuses page indices outside the registered pools (an engine
        would write past them, or fail part-way)."""
        for name, idx in (("src", src), ("dst", dst)):
            if len(idx) and (int(np.min(idx)) < 0 or int(np.max(idx)) >= self.pool.pages):
                bad = int(np.flatnonzero((idx < 0) | (idx >= self.pool.pages))[0])
                raise IndexError(f"{name} page {int(idx[bad])} at position {bad} is outside "
                                 f"the registered pool of {self.pool.pages} pages")


# --- the ways ---------------------------------------------------------------------


def timed(parts, key, f):
    t = time.perf_counter()
    out = f()
    parts[key] = parts.get(key, 0.0) + time.perf_counter() - t
    return out


def post_sampled(s, descs, parts, limit):
    """Posts ``descs`` (layer-major: each buffer's descriptors together) to Mooncake. Past
    ``limit`` descriptors only the first buffers' are posted and the transfer time is
    scaled to all of them (a per-descriptor engine cost dominates: at 60 us each, 2M
    page descriptors would take two minutes). Returns the buffers sent."""
    n = len(descs[0])
    sent = BUFFERS if n <= limit else max(1, limit * BUFFERS // n)
    k = n * sent // BUFFERS
    t = time.perf_counter()
    s.engine.post(*(col[:k] for col in descs))
    parts["transfer"] = (time.perf_counter() - t) * BUFFERS / sent
    return sent


def mooncake_ways(s, src, dst, limit):
    """The ways, each a function that moves the pages once and returns (descriptor
    count, time parts, buffers sent)."""

    def sglang():
        p = {}
        groups = timed(p, "grouping", lambda: sglang_ref.group_concurrent_contiguous(src, dst))
        blocks = timed(p, "descriptors", lambda: sglang_ref.mooncake_blocks(groups, s.layers()))
        return len(blocks[0]), p, post_sampled(s, blocks, p, limit)

    def per_page():
        def build():
            pb = np.uint64(s.pool.page_bytes)
            sa = (np.array(s.src_bases, np.uint64)[:, None] + src.astype(np.uint64) * pb).ravel()
            da = (np.array(s.dst_bases, np.uint64)[:, None] + dst.astype(np.uint64) * pb).ravel()
            return sa.tolist(), da.tolist(), [s.pool.page_bytes] * len(sa)

        p = {}
        descs = timed(p, "descriptors", build)
        return len(descs[0]), p, post_sampled(s, descs, p, limit)

    def corun_way(form):
        def way():
            p = {}
            s.check_pages(src, dst)
            d = timed(p, "descriptors", lambda: corun.transfer_descriptors(
                src, dst, s.src_bases, s.dst_bases, s.item_lens, form=form))
            return len(d[0]), p, post_sampled(s, d, p, limit)
        return way

    return {"sglang": sglang, "per_page": per_page,
            "corun_lists": corun_way("lists"), "corun_arrays": corun_way("arrays")}


def nixl_ways(s, src, dst, limit):
    e = s.engine
    if e.prepped is None:
        e.prep(s.remote_base, s.pool)

    def xfer(p, local, remote, what):
        t = time.perf_counter()
        p["handoff"] = e.xfer(local, remote, what)
        p["transfer"] = time.perf_counter() - t - p["handoff"]

    def sglang():
        p = {}
        groups = timed(p, "grouping", lambda: sglang_ref.group_concurrent_contiguous(src, dst))
        local, remote = timed(p, "descriptors", lambda: sglang_ref.nixl_reqs(groups, s.layers()))
        xfer(p, local, remote, "sglang way")
        return len(local), p, BUFFERS

    def prepped(p):
        def indices():
            # As SGLang's repeat_indices_over_layers: buffer b's slots start at b * pages.
            off = np.arange(BUFFERS, dtype=np.int64)[:, None] * s.pool.pages
            return (off + src[None, :]).ravel(), (off + dst[None, :]).ravel()

        si, di = timed(p, "descriptors", indices)
        e.prepped_xfer(si, di, "per-page prepped", p)
        return len(si), p, BUFFERS

    def per_page():
        return prepped({})

    def corun_way():
        p = {}
        s.check_pages(src, dst)
        runs = timed(p, "grouping", lambda: corun.count_runs(src, dst))
        if runs > NIXL_PREPPED_ABOVE * len(src):
            # Nothing to merge: the per-page lists the pool prepared, by index.
            return prepped(p)
        local, remote = timed(p, "descriptors", lambda: corun.transfer_descriptors(
            src, dst, s.src_bases, s.dst_bases, s.item_lens, form="nixl"))
        xfer(p, local, remote, "corun way")
        return len(local), p, BUFFERS

    return {"sglang": sglang, "per_page": per_page, "corun_nixl": corun_way}


WAYS = {"mooncake": mooncake_ways, "nixl": nixl_ways}
PARTS = ["grouping", "descriptors", "handoff", "transfer"]


def total(parts):
    return sum(parts.values())


def measure(s, way, src, dst, rounds):
    """Runs ``way`` ``rounds`` times, each checked by the decode side; the median round
    (by total) with its parts."""
    results = []
    for _ in range(rounds):
        count, parts, sent = way()
        s.check(src, dst, sent)
        results.append((total(parts), count, parts, sent))
    results.sort(key=lambda r: r[0])
    return results[len(results) // 2][1:]


def run(engine_name, sizes, names, page_bytes, rounds, limit, report):
    """Every workload at every size through one engine; returns the summary rows."""
    rows = []
    for n in sizes:
        pool_pages = 4 * n
        s = Session(engine_name, pool_pages, page_bytes)
        try:
            # Warm up: the engine's connection and SGLang's compiled code.
            warm = workloads.make("trace-p1", min(n, 64), pool_pages)
            for way in WAYS[engine_name](s, *warm, limit).values():
                measure(s, way, *warm, 1)
            for name in names:
                src, dst = workloads.make(name, n, pool_pages)
                ways = {}
                for way_name, way in WAYS[engine_name](s, src, dst, limit).items():
                    count, parts, sent = ways[way_name] = measure(s, way, src, dst, rounds)
                    cells = " | ".join(f"{parts.get(k, 0) * 1e3:.1f}" for k in PARTS)
                    note = "" if sent == BUFFERS else f" (transfer of {sent} of {BUFFERS} buffers, scaled)"
                    report(f"| {engine_name} | {name} | {n} | {way_name}{note} | {count:,} | {cells} | "
                           f"{total(parts) * 1e3:.1f} |")
                corun_ms = min(total(p) for w, (_, p, _) in ways.items() if w.startswith("corun"))
                rows.append((engine_name, name, n, corun_ms * 1e3,
                             total(ways["sglang"][1]) * 1e3, total(ways["per_page"][1]) * 1e3))
        finally:
            s.close()
    return rows


# --- replayed requests ----------------------------------------------------------------


def vllm_desc_ids(blocks, regions, num_blocks):
    """vLLM 0.33's prepped-descriptor ids for ``blocks``: one descriptor per region and
    block, region-major, ``region * num_blocks + block`` (``NixlBaseConnectorWorker.
    _compute_desc_ids`` in ``kv_connector/v1/nixl/base_worker.py``, its all-attention path
    with one KV-cache group: ``region_offsets[:, None] + block_arr`` raveled, where the
    offsets are the cumulative block counts of the regions and ``block_arr`` is int32)."""
    region_offsets = np.cumsum([0] + [num_blocks] * (regions - 1))
    return (region_offsets[:, None] + np.asarray(blocks, dtype=np.int32)[None, :]).ravel()


def merge_order(src, dst):
    """The pairs ``(src[i], dst[i])`` reordered so that NIXL's merge covers the runs that
    descend on both sides: NIXL merges two descriptors only when local and remote are each
    adjacent *in the order listed*, so every either-direction run that descends is listed
    ascending on both sides. The set of pairs is unchanged. The vLLM plugin's own
    ``nixl_order`` (what its ``nixl_order`` feature posts), so e2e measures that."""
    return nixl_order(np.asarray(src), np.asarray(dst))


def vllm_nixl_ways(s, lists, report):
    """vLLM's requests posted through NIXL the way vLLM 0.33's connector posts them
    (``vllm_ids``: prepped descriptors, ids by ``vllm_desc_ids`` in vLLM's order,
    ``make_prepped_xfer``) and with the same ids in ``merge_order`` (``ordered_ids``),
    request by request side by side (which goes first alternates), each verified. Returns
    ``{way: (ids per buffer, seconds, descriptors NIXL posted per buffer)}``."""
    pages = s.pool.pages
    out = {"vllm_ids": [0, 0.0, 0], "ordered_ids": [0, 0.0, 0]}

    def vllm_way(src, dst, p):
        li, ri = timed(p, "descriptors", lambda: (
            vllm_desc_ids(src, BUFFERS, pages), vllm_desc_ids(dst, BUFFERS, pages)))
        return len(li), s.engine.prepped_xfer(li, ri, "vllm_ids way", p)

    def ordered_way(src, dst, p):
        src, dst = timed(p, "grouping", lambda: merge_order(src, dst))
        return vllm_way(src, dst, p)

    ways = {"vllm_ids": vllm_way, "ordered_ids": ordered_way}
    for k, (src, dst) in enumerate(lists):
        src, dst = src.astype(np.int64), dst.astype(np.int64)
        s.check_pages(src, dst)
        for name in (list(ways) if k % 2 == 0 else list(ways)[::-1]):
            p = {}
            ids, merged = ways[name](src, dst, p)
            s.check(src, dst)
            row = out[name]
            row[0] += ids // BUFFERS
            row[1] += total(p)
            row[2] += merged
    for name, (ids, seconds, merged) in out.items():
        report(f"| nixl | vllm | {len(lists)} | {name} ({merged / BUFFERS:.0f} after NIXL's merge) "
               f"| {ids:,} | {seconds * 1e3:.1f} |")
    return {name: (ids, seconds, merged / BUFFERS) for name, (ids, seconds, merged) in out.items()}

# The replay's pools for the end-to-end run (a pool of 3,000 pages of 256 B in 128 buffers
# is 98 MB a side), and its workload: 16-token pages at 80% occupancy, no decode growth.
REPLAY_POOLS = (2000, 3000)
REPLAY_WAYS = ("asc", "either", "orderfree", "placed")
REPLAY_WARM = 300


def replayed(engine_name, allocator, requests, page_bytes, limit, report):
    """Requests replayed through the real allocators (``replay.py``) moved through one
    engine, every way side by side, each request verified by the decode side: ``asc`` and
    ``either`` (the allocator's own pages, ascending or either-direction runs),
    ``orderfree`` (sorted by destination first) and ``placed`` (the second side's pages
    placed against the first side's, ``corun.adapters``). Returns ``{way: (descriptors per
    buffer, seconds)}`` over all requests."""

    w = workloads.by_name("p16-occ80-g0")
    # The requests after REPLAY_WARM others, when the pools have turned over.
    own = rp.replay(allocator, w, REPLAY_WARM + requests, *REPLAY_POOLS).lists[-requests:]
    placed = rp.replay(allocator, w, REPLAY_WARM + requests, *REPLAY_POOLS, window=None).lists[-requests:]
    s = Session(engine_name, max(REPLAY_POOLS) + 1, page_bytes)
    out = {}
    try:
        if engine_name == "nixl" and s.engine.prepped is None:
            s.engine.prep(s.remote_base, s.pool)
        form = "nixl" if engine_name == "nixl" else "lists"

        def post(d, p, what):
            """Posts descriptors `d` in the engine's form; returns the buffers sent."""
            if engine_name != "nixl":
                return post_sampled(s, d, p, limit)
            timed(p, "transfer", lambda: s.engine.xfer(*d, what))
            return BUFFERS

        # Warm up the connection with the first request, unmeasured.
        src, dst = (a.astype(np.int64) for a in own[0])
        post(corun.transfer_descriptors(src, dst, s.src_bases, s.dst_bases, s.item_lens, form=form),
             {}, "warm-up")
        s.check(src, dst)
        for way in REPLAY_WAYS:
            lists = placed if way == "placed" else own
            direction = "ascending" if way == "asc" else "either"
            count, seconds = 0, 0.0
            for src, dst in lists:
                src, dst = src.astype(np.int64), dst.astype(np.int64)
                s.check_pages(src, dst)
                p = {}
                if way == "orderfree":
                    src, dst = timed(p, "grouping", lambda: corun.sort_by_destination(src, dst))
                d = timed(p, "descriptors", lambda: corun.transfer_descriptors(
                    src, dst, s.src_bases, s.dst_bases, s.item_lens, form=form, direction=direction))
                s.check(src, dst, post(d, p, f"{way} way"))
                count += len(d[0]) // BUFFERS
                seconds += total(p)
            out[way] = (count, seconds)
            report(f"| {engine_name} | {allocator} | {len(lists)} | {way} | {count:,} | {seconds * 1e3:.1f} |")
        if engine_name == "nixl" and allocator == "vllm":
            out.update(vllm_nixl_ways(s, own, report))
    finally:
        s.close()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="N = 256: seconds")
    ap.add_argument("--pages", type=int, nargs="*", help="request sizes N (default 2048 16384)")
    ap.add_argument("--engines", nargs="*", default=list(ENGINES), choices=list(ENGINES))
    ap.add_argument("--workloads", nargs="*", default=workloads.WORKLOADS, choices=workloads.WORKLOADS)
    ap.add_argument("--page-bytes", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3, help="rounds per way (the median is kept)")
    ap.add_argument("--sample-over", type=int, default=150_000,
                    help="Mooncake ways with more descriptors send only the first buffers' "
                         "and scale the transfer time")
    ap.add_argument("--replay", type=int, metavar="REQUESTS", default=None,
                    help="move this many replayed requests per allocator (replay.py) every way "
                         "instead of the synthetic workloads")
    args = ap.parse_args(argv)
    # Each engine asked for, and SGLang's own loops (the ways it posts, read from its files).
    upstream.require("e2e.py", [*args.engines, "sglang"])
    if argv is None:
        return command_line(args)
    return measure_args(args)


def command_line(args):
    """``main`` from the command line: the report also goes to results/ (not with
    --quick), and the process leaves without NIXL's native teardown."""
    if not args.quick:
        results.tee("e2e-replay.txt" if args.replay is not None else "e2e.txt")
    measure_args(args)
    nixl_exit.leave(0)


def measure_args(args):
    """The measurements ``args`` ask for: the synthetic workloads' rows, or with
    ``--replay`` the replayed requests' lines."""
    if args.replay is not None:
        return main_replay(args)
    sizes = args.pages or ([256] if args.quick else [2048, 16384])
    print(f"KV pool: {LAYERS} layers x (K, V) = {BUFFERS} buffers, pool of 4N pages of "
          f"{args.page_bytes} B each side; Mooncake batches of {MOONCAKE_BATCH}; times in ms\n")
    print("| engine | workload | N | way | descriptors | grouping | descriptors | handoff | transfer | total |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for engine in args.engines:
        rows += run(engine, sizes, args.workloads, args.page_bytes, args.rounds, args.sample_over,
                    lambda line: print(line, flush=True))
    print()
    for engine, name, n, c, sg, pp in rows:
        if n == max(sizes):
            print(f"e2e engine={engine} workload={name} pages={n} verified=yes "
                  f"corun_ms={c:.1f} sglang_ms={sg:.1f} per_page_ms={pp:.1f}")
    return rows


def replay_field(way, got):
    """``<way>=<descriptors or ids per buffer>/<ms>ms``; the prepped ways add
    ``<way>_nixl=<descriptors NIXL posted per buffer, after its merge>``."""
    field = f"{way}={got[0]}/{got[1] * 1e3:.1f}ms"
    return field if len(got) == 2 else f"{field} {way}_nixl={got[2]:.0f}"


def main_replay(args):
    print(f"Replayed requests (replay.py, p16-occ80-g0, pools of {REPLAY_POOLS[0]} prefill and "
          f"{REPLAY_POOLS[1]} decode pages of {args.page_bytes} B in {BUFFERS} buffers), every "
          f"request verified; descriptors per buffer, times in ms for all requests\n")
    print("| engine | allocator | requests | way | descriptors | total ms |")
    print("|---|---|---|---|---|---|")
    lines = []
    for engine in args.engines:
        for allocator in ("vllm", "sglang"):
            got = replayed(engine, allocator, args.replay, args.page_bytes, args.sample_over,
                           lambda line: print(line, flush=True))
            lines.append(f"e2e-replay engine={engine} allocator={allocator} requests={args.replay} "
                         "verified=yes " + " ".join(replay_field(k, v) for k, v in got.items()))
    print()
    for line in lines:
        print(line)
    return lines
