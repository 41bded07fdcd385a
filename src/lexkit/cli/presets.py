"""``lexkit presets``: the named sizes and every value each one sets (what a flag of ``lexkit
train`` or ``lexkit study`` defaults to when it is not given)."""

from __future__ import annotations

from ..training import presets
from ..training.settings import preset_flags
from .table import print_table


def add_parser(sub):
    return sub.add_parser("presets", help="list the size presets and their values", description=__doc__)


def run(args) -> int:
    names = list(presets.PRESETS)
    keys = list(dict.fromkeys(k for values in presets.PRESETS.values() for k in values))
    rows = [("setting", "flag", *names)]
    flags = preset_flags()
    rows += [(key, flags.get(key, "-"), *(_cell(presets.PRESETS[n].get(key, "-")) for n in names))
             for key in keys]
    print_table(rows, "ll" + "r" * len(names))
    print("train and study use `small` unless --preset says otherwise; a flag given overrides its value")
    return 0


def _cell(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
