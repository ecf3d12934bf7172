"""corun's lab: the measurements of the package (``python/``, which it imports and which
never imports it) and the stacks it drives. Run from the root of a checkout.

Each measurement is a module with a ``main()``, run as a file (``python lab/bench.py``;
an entry module puts the checkout first on ``sys.path``) or as ``python -m lab.bench``.
Its tests are ``lab/tests`` (the root's ``pytest.ini``).

- ``peers``: the peers' own code as the package's tests hold it (``python/tests``):
  ``upstream`` (the one loader of SGLang's and vLLM's code, the one install hint and
  ``require``: the one check that a command's engines and stacks are installed),
  ``sglang_ref`` (SGLang's helper and backend loops), ``pools`` (vLLM's real free queue
  and SGLang's allocator, as the stacks drive them), ``vllm_suite`` (vLLM's test tree and
  the Hugging Face cache its configs come from).
- ``workloads``: the request streams and the page lists every measurement runs on.
- ``results``: where reports are written (``results/<machine>/<date>-<commit>/``).
- ``timing``: the timers and summaries the measurements share.
- ``ways``: the ways of turning page lists into transfers that the replays count.
- ``hooked``: the plugins' hook bodies called as their patches call them, on the peers'
  pools (the plugin's counters, budget and ``place_times()`` as a serving process has them).
- ``nixl_exit``: the one way out of a process that made NIXL agents.
- ``bench``, ``place_scaling``, ``place_budget``, ``replay``, ``e2e``: the measurements
  (``python lab/<name>.py --help``; ``place_scaling`` is ``bench.py --scaling``,
  ``place_budget`` is ``bench.py --budget``).
- ``kit``: the stack-run kit: the one way to start a side of a run in its own process and
  talk to it (``Child``), one free port, one NIXL descriptor count (``nixl_posted``).
- ``engine_counts``: the transfer engines' calls counted where a stack makes them.
- ``e2e`` (on ``e2e_engines``: the pool, the engines, the session; ``e2e_replay``: the
  replayed requests): KV pages through the engines directly.
- ``stack_e2e`` (the entry), ``stack_common``, ``stack_vllm`` (its engine side
  ``vllm_engine``, whose KV shape and pattern are ``vllm_kv``, whose NIXL timing is
  ``vllm_nixl_timing`` and whose Mooncake connector's shims and timing are
  ``vllm_mooncake``), ``stack_sglang`` (its sides
  ``sglang_sides``, their stand-ins for SGLang's scheduler ``sglang_shims``): real bytes
  through the stacks' own connectors (``python lab/stack_e2e.py --stack vllm|sglang``),
  their processes started with ``kit``, on the shared options (``--model``,
  ``--block-tokens``: ``stack_common.MODELS``), request stream, alternation and line of
  ``stack_common``; ``stack_grid`` runs them all over models and block sizes
  (``stack_e2e.py --grid``), ``cost_model`` fits each engine's
  ``time = a + b * posted + bytes / c`` from their lines and prices them at the field's
  costs (a projection).
"""
