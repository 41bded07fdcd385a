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
import os
from collections import defaultdict
from pathlib import Path

import torch

from common import table, write_report
from lexkit.core.provenance import flops_per_token
from lexkit.documents.blocks import Heading, Text
from lexkit.documents.render import markdown
from lexkit.training import runs
from training import matmul_gflops

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


def matmul_rate(rows: int, d_model: int, repeats: int = 5) -> float:
    """FLOP/s of one float32 matrix multiply of the model's MLP shape ([rows, d] x [d, 4d]) on this
    process's threads (the benchmarks' one matmul rate, :func:`training.matmul_gflops`): the best of
    ``repeats`` timings of 20 multiplies."""
    return max(matmul_gflops(repeats=20, shape=(rows, d_model, 4 * d_model)) for _ in range(repeats)) * 1e9


def floor(study: Path, names: list[str]) -> list[dict]:
    """Each training run of ``names`` (directories under ``study/runs``): its training FLOPs
    (:func:`lexkit.core.provenance.flops_per_token` x tokens of the steps it trained) and the seconds they
    take at one thread's matrix-multiply rate at its MLP's shape (:func:`matmul_rate`): the least time
    its steps can take in float32 on one core, whatever is fused."""
    out, rates = [], {}
    for name in names:
        config = runs.read_config(study / "runs" / name)
        model, train = config["model"], config["train"]
        state = runs.trainer_state(study / "runs" / name) or {}
        steps, rows, length = int(state.get("step", train["steps"])), train["batch"], model["train_len"]
        params = runs.build_model(config).num_params()
        flops = flops_per_token(params, model["n_layers"], model["d_model"], length) * rows * length * steps
        key = (rows * length, model["d_model"])
        rates[key] = rates.get(key) or matmul_rate(*key)
        out.append({"run": name, "steps": steps, "flops": flops, "floor_seconds": flops / rates[key],
                    "matmul_flops_per_s": rates[key]})
    return out


def profile(study: Path, with_floor: bool = False) -> dict:
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
    doc = {"study": str(study), "wall_seconds": last.get("wall_seconds", results.get("wall_seconds")),
           "work": {k: v for k, v in last.items() if k not in ("finished", "wall_seconds")},
           "parts": [{"part": p, "tasks": counts[p], "seconds": round(seconds[p], 1)} for p in PARTS if counts[p]],
           "task_seconds": round(sum(seconds.values()), 1)}
    if with_floor:
        trained = [e for e in ran if e["task"] == "train"]
        doc["floor"] = floor(study, [e["name"] for e in trained])
        for row, entry in zip(doc["floor"], trained):
            row["part"], row["seconds"] = part_of(entry), entry["seconds"]
    return doc


def floor_row(part: str, rows: list[dict]) -> list[str]:
    """The floor table's row of one part: its runs' steps, FLOPs, matmul rates, floor and time taken."""
    def total(key: str) -> float:
        return sum(r[key] for r in rows)

    rates = [r["matmul_flops_per_s"] / 1e9 for r in rows]
    return [part, str(len(rows)), f"{total('steps'):,.0f}", f"{total('flops') / 1e12:.1f}",
            f"{min(rates):.0f}-{max(rates):.0f}", f"{total('floor_seconds'):,.0f}", f"{total('seconds'):,.0f}",
            f"{total('floor_seconds') / total('seconds'):.2f}"]


def render(doc: dict) -> str:
    total = doc["task_seconds"]
    rows = [[p["part"], str(p["tasks"]), f"{p['seconds']:,.0f}", f"{100 * p['seconds'] / total:.1f} %"]
            for p in doc["parts"]]
    rows.append(["all", str(sum(p["tasks"] for p in doc["parts"])), f"{total:,.0f}", "100 %"])
    wall = doc["wall_seconds"]
    said = (f"wall time {wall / 60:.1f} min ({wall:,.0f} s); the tasks' seconds summed over the workers "
            f"{total:,.0f} s, {total / wall:.2f}x the wall time") if wall else "no wall time recorded"
    blocks = [Heading("Where the study's time went", 1),
              Text(f"`python benchmarks/study_profile.py {doc['study']}`: {said}."),
              table(["part", "tasks", "seconds", "share of the tasks' time"], rows)]
    if doc.get("floor"):
        by_part: dict[str, list[dict]] = defaultdict(list)
        for row in doc["floor"]:
            by_part[row["part"]].append(row)
        floor_rows = [floor_row(part, rs) for part, rs in by_part.items()]
        least = sum(r["floor_seconds"] for r in doc["floor"])
        blocks += [Heading("The training's floor", 2),
                   Text("Each training run's FLOPs (6N + 12LdT a token, lexkit.core.provenance.flops_per_token, over "
                        "the tokens of the steps it trained) at the rate of one float32 matrix multiply of its MLP's "
                        "shape on one thread of this machine, measured now (the best of 5): the least time its steps "
                        f"take however well the rest is fused. Summed: {least:,.0f} s of one core"
                        f", {least / doc['workers'] / 60:.1f} min of wall time over {doc['workers']} workers."),
                   table(["part", "runs", "steps", "TFLOPs", "matmul GFLOP/s", "floor (s)", "took (s)",
                          "floor / took"], floor_rows)]
    return markdown(blocks)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", help="a study's directory (its log.jsonl and results.json)")
    parser.add_argument("--out", default=None, help="markdown report (JSON beside it); default: print it")
    parser.add_argument("--floor", action="store_true",
                        help="also each training run's FLOPs at this machine's one-thread matmul rate (run idle)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for --floor's matmul (default 1)")
    parser.add_argument("--workers", type=int, default=os.cpu_count(),
                        help="the study's workers, for --floor's wall time (default: the cores)")
    args = parser.parse_args(argv)
    study = Path(args.study)
    if not (study / "log.jsonl").is_file() or not (study / "results.json").is_file():
        raise SystemExit(f"error: {study} holds no log.jsonl and results.json; give a study's directory")
    torch.set_num_threads(args.threads)
    doc = profile(study, with_floor=args.floor)
    doc["workers"] = args.workers
    if args.out:
        write_report(args.out, render(doc), doc)
    else:
        print(render(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
