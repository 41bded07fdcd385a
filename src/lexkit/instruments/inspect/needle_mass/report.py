"""The needle mass's terminal text and CSV (``lexkit inspect TARGET --needle-mass``): every number
written here, from the report :func:`.measure.needle_mass_run` returns (of any version: its rows read
by :func:`.measure.report_rows`)."""

from __future__ import annotations

from ....core.notation import length_label, number, percent
from ....documents.render import text_table
from ... import named, report_csv
from .measure import NeedleMassRow, report_rows


def text(report: dict) -> str:
    """Header; per pattern, one line per (layer, length): mass (head mean, best head) beside what
    uniform attention gives, entropy (head mean, best head) beside ln(keys), and the best head's top
    key: on the needle how often, how far from it on average."""
    train_len = report["train_len"]
    documents = f"{report['samples']} document{'' if report['samples'] == 1 else 's'}"
    lines = [f"{report['target']}  {named(report)}  train_len {train_len}",
             f"task {report['task']}" + (f", format {report['format']}" if report.get("format") else "")
             + f" ({report['style']} style), {documents} per length and depth at depths "
             + ",".join(f"{d:g}" for d in report["depths"]) + f"; the query that predicts the answer's first "
             f"token; lengths in {report['unit']}"]
    header = ["layer", "length", "keys", "needle", "uniform %", "mass %", "best %", "head", "ln keys", "entropy",
              "best H", "top on needle %", "top distance"]
    every = report_rows(report)
    for pattern in report["patterns"]:
        table = [header]
        rows = sorted((r for r in every if r.pattern == pattern), key=lambda r: (r.layer, r.length))
        for r in rows:
            table.append([f"L{r.layer} {r.scope}", length_label(r.length, train_len), f"{r.visible:.0f}",
                          f"{r.needle:.1f}", percent(r.uniform), percent(r.mass), percent(r.mass_max),
                          str(r.head), number(r.uniform_entropy, digits=2), number(r.entropy, digits=2),
                          number(r.head_entropy, digits=2), percent(r.top_on_needle),
                          number(r.top_distance, digits=1)])
        lines += ["", f"attention at the answer, {pattern}"] + text_table(table, "ll" + "r" * (len(header) - 2))
    lines += weight_notes(every)
    return "\n".join(lines)


def csv(report: dict) -> str:
    """A row per (pattern, length, layer), every field but the per-head lists, as the current version
    writes them (an older report's rows read by :func:`.measure.report_rows`)."""
    return report_csv({**report, "rows": [r.to_json() for r in report_rows(report)]})


#: what a layer's map is, said under the table where it is not a softmax (lexkit.diagnostics.weight_maps)
WEIGHT_NOTES = {
    "differential": "differential: one map per head pair, softmax1 - λ·softmax2 (mass can be negative, 'head' is the "
                    "pair, entropy over |map| / its sum)",
    "stick-breaking": "stick-breaking: weights that sum to at most 1 (entropy over them as they are, not a "
                      "distribution's; ln keys is not its bound)",
}


def weight_notes(rows: list[NeedleMassRow]) -> list[str]:
    """One line per map that is not a softmax, naming its layers."""
    out = []
    for weights, note in WEIGHT_NOTES.items():
        layers = sorted({r.layer for r in rows if r.weights == weights})
        if layers:
            out.append(f"  L{', L'.join(map(str, layers))} {note}")
    return out
