"""The stand-ins ``lab.sglang_sides`` gives SGLang where it needs a model's scheduler
(``lab.stack_sglang``'s module docs name each and what it stands for): a request and its
row (:class:`Req`, :class:`Kv`), a batch of new requests as ``alloc_for_extend`` reads it
(:class:`Batch`) and a tree cache without a prefix cache (:class:`NoPrefixCache`)."""

from __future__ import annotations


class Kv:
    def __init__(self):
        self.req_pool_idx = None
        self.kv_allocated_len = self.kv_committed_len = 0

    @property
    def holds_kv(self):
        return self.req_pool_idx is not None


class Req:
    def __init__(self, room, sender):
        self.bootstrap_room = room
        self.disagg_kv_sender = sender
        self.disagg_decode_prefix_len = 0
        self.prefix_len = 0
        self.kv = Kv()


class Batch:
    """What ``alloc_for_extend`` reads of a ``ScheduleBatch`` of new requests (no prefix)."""

    def __init__(self, reqs, tokens, tree, req_to_token):
        import torch

        self.reqs, self.tree_cache, self.req_to_token_pool = reqs, tree, req_to_token
        self.device, self.hisparse_coordinator = "cpu", None
        self.prefix_lens, self.extend_lens = [0] * len(reqs), list(tokens)
        self.seq_lens_cpu = torch.tensor(tokens, dtype=torch.int64)
        self.seq_lens = self.seq_lens_cpu
        self.extend_num_tokens = sum(tokens)

    def maybe_evict_swa(self):
        pass

    def is_dllm(self):
        return False


class NoPrefixCache:
    def __init__(self, allocator, page_tokens):
        self.token_to_kv_pool_allocator = allocator
        self.page_size = page_tokens

    def supports_prefix_sharing(self):
        return False

    def maybe_hand_to_session(self, req):
        pass

    def pretty_print(self):
        pass
