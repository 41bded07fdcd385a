"""Retrieval's terminal text and CSV (``lexkit retrieval``): every number written here, from the report
:func:`.measure.retrieval_run` returns."""

from __future__ import annotations

import dataclasses

from ...core.notation import length_label, percent
from ...documents import render
from ...documents.render import text_table
from .. import layout_lines, named
from .rows import RetrievalCell


def text(report: dict) -> str:
    """Header; per pattern, exact match (%) by depth (rows) and length (columns); then the
    summary over depths: accuracy with its 95 % interval and the answer's bits per byte.
    Percentages are whole unless that would round them to 0 or 100 (:func:`lexkit.core.notation.percent`)."""
    lengths, train_len = report["lengths"], report["train_len"]
    rows = report["rows"]
    lines = [
        f"{report['target']}  {named(report)}"
        + f"  train_len {train_len}",
        f"task {report['task']}" + (f", format {report['format']}" if report.get("format") else "")
        + f" ({report['style']} style), {report['samples']} document{'' if report['samples'] == 1 else 's'} per "
        "cell, lengths in "
        f"{report.get('unit', 'bytes')}; {chance_line(report)}",
    ]
    lines[1:1] = layout_lines(report)
    cell = {(r["pattern"], r["length"], r["depth"]): r for r in rows}
    header = ["depth"] + [length_label(n, train_len) for n in lengths]
    for pattern in report["patterns"]:
        table = [header]
        for d in report["depths"]:
            table.append([f"{d:g}%"] + [percent(cell[(pattern, n, d)]["accuracy"]) for n in lengths])
        lines += ["", f"exact match (%), {pattern}"] + text_table(table)
    summary = {(s["pattern"], s["length"]): s for s in report["summary"]}
    table = [["pattern"] + [length_label(n, train_len) for n in lengths]]
    for pattern in report["patterns"]:
        table.append([pattern] + [
            f"{percent(s['accuracy'])} [{percent(s['low'])}-{percent(s['high'])}]"
            for s in (summary[(pattern, n)] for n in lengths)])
    lines += ["", "exact match (%) over all depths [95% interval]"] + text_table(table)
    lines += candidate_lines(report)
    table = [["pattern"] + [length_label(n, train_len) for n in lengths]]
    for pattern in report["patterns"]:
        table.append([pattern] + [f"{summary[(pattern, n)]['answer_bits']:.3f}" for n in lengths])
    lines += ["", "answer bits per byte (teacher-forced)"] + text_table(table)
    return "\n".join(lines)


def candidate_lines(report: dict) -> list[str]:
    """For a task whose documents hold other candidates of the answer's kind (kvthread, ordinal,
    multikey): per pattern and length, the exact match of guessing uniformly among them and how
    often the model's answer is some candidate, right or not (over all depths); none otherwise."""
    rows = [r for r in report["rows"] if r.get("guess") is not None]
    if not rows:
        return []
    lengths, train_len = report["lengths"], report["train_len"]
    pooled: dict[tuple[str, int], list[float]] = {}
    for r in rows:
        total = pooled.setdefault((r["pattern"], r["length"]), [0, 0.0, 0.0])
        total[0] += r["samples"]
        total[1] += r["guess"] * r["samples"]
        total[2] += r["candidate"] * r["samples"]
    table = [["pattern"] + [length_label(n, train_len) for n in lengths]]
    for pattern in report["patterns"]:
        cells = []
        for n in lengths:
            samples, guess, some = pooled[pattern, n]
            cells.append(f"{percent(guess / samples)} / {percent(some / samples)}")
        table.append([pattern, *cells])
    return ["", "guessing among a document's candidates / the answer is some candidate, right or not (%, over all "
            "depths): exact match at the guess level is no use of context"] + text_table(table)


def chance_line(report: dict) -> str:
    """What a uniform guess scores: its bits per answer byte, and how often it matches a whole
    answer (alphabet ** -symbols: 3.8 % for one letter, so a tiny --size is not read as use of
    context)."""
    from ... import tasks

    if not report["rows"]:
        return "no cells"
    bits = report["rows"][0]["chance_bits"]
    symbols = report["size"] or tasks.get(report["task"]).default_size(report["style"])
    match = 100 * 2.0 ** (-bits * symbols)
    return (f"chance {bits:.2f} bits per answer byte, exact match by a uniform guess "
            f"{f'{match:.2g}' if match >= 0.01 else '<0.01'} %")


def csv_text(report: dict) -> str:
    """The CSV of a report: one line per cell, the fields of :class:`.rows.RetrievalCell`."""
    return render.csv_text(report["rows"], [f.name for f in dataclasses.fields(RetrievalCell)])
