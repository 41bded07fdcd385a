"""Layouts against one goal: a configuration flat in bpb at 16x (within 3 % of its own
1x) and retrieving (>= 90 % exact match at 16x at every depth). Each configuration trains with the
recipe of table G in release 0.3 (the ``quick`` preset unless it says otherwise, batch 64, lr 3e-3,
the copy mix at 75 %: one needle format; table G now trains its rows, these layouts among them, with
:data:`lexkit.study.recipe.RECIPE`, the general induction mix), logs the copy probe every 100 steps
(``val_copy_bits`` / ``val_copy_exact`` on 32 held-out needles at the training length: the phase
change), and is scored as table G scores: copy needles of 12 letters at 1, 2, 4, 8 and 16x the
training length and depths 0, 25, 50, 75 and 100 %, under its own layout (``causal``),
teacher-forced exact match (equal to greedy decoding on a byte model), with bpb on validation
documents at 1x and 16x beside it.

    python benchmarks/layouts.py --out /tmp/layouts --jobs 2           # every configuration
    python benchmarks/layouts.py --out /tmp/layouts --only hwfa16 rope  # some
    python benchmarks/layouts.py --out /tmp/layouts --table             # the table of what ran

Runs are kept under OUT/runs/NAME (a finished run is scored again, not retrained); results in
OUT/NAME.json. Nothing is tuned on the evaluation needles: the recipe is fixed, the budgets are
fixed per configuration below, and the probe's needles are held out from training.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

#: name -> (flags of `lexkit train` beyond the recipe, steps, patterns to score)
CONFIGS: dict[str, tuple[list[str], int, list[str]]] = {
    "rope": (["--scheme", "rope"], 6000, ["causal", "window"]),
    "hwfa16": (["--layout", "hwfa:W=16"], 6000, ["causal", "global=window:64"]),
    "hwfa32": (["--layout", "hwfa:W=32"], 6000, ["causal"]),
    "hwfa16-nologn": (["--layout", "hwfa:W=16,logn=false"], 6000, ["causal"]),
    "hwfa16-llama4": (["--layout", "rope@window:16;none@causal+llama4:floor=64"], 6000, ["causal"]),
    "hwfa16-ssmax": (["--layout", "rope@window:16;none@causal+ssmax"], 6000, ["causal"]),
    "hwfa2-16": (["--layout", "hwfa2:W=16"], 6000, ["causal"]),
    "irope-bca16": (["--layout", "rope@bca:16;none@causal+llama4:floor=64"], 6000, ["causal"]),
    "hwfa16-sink": (["--layout", "rope@window:16+sink;none@causal+logn+sink"], 6000, ["causal"]),
    "hwfa16-shift": (["--layout", "hwfa:W=16", "--token-shift", "0.5"], 6000, ["causal"]),
    "alibi-shift": (["--scheme", "alibi", "--token-shift", "0.5"], 6000, ["causal"]),
    "none-shift": (["--scheme", "none", "--token-shift", "0.5"], 6000, ["causal"]),
    "rope-shift": (["--scheme", "rope", "--token-shift", "0.5"], 6000, ["causal"]),
    "hwfa16-4l": (["--layout", "hwfa:W=16", "--layers", "4"], 6000, ["causal"]),
    # the same with token shift (the previous-token feature given: hwfa16 alone never changed phase in 6,000 steps)
    "hwfa16-shift-nologn": (["--layout", "hwfa:W=16,logn=false", "--token-shift", "0.5"], 6000, ["causal"]),
    "hwfa16-shift-llama4": (["--layout", "rope@window:16;none@causal+llama4:floor=64", "--token-shift", "0.5"], 6000,
                            ["causal"]),
    "hwfa16-shift-ssmax": (["--layout", "rope@window:16;none@causal+ssmax", "--token-shift", "0.5"], 6000, ["causal"]),
    "hwfa2-16-shift": (["--layout", "hwfa2:W=16", "--token-shift", "0.5"], 6000, ["causal"]),
    "hwfa32-shift": (["--layout", "hwfa:W=32", "--token-shift", "0.5"], 6000, ["causal"]),
    "hwfa16-shift-sink": (["--layout", "rope@window:16+sink;none@causal+logn+sink", "--token-shift", "0.5"], 6000,
                          ["causal"]),
    "irope-bca16-shift": (["--layout", "rope@bca:16;none@causal+llama4:floor=64", "--token-shift", "0.5"], 6000,
                          ["causal"]),
    "hwfa16-shift-4l": (["--layout", "hwfa:W=16", "--layers", "4", "--token-shift", "0.5"], 6000, ["causal"]),
}
#: configurations scored under another scheme than they trained with (`lexkit eval --scheme`): HWFA2's full layer
#: trains as RoPE and runs under ReRoPE with w inside the training length (N/2)
EVAL_SCHEME = {"hwfa2-16": "global=rerope:w=32", "hwfa2-16-shift": "global=rerope:w=32"}
RECIPE = ["--preset", "quick", "--batch", "64", "--lr", "3e-3", "--mix", "copy:0.75", "--eval-every", "100",
          "--save-every", "500"]
MULTIPLES = (1, 2, 4, 8, 16)
DEPTHS = (0.0, 25.0, 50.0, 75.0, 100.0)
SAMPLES = 20  # documents per (length, depth): 100 per length


def train(out: Path, name: str, threads: int, steps: int | None = None) -> None:
    flags, default_steps, _ = CONFIGS[name]
    steps = steps or default_steps
    run = out / "runs" / name
    argv = [sys.executable, "-m", "lexkit", "train", *flags, *RECIPE, "--steps", str(steps), "--threads",
            str(threads), "--quiet", "--out", str(run)]
    if (run / "config.json").is_file():
        argv.append("--resume")  # finished: nothing to do; stopped: continue
    subprocess.run(argv, check=True)


def score(out: Path, name: str, threads: int) -> dict:
    import torch

    import lexkit
    from lexkit.retrieval import context_rows
    from lexkit.training import runs

    torch.set_num_threads(threads)
    run = out / "runs" / name
    subject = lexkit.load(str(run), scheme=EVAL_SCHEME.get(name))
    rows, cells = context_rows(subject, name, task="copy", multiples=MULTIPLES, patterns=CONFIGS[name][2],
                               depths=DEPTHS, samples=SAMPLES, size=12, bpb_multiples=(1, 16), max_docs=8,
                               decode=False)
    entropy = global_entropy(subject, [64 * m for m in MULTIPLES])
    metrics = runs.read_metrics(run)
    curve = [(r["step"], r["val_copy_exact"], r["val_copy_bits"]) for r in metrics if "val_copy_exact" in r]
    phase = next((step for step, exact, _ in curve if exact >= 0.5), None)
    doc = {"name": name, "flags": CONFIGS[name][0], "steps": CONFIGS[name][1], "phase_change": phase,
           "eval_scheme": EVAL_SCHEME.get(name),
           "probe": curve, "rows": [r.to_json() for r in rows], "cells": [c.to_json() for c in cells],
           "layout": subject.describe().get("layout"), "entropy": entropy}
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1))
    return doc


def global_entropy(subject, lengths: list[int], texts: int = 4) -> dict:
    """Mean attention entropy (nats) per layer at each length, under the run's own layout, on the first
    ``texts`` validation documents long enough (the resolution instrument's empirical entropy), and
    which layers are global: how the global layers' attention spreads as the input grows."""
    from lexkit.resolution import empirical
    from lexkit.resolution import texts as first_texts

    docs = subject.documents()[0]
    model = subject.model
    out = {"global": [i for i, kind in enumerate(getattr(model, "kinds", [])) if kind == "global"], "by_length": {}}
    for n in lengths:
        row = empirical(model, first_texts(docs, n, texts), "causal")
        out["by_length"][str(n)] = row["entropy_per_layer"]
    return out


def one(out: Path, name: str, threads: int, steps: int | None = None) -> str:
    train(out, name, threads, steps)
    subprocess.run([sys.executable, __file__, "--out", str(out), "--score-one", name, "--threads", str(threads)],
                   check=True)
    doc = json.loads((out / f"{name}.json").read_text())
    return f"{name}: phase change at {doc['phase_change']}"


def table(out: Path) -> str:
    """Markdown: per configuration and pattern, exact match % at each multiple (worst depth at 16x),
    bpb at 1x and 16x and their ratio, and the phase-change step."""
    from common import md_table

    body = []
    for path in sorted(out.glob("*.json")):
        doc = json.loads(path.read_text())
        for pattern in CONFIGS.get(doc["name"], (None, None, sorted({r["pattern"] for r in doc["rows"]})))[2]:
            rows = {r["multiple"]: r for r in doc["rows"] if r["pattern"] == doc_pattern(doc, pattern)}
            if not rows:
                continue
            acc = " / ".join(f"{100 * rows[m]['accuracy']:.0f}" for m in MULTIPLES if m in rows)
            longest = max(rows)
            worst = min(c["accuracy"] for c in doc["cells"]
                        if c["pattern"] == doc_pattern(doc, pattern) and c["length"] == rows[longest]["length"])
            b1, b16 = rows[1]["bpb"], rows[longest]["bpb"]
            ratio = f"{b16 / b1:.3f}" if b1 and b16 else "-"
            body.append([doc["name"], pattern, doc["phase_change"] or "none", acc, f"{100 * worst:.0f} %",
                         f"{b1:.3f} -> {b16:.3f} ({ratio})", entropy_text(doc)])
    return md_table(["configuration", "pattern", "phase change (step)", "exact match % at 1 / 2 / 4 / 8 / 16x",
                     "worst depth at 16x", "bpb 1x -> 16x (ratio)", "global layers' entropy 1x -> 16x (nats)"], body)


def entropy_text(doc: dict) -> str:
    """The global layers' mean entropy at 1x and 16x (``-`` for a model without a global layer or a
    result scored before entropy was measured)."""
    entropy = doc.get("entropy") or {}
    layers, by_length = entropy.get("global") or [], entropy.get("by_length") or {}
    if not layers or not by_length:
        return "-"
    first, last = by_length[min(by_length, key=int)], by_length[max(by_length, key=int)]
    mean = lambda row: sum(row[i] for i in layers) / len(layers)  # noqa: E731
    return f"{mean(first):.2f} -> {mean(last):.2f}"


def doc_pattern(doc: dict, pattern: str) -> str:
    """The label a pattern got in a configuration's rows (W resolved: ``window`` -> ``window:64``)."""
    labels = sorted({r["pattern"] for r in doc["rows"]})
    return pattern if pattern in labels else next((p for p in labels if p.startswith(pattern + ":")), pattern)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--only", nargs="*", choices=list(CONFIGS), help="these configurations (default: all)")
    parser.add_argument("--jobs", type=int, default=1, help="configurations at once (each on --threads threads)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--table", action="store_true", help="print the table of what ran, run nothing")
    parser.add_argument("--steps", type=int, help="train every configuration this long (a smoke test)")
    parser.add_argument("--score-one", metavar="NAME", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.table:
        print(table(args.out))
        return 0
    if args.score_one:
        score(args.out, args.score_one, args.threads)
        return 0
    names = args.only or list(CONFIGS)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for line in pool.map(lambda n: one(args.out, n, args.threads, args.steps), names):
            print(line, flush=True)
    print(table(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
