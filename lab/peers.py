"""The peers' own code, as the package's tests hold it: ``upstream`` (the one loader of
SGLang's and vLLM's installed code and vLLM's test tree, one install hint),
``sglang_ref`` (SGLang's helpers and backends' descriptor loops), ``pools`` (vLLM's real
free queue and SGLang's allocator, driven as the stacks drive them) and ``vllm_suite``
(vLLM's own tests with the plugin on, and the Hugging Face cache they read).

They live in ``python/tests/`` because the package's tests use them as oracles; the lab
measures against the same ones. The lab imports the package's room, never the other
way: this module is the one place where it does (``from lab.peers import upstream``).
"""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1] / "python" / "tests")
if _TESTS not in sys.path:
    # Appended, not prepended: the package's test modules never shadow the lab's names.
    sys.path.append(_TESTS)

import pools  # noqa: E402
import sglang_ref  # noqa: E402
import upstream  # noqa: E402
import vllm_suite  # noqa: E402

__all__ = ["pools", "sglang_ref", "upstream", "vllm_suite"]
