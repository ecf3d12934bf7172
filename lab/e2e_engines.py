"""The two sides of ``lab.e2e``'s runs: the KV pool (``BUFFERS`` layer buffers whose every
8-byte word names its layer, K or V, page and offset), the two engines as ``e2e.py``
drives them (Mooncake's ``TransferEngine`` over TCP, NIXL's agent over UCX), and
:class:`Session`: a prefill pool and engine in this process, a decode pool and engine in
a ``lab.kit.Child`` that checks every byte it was sent."""

import time

import numpy as np

from lab import kit

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


class DecodeSide:
    """The decode process (``lab.kit``'s protocol): a zeroed pool, registered; checks what
    it was sent."""

    def __init__(self, engine_name, pool_pages, page_bytes):
        self.pool = Pool(pool_pages, page_bytes, fill=False)
        self.engine = ENGINES[engine_name]("decode")
        self.engine.register(self.pool)

    def address(self):
        return self.engine.address(), self.pool.base

    def connect(self, peer_address):
        self.engine.connect(peer_address)

    def check(self, src, dst, sent, unknown):
        return self.pool.check(src, dst, sent, unknown)


class Session:
    """A prefill pool and engine here, a decode pool and engine in a spawned process."""

    def __init__(self, engine_name, pool_pages, page_bytes):
        self.decode = kit.Child("decode", DecodeSide, engine_name, pool_pages, page_bytes,
                                nixl=engine_name == "nixl")
        self.proc = self.decode.proc
        self.pool = Pool(pool_pages, page_bytes, fill=True)
        self.engine = ENGINES[engine_name]("prefill")
        self.engine.register(self.pool)
        self.call()  # built
        address, self.remote_base = self.call("address")
        self.engine.connect(address)
        if engine_name == "nixl":
            self.call("connect", self.engine.address())
        self.src_bases = self.pool.bases()
        self.dst_bases = [self.remote_base + b * self.pool.buffer_bytes for b in range(BUFFERS)]
        self.item_lens = [page_bytes] * BUFFERS

    def call(self, *msg):
        """A command to the decode process (none: wait until it is built); its failure is a
        ``TransferError``."""
        try:
            return self.decode.call(*msg) if msg else self.decode.ready()
        except kit.SideError as e:
            raise TransferError(f"decode process: {e}") from None

    def check(self, src, dst, sent=BUFFERS, unknown=()):
        err = self.call("check", src, dst, sent, tuple(unknown))
        if err is not None:
            raise TransferError(f"verification failed: {err}")

    def close(self):
        if self.proc.is_alive():
            self.decode.send("exit")
        self.decode.close()


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


# --- posting ---------------------------------------------------------------------


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




def total(parts):
    return sum(parts.values())
