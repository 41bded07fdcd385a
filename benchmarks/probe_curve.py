"""A run's training probe read as the hunt's round 3 reads it (docs/hunt.md, C2 and C2l): the probe is
``val_<task>_exact`` in the run's ``metrics.jsonl`` (the share of the evaluation split's documents right at every
byte, at each validation), and each run gives one row:

* **first at 50 %**: the step of the first validation at 50 % or more (round 2's B8 rule for a phase change);
* **converged**: the step ending the first three validations in a row at 90 % or more (``never`` if none): the
  rule :mod:`lexkit.training.stopping` stops a run by, ``probe:exact=0.9,probes=3``, read from the same function;
* **best**: the highest validation and its step;
* **window means**: the mean over each ``--window`` steps (0-4k, 4-8k, ... by default), the first validation
  (step 0) in the first window;
* **last five**: the last five validations.

    python benchmarks/probe_curve.py "C2l seed 1=hunt3-c2/runs/mix-...-s1-35bb956b965c" RUN2 \\
        --task kvthread:supervise=every [--window 4000] [--markdown]

A run is ``LABEL=DIR`` or a directory (its name the label).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import md_table
from lexkit.training.runs import METRICS, read_metrics
from lexkit.training.stopping import StopRule, probe_keys, stop_step

PHASE = StopRule(exact=0.5, probes=1, after=0)  # the first validation at 50 %
CONVERGED = StopRule(exact=0.9, probes=3, after=0)  # three in a row at 90 %


def curve(rows: list[dict], task: str) -> list[tuple[int, float]]:
    """The probe's (step, exact) at every validation of a run's metrics rows, in order."""
    (key,) = probe_keys([task])
    return [(int(row["step"]), float(row[key])) for row in rows if key in row]


def read(rows: list[dict], task: str, window: int) -> dict:
    """The row of the module docstring for one run's metrics (``rows``); ValueError if the run logged no
    validation of the probe."""
    points = curve(rows, task)
    if not points:
        raise ValueError(f"no validation of {probe_keys([task])[0]} in these metrics: is {task!r} in the run's mix?")
    best_step, best = max(points, key=lambda p: (p[1], -p[0]))
    windows: dict[int, list[float]] = {}
    for step, exact in points:
        windows.setdefault(max(step - 1, 0) // window, []).append(exact)  # 4,000 closes 0-4k, 4,001 opens 4-8k
    return {"first_50": stop_step(rows, PHASE, [task]), "converged": stop_step(rows, CONVERGED, [task]),
            "best": best, "best_step": best_step, "last_step": points[-1][0],
            "windows": [sum(v) / len(v) for _, v in sorted(windows.items())],
            "last_five": [exact for _, exact in points[-5:]]}


def pct(x: float) -> str:
    return f"{100 * x:.0f}"


def table(runs: dict[str, dict]) -> str:
    """The reading of each run (label -> :func:`read`'s row) as one markdown table."""
    header = ["run", "first at 50 % (step)", "converged (3 x 90 %)", "best", "last step",
              "window means (%)", "last five validations (%)"]
    rows = [[label, f"{r['first_50']:,}" if r["first_50"] is not None else "never",
             f"{r['converged']:,}" if r["converged"] is not None else "never",
             f"{pct(r['best'])} % ({r['best_step']:,})", f"{r['last_step']:,}",
             " / ".join(pct(x) for x in r["windows"]), ", ".join(pct(x) for x in r["last_five"])]
            for label, r in runs.items()]
    return md_table(header, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="[LABEL=]DIR", help="run directories (metrics.jsonl inside)")
    parser.add_argument("--task", required=True, metavar="TASK",
                        help="the mix task whose probe is read, as the mix writes it (kvthread:supervise=every)")
    parser.add_argument("--window", type=int, default=4000, metavar="STEPS", help="steps per mean (default 4000)")
    args = parser.parse_args(argv)
    if args.window < 1:
        parser.error(f"--window must be >= 1 step, got {args.window}")
    runs = {}
    for given in args.runs:
        if "=" in given and not Path(given).is_dir():
            label, _, path = given.partition("=")
        else:
            label, path = Path(given).name, given
        if not (Path(path) / METRICS).is_file():
            print(f"error: no {METRICS} in {path!r}: give a run directory", file=sys.stderr)
            return 2
        try:
            runs[label] = read(read_metrics(path), args.task, args.window)
        except ValueError as err:
            print(f"error: {path}: {err}", file=sys.stderr)
            return 2
    print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
