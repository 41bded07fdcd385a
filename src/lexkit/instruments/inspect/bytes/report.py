"""The byte table's terminal text and CSV (``lexkit inspect RUN``): every number written here, from the
report :func:`.measure.embedding_run` returns."""

from __future__ import annotations

from ....core.notation import number
from ....documents.render import text_table
from ... import named
from ... import report_csv as csv  # noqa: F401 (the byte table's CSV: a row per token)


def text(report: dict, every: bool = False) -> str:
    """Header, what was counted, the summary, then the table of the most collapsed seen bytes (every
    byte with ``every``)."""
    s, training, corpus = report["summary"], report["training"], report["corpus"]
    lines = [f"{report['run']}  {named(report)}  train_len {report['train_len']}  "
             f"head {'tied' if report['tied'] else 'untied'}",
             f"corpus {corpus['spec']}: {corpus['documents']:,} training documents, {corpus['bytes']:,} bytes"
             + (" (differs from the run's)" if corpus.get("differs_from_run") else "")]
    if training is not None:
        lines.append(f"training replayed: {training['steps']:,} of {training['trained_steps']:,} steps x "
                     f"{training['batch']} windows of {training['length'] + 1} tokens"
                     + (f", mix {training['mix']}" if training["mix"] else "")
                     + (f"; {training['note']}" if training.get("note") else ""))
    else:
        lines.append("training not replayable (no checkpoint): unseen means absent from the corpus")
    shown = ", ".join(s["unseen_tokens"][:24]) + (", ..." if len(s["unseen_tokens"]) > 24 else "")
    where = "in no replayed training window" if s["unseen_by"] == "training windows" else "not in the corpus's text"
    lines.append(f"unseen ({where}): {s['unseen']} of {len(report['rows'])} tokens"
                 + (f" ({shown})" if s["unseen"] else ""))
    if s.get("in_corpus_never_trained"):
        lines.append(f"in the corpus but in no replayed window: {s['in_corpus_never_trained']}")
    count = "trained" if training is not None else "corpus"
    if s["rarest"]:
        lines.append(f"the seen tokens shown least often ({count}): "
                     + ", ".join(f"{r['label']} {r[count]:,}" for r in s["rarest"]))
    for prefix, what in (("", "embedding rows" if report["tied"] else "input rows"), ("out_", "output rows")):
        if f"{prefix}seen_cosine" in s:
            lines.append(f"{what}: mean cosine to the unseen mean {number(s[f'{prefix}seen_cosine'])} (seen), "
                         f"{number(s[f'{prefix}unseen_cohesion'])} (unseen)")
    if s["unseen"] == 0:
        lines.append("every token was shown: no unseen mean, no cosine"
                     + (" (--unseen-by corpus takes the tokens the corpus's text never holds)"
                        if s["unseen_by"] == "training windows" else ""))
    rows = report["rows"]
    if every:
        chosen = rows
        title = "every token"
    else:
        tops = {c["token"] for c in s.get("collapsed", [])}
        chosen = sorted((r for r in rows if r["token"] in tops), key=lambda r: -r["cosine"])
        title = "the seen tokens closest to the unseen mean (highest cosine)"
    if chosen:
        untied = "out_cosine" in rows[0]
        header = ["token", "byte", "corpus"] + (["trained"] if "trained" in rows[0] else []) \
            + (["mix"] if "mix" in rows[0] else []) + ["norm", "cosine"] + (["out norm", "out cos"] if untied else [])
        table = [header]
        for r in chosen:
            table.append([str(r["token"]), r["label"], f"{r['corpus']:,}"]
                         + ([f"{r['trained']:,}"] if "trained" in r else []) + ([f"{r['mix']:,}"] if "mix" in r else [])
                         + [number(r["norm"]), number(r["cosine"])]
                         + ([number(r["out_norm"]), number(r["out_cosine"])] if untied else []))
        lines += ["", title] + text_table(table, "rl" + "r" * (len(header) - 2))
    return "\n".join(lines)
