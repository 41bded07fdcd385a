"""``lexkit patterns``: the registry of inference-time attention patterns, one line each."""

from __future__ import annotations

from .. import attention
from .table import print_table


def add_parser(sub):
    return sub.add_parser("patterns", help="list the attention patterns", description=__doc__)


def run(args) -> int:
    print_table([("name", "parameters (defaults)", "what a query sees")] + attention.describe(), "lll")
    print("W=auto: the model's training length where one is known (required otherwise)")
    print("composed: A|B either, A&B both (& binds tighter; parentheses group), e.g. first:4|window:64")
    return 0
