"""A conformance suite for RoPE scalings and rotary position schemes: every implementation checked
against lexkit's float64 reference, case by case (``docs/conformance.md``).

>>> from lexkit import conformance
>>> adapter = conformance.adapter("lexkit")
>>> result = conformance.check(adapter, conformance.cases(["yarn/defaults"])[0])
>>> result.status
'pass'

In a runtime's own tests (pytest), its known differences pinned in a file (:mod:`.accepted`)::

    @pytest.mark.parametrize("case", conformance.cases(), ids=str)
    def test_rope_conforms(case):
        conformance.expect(MyAdapter(), case, accepted="conformance-accepted.txt")
"""

from . import adapters  # noqa: F401  (registers the adapters)
from .accepted import expect
from .adapter import (
    ADAPTERS,
    CHECKS,
    Adapter,
    Embedding,
    NotApplicable,
    Unanswered,
    from_functions,
    from_interleaved,
    register,
    to_interleaved,
)
from .cases import CASES, Case, cases
from .config import RopeConfig, hybrid
from .harness import Finding, Result, check, run
from .reference import Reference


def adapter(name: str) -> Adapter:
    """A registered implementation's adapter (ValueError naming the valid ones)."""
    return ADAPTERS.get(name)()


def names() -> list[str]:
    return ADAPTERS.names()


__all__ = ["ADAPTERS", "CASES", "CHECKS", "Adapter", "Case", "Embedding", "Finding", "NotApplicable", "Reference",
           "Result", "RopeConfig", "Unanswered", "adapter", "cases", "check", "expect", "from_functions",
           "from_interleaved", "hybrid", "names", "register", "run", "to_interleaved"]
