"""``lexkit schemes``: the registry of position schemes, one line each."""

from __future__ import annotations

from .. import positions
from .table import print_table


def add_parser(sub):
    return sub.add_parser("schemes", help="list the position schemes", description=__doc__)


def run(args) -> int:
    rows = [("name", "family", "parameters (defaults)", "what it does")] + positions.describe()
    print_table(rows, "l" * len(rows[0]))
    return 0
