"""Two lexkit trainings at once on one CPU: torch's default threads against lexkit's policy
(:mod:`lexkit.core.threads`, docs/threads.md).

    python benchmarks/threads.py                      # quick preset, 60 steps, 3 rounds -> a markdown table
    python benchmarks/threads.py --steps 300 --stagger 3 --out docs/threads-bench.md

Each round runs, one after the other, the configurations below (``lexkit train --scheme rope
--preset quick`` in child processes; the second job of a pair starts ``--stagger`` seconds after
the first) and reads each job's seconds per step from its metrics.jsonl (the median of its logged
steps) and its wall time:

* ``alone``: one job with every core (``LEXKIT_THREADS`` = the cores), the reference;
* ``every core each``: two jobs with every core each, torch's own default before lexkit had a policy;
* ``lexkit's default``: two jobs with neither ``LEXKIT_THREADS`` nor ``OMP_NUM_THREADS``: the policy;
* ``LEXKIT_THREADS=1 each``: two jobs of one thread.

Other load on the machine falls on every configuration of a round alike; the table gives the
median over rounds and the load average when the run started.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lexkit
from common import table
from lexkit.core.threads import cores
from lexkit.documents.blocks import Text
from lexkit.documents.render import markdown

SRC = str(Path(lexkit.__file__).resolve().parent.parent)


def configurations(n: int) -> dict[str, list[dict]]:
    """Name -> the environment changes of each job (None: removed)."""
    every = {"LEXKIT_THREADS": str(n), "OMP_NUM_THREADS": None}
    policy = {"LEXKIT_THREADS": None, "OMP_NUM_THREADS": None}
    one = {"LEXKIT_THREADS": "1", "OMP_NUM_THREADS": None}
    return {"alone": [every], "every core each": [every, every], "lexkit's default": [policy, policy],
            "LEXKIT_THREADS=1 each": [one, one]}


def start(out: Path, changes: dict, steps: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for key, value in changes.items():
        env.pop(key, None) if value is None else env.__setitem__(key, value)
    argv = [sys.executable, "-m", "lexkit", "train", "--scheme", "rope", "--preset", "quick", "--steps", str(steps),
            "--out", str(out), "--quiet"]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def threads_of(changes: dict, stderr: str, n: int) -> str:
    """The threads a job ran: what it was given, or what the policy's warning says (else every core)."""
    if changes.get("LEXKIT_THREADS"):
        return changes["LEXKIT_THREADS"]
    found = re.search(r"running (\d+) threads? instead", stderr)
    return found.group(1) if found else str(n)


def run_pair(root: Path, jobs: list[dict], steps: int, stagger: float, n: int) -> list[dict]:
    """The jobs of one configuration, the later ones ``stagger`` seconds apart."""
    began, procs = time.perf_counter(), []
    for i, changes in enumerate(jobs):
        if i:
            time.sleep(stagger)
        procs.append((changes, root / f"job{i}", time.perf_counter(), start(root / f"job{i}", changes, steps)))
    out = []
    for changes, path, t0, proc in procs:
        _, stderr = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"a training failed ({proc.returncode}): {stderr.strip()[-500:]}")
        rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
        step = statistics.median(r["step_seconds"] for r in rows if "step_seconds" in r)
        out.append({"step_s": step, "wall_s": time.perf_counter() - t0, "threads": threads_of(changes, stderr, n)})
    return out + [{"pair_s": time.perf_counter() - began}]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60, help="training steps of each job (default: 60)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the configurations (default: 3)")
    parser.add_argument("--stagger", type=float, default=0.0, help="seconds between the two starts (default: 0)")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    n, load = cores(), os.getloadavg()[0]
    found: dict[str, list[list[dict]]] = {}
    for _ in range(args.rounds):
        for name, jobs in configurations(n).items():
            with tempfile.TemporaryDirectory() as tmp:
                found.setdefault(name, []).append(run_pair(Path(tmp), jobs, args.steps, args.stagger, n))
    rows = []
    for name, rounds in found.items():
        jobs = len(rounds[0]) - 1
        step = [statistics.median(r[j]["step_s"] for r in rounds) for j in range(jobs)]
        threads = " + ".join(rounds[-1][j]["threads"] for j in range(jobs))
        pair = statistics.median(r[-1]["pair_s"] for r in rounds)
        rows.append([name, threads, " / ".join(f"{s:.3f}" for s in step), f"{pair:.1f}"])
    text = markdown([
        Text(f"`python benchmarks/threads.py --steps {args.steps} --rounds {args.rounds} --stagger {args.stagger:g}` "
             f"({n} cores, load average {load:.2f} at the start; medians over {args.rounds} rounds)"),
        table(["configuration", "threads", "seconds per step, first / second job", "wall seconds of the pair"], rows)])
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
