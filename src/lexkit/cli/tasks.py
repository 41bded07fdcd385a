"""``lexkit tasks``: the registry of retrieval tasks, one line each (``--import MODULE`` adds a
module's own; ``lexkit retrieval --task``, ``lexkit train --mix`` and the study take their names)."""

from __future__ import annotations

from .. import tasks
from .table import print_table


def add_parser(sub):
    return sub.add_parser("tasks", help="list the retrieval tasks", description=__doc__)


def run(args) -> int:
    print_table([("name", "size", "styles", "what it asks")] + tasks.describe(), "lrll")
    print("size: the default needle (letters or digits, --size); styles: bytes for lexkit runs, standard for hf:")
    return 0
