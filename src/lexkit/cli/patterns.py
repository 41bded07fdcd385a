"""``lexkit patterns``: the registry of inference-time attention patterns, one line each."""

from __future__ import annotations

from .. import attention
from .schemes import print_rows


def add_parser(sub):
    return sub.add_parser("patterns", help="list the attention patterns", description=__doc__)


def run(args) -> int:
    print_rows([("name", "parameters (defaults)", "what a query sees")] + attention.describe())
    print("W=auto: the model's training length where one is known (required otherwise)")
    return 0
