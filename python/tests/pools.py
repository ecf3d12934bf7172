"""The serving stacks' allocators as the replays drive them: vLLM 0.33's real free queue
(``VllmPool``, driven as ``BlockPool`` drives it) and a numpy port of SGLang 0.5.23's
paged allocator (``SglangPool``). Their docstrings name the upstream lines they follow;
``lab/replay.py``'s module docs say how a request stream drives them."""

import numpy as np


# --- vLLM's real free queue ---------------------------------------------------------


class VllmPool:
    """One vLLM block pool: the real free queue, driven as ``BlockPool`` drives it. The
    attributes placement's adapter uses have ``BlockPool``'s names (``blocks``,
    ``free_block_queue``, ``enable_caching``, ``get_new_blocks``), so the adapter runs on
    this pool as on vLLM's."""

    def __init__(self, classes, blocks, caching):
        Block, Queue = classes
        self.blocks = [Block(block_id=i) for i in range(blocks)]
        self.free_block_queue = Queue(self.blocks)
        self.enable_caching = caching
        self.cached = {}  # hash -> block (in use or in the free queue)
        self.hits = self.lookups = 0

    def free_count(self):
        return self.free_block_queue.num_free_blocks

    get_num_free_blocks = free_count  # BlockPool's name, read by the vLLM plugin's placement

    def get_new_blocks(self, n):
        # block_pool.py get_new_blocks: popleft_n, evicting what it takes from the cache.
        out = self.free_block_queue.popleft_n(n)
        for b in out:
            if b.block_hash is not None:
                self.cached.pop(b.block_hash, None)
                b.reset_hash()
            b.ref_cnt += 1
        return out

    def touch_prefix(self, hashes):
        """The cached prefix of a request whose full blocks have `hashes` (None: not
        cacheable), touched: taken out of the free queue where it waits (block_pool.py
        ``touch``)."""
        hit = []
        if self.enable_caching:
            for h in hashes:
                b = self.cached.get(h) if h is not None else None
                if b is None:
                    break
                hit.append(b)
            self.lookups += sum(h is not None for h in hashes)
            self.hits += len(hit)
            for b in hit:
                if b.ref_cnt == 0:
                    self.free_block_queue.remove(b)
                b.ref_cnt += 1
        return hit

    def cache(self, blocks, hashes):
        """Caches the full blocks of a request (block_pool.py ``cache_full_blocks``)."""
        if self.enable_caching:
            for b, h in zip(blocks, hashes):
                if h is not None and h not in self.cached:
                    b.set_block_hash(h)
                    self.cached[h] = b

    def allocate(self, hashes):
        """Blocks for a request: the cached prefix touched, the rest new."""
        hit = self.touch_prefix(hashes)
        new = self.get_new_blocks(len(hashes) - len(hit))
        self.cache(new, hashes[len(hit):])
        return hit + new

    def free(self, blocks):
        # single_type_kv_cache_manager.py free: free_blocks(reversed(blocks)); block_pool.py
        # free_blocks: hashed blocks to the tail (LRU), the others to the head (LIFO).
        last, first = [], []
        for b in reversed(blocks):
            b.ref_cnt -= 1
            if b.ref_cnt == 0:
                (first if b.block_hash is None or not self.enable_caching else last).append(b)
        self.free_block_queue.prepend_n(first)
        self.free_block_queue.append_n(last)


# --- SGLang's paged allocator, ported ------------------------------------------------


class SglangPool:
    """A numpy port of SGLang 0.5.23's ``PagedTokenToKVPoolAllocator`` page bookkeeping
    (``srt/mem_cache/allocator/paged.py``), P/D mode (``need_sort=True``)."""

    def __init__(self, pages, need_sort=True):
        # clear(): free pages 1..num_pages (page 0 is the padded slot).
        self.free_pages = np.arange(1, pages + 1, dtype=np.int64)
        self.staged_pages = []
        self.need_sort = need_sort
        self.page_size = 1  # the port counts pages (the plugin reads it to turn tokens into pages)

    def free_count(self):
        return len(self.free_pages) + sum(len(s) for s in self.staged_pages)

    def merge_and_sort_free(self):
        # merge_and_sort_free(): torch.sort(torch.cat((free_pages, *staged_pages)))
        if self.staged_pages:
            self.free_pages = np.sort(np.concatenate([self.free_pages, *self.staged_pages]))
            self.staged_pages = []

    def front(self, n):
        """The pages ``alloc(n)`` would hand out now (changing nothing)."""
        if n > len(self.free_pages) and self.staged_pages:
            return np.sort(np.concatenate([self.free_pages, *self.staged_pages]))[:n]
        return self.free_pages[:n]

    def alloc(self, n):
        # alloc(): merge when short, then free_pages[:num_pages].
        if n > len(self.free_pages):
            self.merge_and_sort_free()
        if n > len(self.free_pages):
            return None
        out, self.free_pages = self.free_pages[:n], self.free_pages[n:]
        return out

    def free_page_ids(self, pages):
        # _release_page_ids(): staged when need_sort, else torch.cat((*page_ids, free_pages)).
        pages = np.asarray(pages, dtype=np.int64)
        if self.need_sort:
            self.staged_pages.append(pages)
        else:
            self.free_pages = np.concatenate([pages, self.free_pages])


# --- MoRIIO's inputs --------------------------------------------------------------


def make_orderfree(n, breaks, seed=42, page=16384):
    """MoRIIO's inputs for ``n`` blocks of ``page`` bytes (``compute_block_transfer_offsets``
    makes them: byte offsets of the local and remote blocks in request order, one size
    each): both sides' block ids run together, each position starting a new run with
    probability ``breaks`` (a jump of 2-999 on each side); the runs come shuffled, every
    other one descending on both sides (vLLM's free queue hands recycled blocks out in
    descending runs), so at 0% the request is one ascending run and at 100% every block
    stands alone in random order."""
    rng = np.random.default_rng(seed)
    brk = rng.random(n) < breaks
    brk[0] = True
    local = 100 + np.cumsum(np.where(brk, rng.integers(2, 1000, n), 1))
    remote = 50 + np.cumsum(np.where(brk, rng.integers(2, 1000, n), 1))
    runs = np.split(np.arange(n), np.flatnonzero(brk)[1:])
    order = rng.permutation(len(runs))
    idx = np.concatenate([runs[r][::-1] if k % 2 else runs[r] for k, r in enumerate(order)])
    return (local[idx] * page).tolist(), (remote[idx] * page).tolist(), [page] * n
