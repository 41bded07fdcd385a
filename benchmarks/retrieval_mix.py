"""What it takes to teach a byte model to retrieve: train with a copy mix, score the needles
(docs/retrieval.md, "Measured: what it takes to learn to retrieve").

    python benchmarks/retrieval_mix.py                                  # copy:0.75, 2,000 steps (the README's recipe)
    python benchmarks/retrieval_mix.py --mix copy:0.625 --steps 2000 --steps 3000 --plain

For each ``--mix`` and ``--steps`` (and, with ``--plain``, the same training without a mix) it runs
the commands the docs give, one after the other, each with ``--threads`` (default 1):

1. ``lexkit train --scheme rope --preset quick --batch 64 --lr 3e-3 --steps S --mix M --out DIR``;
2. ``lexkit retrieval DIR --task copy --lengths 64 --samples N --json``: exact match of held-out
   copy needles inside the training length (1x), all depths pooled, with its 95 % interval, and
   the answer bits;
3. ``lexkit eval DIR --lengths 64,256,1024 --max-docs 40 --json``: bpb at 1x (64 bytes) on the first
   1,024 bytes of 40 validation documents (the protocol scores every length on the same bytes);

then prints one markdown table row per run and the training seconds. Runs are kept in ``--out``
(default: a temporary directory) and a finished run there is scored again, not retrained.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lexkit
from common import table
from lexkit.documents.blocks import Text
from lexkit.documents.render import markdown

SRC = str(Path(lexkit.__file__).resolve().parent.parent)
RECIPE = ["--scheme", "rope", "--preset", "quick", "--batch", "64", "--lr", "3e-3"]


def lexkit_cli(*argv: str, threads: int) -> str:
    """Run ``python -m lexkit ARGV --threads N`` with this lexkit; its stdout (exit on failure)."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "lexkit", *argv, "--threads", str(threads)], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"lexkit {' '.join(argv)} failed: {done.stderr.strip()[-600:]}")
    return done.stdout


def measure(out: Path, mix: str | None, steps: int, samples: int, threads: int) -> dict:
    """Train (unless finished already), then score the needles and the bpb at 1x."""
    name = f"{(mix or 'plain').replace(':', '')}-{steps}"
    run = out / name
    t0 = time.perf_counter()
    if not (run / "model.safetensors").is_file():
        lexkit_cli("train", *RECIPE, "--steps", str(steps), *(["--mix", mix] if mix else []), "--out", str(run),
                   "--quiet", threads=threads)
    trained = time.perf_counter() - t0
    lexkit_cli("retrieval", str(run), "--task", "copy", "--lengths", "64", "--samples", str(samples), "--json",
               str(out / f"{name}-retrieval.json"), "--no-progress", threads=threads)
    (line,) = json.loads((out / f"{name}-retrieval.json").read_text())["summary"]
    lexkit_cli("eval", str(run), "--lengths", "64,256,1024", "--max-docs", "40", "--json",
               str(out / f"{name}-eval.json"), "--no-progress", threads=threads)
    (row,) = [r for r in json.loads((out / f"{name}-eval.json").read_text())["results"] if r["length"] == 64]
    return {"mix": mix or "none", "steps": steps, "samples": line["samples"], "accuracy": line["accuracy"],
            "low": line["low"], "high": line["high"], "answer_bits": line["answer_bits"], "bpb": row["bpb"],
            "train_s": trained}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mix", action="append", help="training mix, repeatable (default: copy:0.75)")
    parser.add_argument("--steps", type=int, action="append", help="training steps, repeatable (default: 2000)")
    parser.add_argument("--plain", action="store_true", help="also train without a mix, for the price in bpb")
    parser.add_argument("--samples", type=int, default=50, help="needles per depth (default: 50, 11 depths)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every command (default: 1)")
    parser.add_argument("--out", help="directory of the runs and their JSON (default: a temporary one)")
    args = parser.parse_args(argv)
    from lexkit.core.notation import percent as percent_text

    out = Path(args.out or tempfile.mkdtemp(prefix="retrieval-mix-"))
    out.mkdir(parents=True, exist_ok=True)
    mixes = (args.mix or ["copy:0.75"]) + ([None] if args.plain else [])
    rows = [measure(out, mix, steps, args.samples, args.threads) for mix in mixes for steps in args.steps or [2000]]
    print(markdown([
        Text(f"quick preset, rope, batch 64, lr 3e-3, --threads {args.threads}; exact match of copy needles at 64 "
             f"bytes (1x), {args.samples} per depth at 11 depths; bpb at 1x by `lexkit eval --lengths 64,256,1024 "
             f"--max-docs 40` (runs in {out})"),
        table(["`--mix`", "steps", "exact match at 1x [95 %]", "answer bits", "bpb at 1x", "training s"],
              [[f"`{r['mix']}`", f"{r['steps']:,}", f"{percent_text(r['accuracy'])} % [{percent_text(r['low'])}-"
                f"{percent_text(r['high'])}]", f"{r['answer_bits']:.3f}", f"{r['bpb']:.3f}", f"{r['train_s']:.0f}"]
               for r in rows])]), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
