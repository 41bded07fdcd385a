"""Where a study's time went: its ``log.jsonl`` (one line per task the cache ran, with its seconds) summed by
part (the grid's training, evaluation, resolution and principles; table E's evaluations and fine-tunes; table G's
training and scoring), beside the study's wall time (``results.json``'s last invocation) and the share of the
workers' time each part took. A task read from the cache counts nothing.

    python benchmarks/study_profile.py study [--out docs/benchmarks-study.md]

The parts are told apart by the cache's task names (lexkit.study.cache.Cache.log) and, for training, by the run's
directory: ``mix-`` (table G's runs train on a mix), ``-ft-`` (table E's fine-tunes), else the grid's cells.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from common import table, write_report
from lexkit.documents.blocks import Heading, Text
from lexkit.documents.render import markdown

#: (the cache's task, what it is) -> the part of the study it belongs to, in the order printed
PARTS = ["grid: training", "grid: evaluation (bpb)", "grid: resolution", "grid: principles",
         "table E: evaluations", "table E: fine-tunes (training)", "table E: fine-tunes (evaluation)",
         "table G: training", "table G: scoring", "other"]


def part_of(entry: dict) -> str:
    """The part of the study a log entry's work belongs to (:data:`PARTS`)."""
    task, name = entry["task"], entry["name"]
    if task == "train":
        return "table G: training" if name.startswith("mix-") else (
            "table E: fine-tunes (training)" if "-ft-" in name else "grid: training")
    if task == "extension" and "-ft-" in name:
        return "table E: fine-tunes (evaluation)"
    return {"eval": "grid: evaluation (bpb)", "resolution": "grid: resolution", "principles": "grid: principles",
            "extension": "table E: evaluations", "retrieval": "table G: scoring",
            "task": "table G: scoring"}.get(task, "other")


def profile(study: Path) -> dict:
    """The study's ran tasks summed by part, its wall time and worker count (JSON-ready)."""
    entries = [json.loads(line) for line in (study / "log.jsonl").read_text().splitlines() if line.strip()]
    ran = [e for e in entries if e.get("action") == "ran"]
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for entry in ran:
        seconds[part_of(entry)] += entry["seconds"]
        counts[part_of(entry)] += 1
    results = json.loads((study / "results.json").read_text())
    last = (results.get("invocations") or [{}])[-1]
    return {"study": str(study), "wall_seconds": last.get("wall_seconds", results.get("wall_seconds")),
            "work": {k: v for k, v in last.items() if k not in ("finished", "wall_seconds")},
            "parts": [{"part": p, "tasks": counts[p], "seconds": round(seconds[p], 1)} for p in PARTS if counts[p]],
            "task_seconds": round(sum(seconds.values()), 1)}


def render(doc: dict) -> str:
    total = doc["task_seconds"]
    rows = [[p["part"], str(p["tasks"]), f"{p['seconds']:,.0f}", f"{100 * p['seconds'] / total:.1f} %"]
            for p in doc["parts"]]
    rows.append(["all", str(sum(p["tasks"] for p in doc["parts"])), f"{total:,.0f}", "100 %"])
    wall = doc["wall_seconds"]
    said = (f"wall time {wall / 60:.1f} min ({wall:,.0f} s); the tasks' seconds summed over the workers "
            f"{total:,.0f} s, {total / wall:.2f}x the wall time") if wall else "no wall time recorded"
    return markdown([Heading("Where the study's time went", 1),
                     Text(f"`python benchmarks/study_profile.py {doc['study']}`: {said}."),
                     table(["part", "tasks", "seconds", "share of the tasks' time"], rows)])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", help="a study's directory (its log.jsonl and results.json)")
    parser.add_argument("--out", default=None, help="markdown report (JSON beside it); default: print it")
    args = parser.parse_args(argv)
    study = Path(args.study)
    if not (study / "log.jsonl").is_file() or not (study / "results.json").is_file():
        raise SystemExit(f"error: {study} holds no log.jsonl and results.json; give a study's directory")
    doc = profile(study)
    if args.out:
        write_report(args.out, render(doc), doc)
    else:
        print(render(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
