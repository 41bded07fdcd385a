"""``lexkit tasks``: the registry of retrieval tasks, one line each with its parameters
(``--import MODULE`` adds a module's own; ``lexkit retrieval --task`` takes a task's spec,
``kvthread:hops=3``; ``lexkit train --mix`` and the study take their names), then the needle
formats of ``copy`` (:mod:`lexkit.tasks.needles`), trained and held out."""

from __future__ import annotations

from .. import tasks
from ..tasks import needles
from .table import print_table


def add_parser(sub):
    return sub.add_parser("tasks", help="list the retrieval tasks", description=__doc__)


def run(args) -> int:
    print_table([("name", "size", "styles", "parameters", "a mix draws", "what it asks")] + tasks.describe(),
                "lrllll")
    print("size: the default needle (letters, digits or hash symbols, --size); styles: bytes for lexkit runs, "
          "standard for hf:; parameters: set in the task's spec, `--task kvthread:hops=3,direction=backward` "
          "(docs/retrieval.md); a mix draws: per training document with `--mix TASK:F` (the other parameters "
          "fixed in its spec, `--mix kvthread:supervise=every:F`), and first (the first F of the steps of "
          "`lexkit train --curriculum F`) only the curriculum's values")
    print()
    print_table([("format", "", "what the needle looks like")] + needles.describe(), "lll")
    print("formats of copy (`lexkit retrieval --task copy --format NAME`); `--mix induction:F` trains on the "
          "trained ones, drawn per document, never on the held-out ones (docs/retrieval.md)")
    return 0
