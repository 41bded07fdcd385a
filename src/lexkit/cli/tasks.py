"""``lexkit tasks``: the registry of retrieval tasks, one line each (``--import MODULE`` adds a
module's own; ``lexkit retrieval --task``, ``lexkit train --mix`` and the study take their names),
then the needle formats of ``copy`` (:mod:`lexkit.needles`), trained and held out."""

from __future__ import annotations

from .. import needles, tasks
from .table import print_table


def add_parser(sub):
    return sub.add_parser("tasks", help="list the retrieval tasks", description=__doc__)


def run(args) -> int:
    print_table([("name", "size", "styles", "what it asks")] + tasks.describe(), "lrll")
    print("size: the default needle (letters or digits, --size); styles: bytes for lexkit runs, standard for hf:")
    print()
    print_table([("format", "", "what the needle looks like")] + needles.describe(), "lll")
    print("formats of copy (`lexkit retrieval --task copy --format NAME`); `--mix induction:F` trains on the "
          "trained ones, drawn per document, never on the held-out ones (docs/retrieval.md)")
    return 0
