"""corun's lab: the measurements and the upstream code they compare with, apart from the
package (``pysrc/corun``).

Each measurement is a module with a ``main()``, run by its entry script in ``python/``
(``python python/bench.py`` runs ``lab.bench``: a script's own folder is first on
``sys.path``, so ``import lab`` needs no path manipulation). The tests import the lab as
a package (pytest's ``pythonpath`` in ``pyproject.toml``).

- ``upstream``: the one loader of SGLang's and vLLM's own code, with the one install hint,
  and ``require``: the one check that a command's engines and stacks are installed.
- ``sglang_ref``: SGLang's helper and its Mooncake and NIXL backend loops (via ``upstream``).
- ``workloads``: the request streams and the page lists every measurement runs on.
- ``results``: where reports are written (``results/<machine>/<date>-<commit>/``).
- ``timing``: the timers and summaries the measurements share.
- ``pools``: vLLM's real free queue driven as ``BlockPool`` drives it, and a numpy port of
  SGLang's paged allocator (the replays' pools).
- ``ways``: the ways of turning page lists into transfers that the replays count.
- ``hooked``: the plugins' hook bodies called as their patches call them, on the lab's
  pools (the plugin's counters, budget and ``place_times()`` as a serving process has them).
- ``nixl_exit``: the one way out of a process that made NIXL agents.
- ``bench``, ``place_scaling``, ``place_budget``, ``replay``, ``e2e``, ``vllm_suite``: the
  measurements (``python python/<name>.py --help``; ``place_scaling`` is ``bench.py
  --scaling``, ``place_budget`` is ``bench.py --budget``).
- ``kit``: the stack-run kit: the one way to start a side of a run in its own process and
  talk to it (``Child``), one free port, one NIXL descriptor count (``nixl_posted``).
- ``engine_counts``: the transfer engines' calls counted where a stack makes them.
- ``e2e`` (on ``e2e_engines``: the pool, the engines, the session; ``e2e_replay``: the
  replayed requests): KV pages through the engines directly.
- ``stack_common``, ``stack_vllm`` (its engine side ``vllm_engine``, whose KV shape and
  pattern are ``vllm_kv`` and whose Mooncake connector's shims and timing are
  ``vllm_mooncake``), ``stack_sglang`` (its sides ``sglang_sides``, their stand-ins
  for SGLang's scheduler ``sglang_shims``): real bytes through the stacks' own connectors (``python
  python/stack_e2e.py --stack vllm|sglang``), their processes started with ``kit``, on the
  shared options (``--model``, ``--block-tokens``: ``stack_common.MODELS``), request
  stream, alternation and line of ``stack_common``; ``stack_grid`` runs them all over
  models and block sizes (``stack_e2e.py --grid``), ``cost_model`` fits each engine's
  ``time = a + b * posted + bytes / c`` from their lines and prices them at the field's
  costs (a projection).
"""
