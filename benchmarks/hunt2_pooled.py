"""The hunt, round 2 (docs/hunt.md): each arm's exact match at 16x per seed and pooled over its seeds, with the
pooled 95 % Wilson interval (the three-seed reading pre-registered for B11), from a sweep's document.

    python benchmarks/hunt2_pooled.py hunt2/sweep.json
"""

from __future__ import annotations

import sys
from collections import defaultdict

from common import documents_per_cell, read_sweep
from lexkit.core.stats import wilson
from lexkit.documents.render import text_table


def pooled(doc, multiple: int = 16) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """(arm, format or task) -> [(seed, exact match)] at ``multiple`` x the training length, from a
    :class:`lexkit.study.sweep.SweepResults` (:func:`common.read_sweep`)."""
    out: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for entry, part in doc.scored():
        for row in entry.rows:
            if row.multiple == multiple:
                out[(entry.label, part)].append((entry.seed, row.accuracy))
    return out


def lines(doc) -> list[str]:
    """One line per format or task and arm: the seeds, exact match per seed and pooled [95 %], in %."""
    samples = documents_per_cell(doc)
    rows = [["part", "arm", "seeds", "per seed", "pooled [95 %]"]]
    for (arm, part), seeds in sorted(pooled(doc).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        right = round(sum(a for _, a in seeds) * samples)
        n = samples * len(seeds)
        low, high = wilson(right, n)
        rows.append([part, arm[:40], str([s for s, _ in seeds]), str([round(100 * a) for _, a in seeds]),
                     f"{100 * right / n:.0f} [{100 * low:.0f}-{100 * high:.0f}]"])
    return text_table(rows, "lllll")


def main() -> None:
    print("\n".join(lines(read_sweep(sys.argv[1]))))


if __name__ == "__main__":
    main()
