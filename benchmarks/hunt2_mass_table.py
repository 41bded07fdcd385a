"""The hunt's needle-mass table (docs/hunt.md, round 2, item 8) from the reports benchmarks/hunt2_inspect.sh
wrote: per run and needle, each global layer's best head's mass on the needle (%), its entropy (nats) and how
often its top key lies on the needle (%), at each length, as markdown rows.

    python benchmarks/hunt2_mass_table.py hunt2/inspect > hunt2/inspect-summary.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from common import md_table
from lexkit.instruments.inspect.needle_mass.measure import report_rows

NEEDLES = ("python", "caret", "hex", "kvthread", "kvthread-direction-backward", "ordinal")
HEADER = ["run, needle", "mass %", "entropy", "top key on the needle %"]


def rows(folder: Path) -> list[list[str]]:
    """The table's rows (:data:`HEADER`): per run, needle and global layer."""
    out = []
    for run in sorted(p for p in folder.iterdir() if p.is_dir()):
        for needle in NEEDLES:
            report = run / f"mass-{needle}.json"
            if not report.is_file():
                continue
            found = [r for r in report_rows(json.loads(report.read_text())) if r.scope == "global"
                     and r.pattern == "causal"]  # every report version (its rows' one reader)
            layers = sorted({r.layer for r in found})
            for layer in layers:
                by_length = sorted((r for r in found if r.layer == layer), key=lambda r: r.length)
                cells = [" / ".join(fmt(r) for r in by_length) for fmt in (
                    lambda r: f"{100 * r.mass_max:.0f}", lambda r: f"{r.head_entropy:.2f}",
                    lambda r: f"{100 * r.top_on_needle:.0f}")]
                where = f" L{layer}" if len(layers) > 1 else ""
                out.append([f"{run.name} `{needle}`{where}", *cells])
    return out


if __name__ == "__main__":
    print(md_table(HEADER, rows(Path(sys.argv[1]))))
