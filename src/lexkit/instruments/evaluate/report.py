"""The evaluation's terminal text and CSV (``lexkit eval``): every number written here, from the report
:func:`.measure.evaluate_run` returns."""

from __future__ import annotations

from ...core.notation import length_label, ratio_with_interval
from ...documents import render
from ...documents.render import text_table
from .. import layout_lines, named


# -- terminal output ------------------------------------------------------------------------------
def paired_lines(report: dict, train_len: int | None) -> list[str]:
    """The use-of-context table of ``--paired``: per pattern, each longer length's bpb over the
    shortest's on the same bytes, with its 95 % interval over the documents."""
    rows = report.get("paired")
    if not rows:
        return []
    first = rows[0]
    out = [["pattern", "lengths", "bpb", "bpb longer", "ratio [95 % over documents]"]]
    for r in rows:
        span = f"{length_label(r['length'], train_len)} -> {length_label(r['longer'], train_len)}"
        if r["ratio"] is None:
            out.append([r["pattern"], span, "-", "-", r.get("unavailable") or "-"])
            continue
        out.append([r["pattern"], span, f"{r['bpb']:.4f}", f"{r['bpb_longer']:.4f}",
                    ratio_with_interval(r["ratio"], r["low"], r["high"])])
    docs = first["documents"]
    bare = any(r["ratio"] is not None and r["low"] is None for r in rows)  # lexkit.core.stats.ratio_interval: n < 2
    why = [f"no interval: an interval over documents needs at least 2 documents, and {docs} "
           f"{'was' if docs == 1 else 'were'} scored (--max-docs, or too few documents long enough); without one "
           "flatness is undetermined (docs/evaluation.md)"] if bare else []
    return ["", f"use of context, paired: the same bytes at each length, every window opening on a byte of its "
            f"document, over {docs} document{'' if docs == 1 else 's'} (below 1: more context predicts them "
            "better)", *text_table(out), *why]


def text(report: dict) -> str:
    """The bpb table (lengths as columns, one row per pattern; a tokenizer model's token
    perplexity below it), what was scored, unavailable reasons, then loss by position per pattern."""
    lengths, patterns, train_len = report["lengths"], report["patterns"], report["train_len"]
    tokens = "tokens_per_document" in report["data"]  # a tokenizer model: lengths count tokens
    cell = {(r["length"], r["pattern"]): r for r in report["results"]}
    data, stride = report["data"], report.get("stride")
    docs = f"{data['documents']} document{'' if data['documents'] == 1 else 's'}"
    if tokens:
        lines = [f"model {report['run']}  {report['label']}  train_len {train_len}", *layout_lines(report),
                 f"data {data['spec']} ({data['split']}): {docs} x {data['tokens_per_document']:,} tokens "
                 f"({data['bytes_scored']:,} bytes) scored per length"]
        tables = (("bpb", "bits per byte (lower is better)", "{:.4f}"),
                  ("ppl", "token perplexity (this tokenizer's; lower is better)", "{:.3f}"))
    else:
        lines = [f"run {report['run']}  {named(report)}"
                 + ("  log-n" if report.get("logn") else "") + f"  train_len {train_len}"
                 + (f"  trained at random positions < {report['random_positions']}"
                    if report.get("random_positions") else ""),
                 f"data {data['spec']} ({data['split']}): {docs} x {data['bytes_per_document']:,} bytes"
                 f" = {data['documents'] * data['bytes_per_document']:,} bytes scored per length"]
        tables = (("bpb", "bits per byte (lower is better)", "{:.4f}"),)
    lines[-1] += f"; sliding windows, stride {stride}" if stride else "; non-overlapping chunks"
    if report.get("start") == "text":
        lines[-1] += "; every window opens on a byte of its document (--start text: bytes 1..M scored)"
    ran = list(dict.fromkeys(r["kernel"] for r in report["results"] if r.get("kernel")))
    if ran:
        lines.append(f"attention kernel {report.get('kernel', 'auto')}: ran {', '.join(ran)}")
    notes: dict[str, list[int]] = {}
    for key, title, fmt in tables:
        rows = [["pattern"] + [length_label(n, train_len) for n in lengths]]
        for pat in patterns:
            row = [pat]
            for n in lengths:
                r = cell.get((n, pat))
                row.append("-" if r is None or r[key] is None else fmt.format(r[key]))
                if r is not None and r[key] is None:
                    notes.setdefault(r["unavailable"], []).append(n)
            rows.append(row)
        lines += ["", title] + text_table(rows)
    for reason, at in notes.items():
        lines.append(f"  - at {', '.join(map(str, sorted(set(at))))}: {reason}")
    lines.append("  (lengths in tokens; x = multiple of the training length)" if tokens
                 else "  (x = multiple of the training length)")
    lines += paired_lines(report, train_len)
    where = "token position" if tokens else "position within the chunk"
    for pat in patterns:
        at = {(b["from"], b["to"], b["length"]): b for b in report["by_position"] if b["pattern"] == pat}
        if not at:
            continue
        lines += ["", f"bits per byte by {where}, pattern {pat} (* = beyond the training length)"]
        rows = [["positions"] + [str(n) for n in lengths]]
        for lo, hi in sorted({(lo, hi) for lo, hi, _ in at}):
            label = (f"{lo}" if hi == lo + 1 else f"{lo}-{hi - 1}") + (" *" if train_len and lo >= train_len else "")
            rows.append([label] + [f"{at[(lo, hi, n)]['bpb']:.4f}" if (lo, hi, n) in at else "" for n in lengths])
        lines += text_table(rows)
    return "\n".join(lines)


# -- the CSV ------------------------------------------------------------------------------------
CSV_FIELDS = ("length", "pattern", "stride", "bpb", "ppl", "tokens", "bytes", "unavailable", "label", "scheme",
              "layout", "logn", "streamed", "kernel")


def csv_fields(report: dict) -> list[str]:
    """The :data:`CSV_FIELDS` of a report: ``tokens`` only for a tokenizer model's."""
    return [f for f in CSV_FIELDS if f != "tokens" or any("tokens" in r for r in report["results"])]


def csv_rows(report: dict) -> list[dict]:
    """One row per (length, pattern) with the report's :func:`csv_fields` (empty where not
    applicable); ``label``, ``scheme``, ``layout`` and ``logn`` are the report's (``label`` what ran, as every
    report names it; ``scheme`` empty where the layers differ; ``layout`` every layer as it ran, empty for a model
    without one: every layer the ``scheme`` under causal attention)."""
    every = {key: report.get(key) for key in ("label", "scheme", "layout")} | {"logn": bool(report.get("logn", False))}
    return [{k: ("" if (v := {**every, **r}.get(k)) is None else v) for k in csv_fields(report)}
            for r in report["results"]]


def csv_text(report: dict) -> str:
    """The CSV of a report (:func:`csv_rows`, a header line first; :func:`lexkit.documents.render.csv_text`)."""
    return render.csv_text(csv_rows(report), csv_fields(report))
