"""The hunt, round 2 (docs/hunt.md): each arm's exact match at 16x per seed and pooled over its seeds, with the
pooled 95 % Wilson interval (the three-seed reading pre-registered for B11), from a sweep's document.

    python benchmarks/hunt2_pooled.py hunt2/sweep.json
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

from lexkit.core.stats import wilson


def pooled(doc: dict, multiple: int = 16) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """(arm, format or task) -> [(seed, exact match)] at ``multiple`` x the training length."""
    out: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for c in doc["retrieval"]["configs"]:
        for row in c["rows"]:
            if row["multiple"] == multiple:
                out[(c["label"], c.get("format") or "tilde")].append((c["seed"], row["accuracy"]))
    for task, configs in doc["tasks"].items():
        for c in configs:
            for row in c["rows"]:
                if row["multiple"] == multiple:
                    out[(c["label"], task)].append((c.get("seed"), row["accuracy"]))
    return out


def main() -> None:
    doc = json.loads(open(sys.argv[1]).read())
    samples = doc["config"]["samples"] * len(doc["retrieval"]["depths"])  # documents per seed and cell
    for (arm, part), seeds in sorted(pooled(doc).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        right = round(sum(a for _, a in seeds) * samples)
        n = samples * len(seeds)
        low, high = wilson(right, n)
        print(f"{part:28s} {arm[:40]:40s} seeds {[s for s, _ in seeds]} per seed "
              f"{[round(100 * a) for _, a in seeds]} pooled {100 * right / n:.0f} [{100 * low:.0f}-{100 * high:.0f}]")


if __name__ == "__main__":
    main()
