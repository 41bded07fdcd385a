"""The study report as one document: its sections in order, each a heading, a few sentences of what
was measured, the tables (:mod:`.tables`), the findings (:mod:`.findings`) and the figures
(:mod:`lexkit.plots`), all from results.json alone (no model, no scheme is built here), so a report
can be rebuilt without the runs. :func:`write_report` renders it as ``report.md`` and as one
self-contained ``report.html`` (:mod:`lexkit.htmlreport`), beside the figures and ``results.csv``.
"""

from __future__ import annotations

from pathlib import Path

from .. import results as query
from ..blocks import Block, Bullets, Figure, Heading, Text
from ..formats import multiple
from ..htmlreport import html
from ..plots import report_figures
from ..render import csv_text, markdown
from ..rows import StudyResults
from ..runs import atomic_write
from . import findings, tables

#: the columns of results.csv, one row per evaluation cell of every seed's run
CSV_FIELDS = ("scheme", "seed", "pattern", "length", "bpb", "ppl", "bytes", "unavailable")


def document(results: StudyResults | dict) -> list[Block]:
    """The report, block by block."""
    doc = query.read(results)
    return [*grid_sections(doc), *extension_sections(doc), *retrieval_sections(doc),
            Heading("The paper's numbers, for orientation"),
            Text("A different model (24 layers, hidden 1024), data (a Pile subset, BPE tokens) and scale: compare "
                 "shapes and orderings, not values."),
            *[block for title, table in tables.paper_tables() for block in (Text(f"**{title}**"), table)],
            Heading("Provenance"),
            tables.provenance_table(doc)]


def grid_sections(doc: StudyResults) -> list[Block]:
    """The title, then sections A-D: the main grid of schemes, patterns and lengths."""
    t, m, train = doc.train_len, doc.model, doc.train
    note = " (mean ± std over seeds)" if doc.config["seeds"] > 1 else ""
    docs = doc.runs[0].eval.documents if doc.runs else 0
    per_doc = doc.runs[0].eval.bytes_per_document if doc.runs else 0
    return [
        Heading("lexkit study report", 1),
        Text(f"Byte-level decoders ({m['n_layers']} layers, width {m['d_model']}, {m['n_heads']} heads, "
             f"{doc.params:,} parameters) trained at **{t} bytes** for {train['steps']} steps "
             f"(batch {train['batch']}), evaluated at {', '.join(map(str, doc.lengths))} bytes under "
             f"{', '.join(doc.patterns)}. Every length scores the same bytes: the first "
             f"{per_doc:,} bytes of {docs} validation documents (the paper's protocol). Numbers are bits "
             f"per byte (lower is better){note}."),
        Figure("bpb_by_length.png", "bpb by length"),
        Heading("A. Perplexity by length, causal attention (the paper's Table 2 layout)"),
        Text("Bits per byte; columns past the training length (1x) are extrapolation."),
        tables.length_table(doc),
        Text("Perplexity per byte (e^NLL):"),
        tables.length_table(doc, "ppl"),
        Heading("B. Relative schemes under each attention pattern beyond the training length (Table 5 layout)"),
        Text("window:W is the essay's super-strong baseline (each query sees the last W keys); bca:W is the "
             "paper's blockwise causal attention (blocks of W/2, each sees itself and the previous block)."),
        tables.pattern_table(doc),
        Heading("C. Attention resolution (Table 3 layout)"),
        Text("Analytic: from the encoding alone, before training (learnable biases at their initial values); "
             "empirical: measured per layer on the trained model (mean over heads, then layers) on "
             f"{doc.config['resolution_texts']} validation texts. R lies in [0, 1] for any curve, so the "
             "paper's 1.08 for xPos+BCA cannot come from the formula as printed."),
        tables.resolution_table(doc),
        Figure("s_curves.png", "s[n] curves"),
        Figure("resolution_per_layer.png", "resolution per layer"),
        Figure("entropy.png", "entropy"),
        Heading("D. The design principles, measured"),
        Text("Order variance: max |f(PX) − Pf(X)| / max|f(X)| for a random permutation P (0 = bag of words). "
             f"Translation Δ: max change of the logits under a position offset of {t // 2}, relative (≈0 for "
             "relative schemes). Extrapolation: bpb at 4x and 16x over bpb at 1x under causal attention "
             "(≤ 1 extrapolates). Beyond − inside: bpb of positions past the training length minus bpb of the "
             "last bucket inside it, at the longest length (negative: the model uses the extra context, "
             "*A Length-Extrapolatable Transformer*'s \"not exploding is not extrapolating\")."),
        tables.principles_table(doc),
        Figure("loss_by_position.png", "loss by position"),
    ]


def extension_sections(doc: StudyResults) -> list[Block]:
    """Sections E (context extension) and F (the stated goal), when the study ran them."""
    ext = doc.extension
    if not ext:
        return []
    out = [
        Heading("E. Context extension: stretching RoPE, beside local attention and xPos"),
        Text(f"The study's `rope` run evaluated without retraining under each method (every scaling set "
             f"for the longest length: factor {ext.factor:.3g}), and fine-tuned for {ext.finetune_steps} "
             f"steps at {ext.finetune_len} bytes ({multiple(ext.finetune_len, doc.train_len)}) with `--init` under "
             "no scaling, PI and YaRN, each evaluated under causal attention and under window/BCA at its new "
             "length. Bits per byte; the same bytes at every length."),
        tables.extension_table(doc),
        Figure("extension.png", "context extension"),
    ]
    out += listed("Against plain rope under causal attention (lower is better):", findings.extension_findings(doc))
    goal = findings.goal_finding(doc)
    return out + ([Heading("F. The stated goal: context that is used"), Text(goal)] if goal is not None else [])


def retrieval_sections(doc: StudyResults) -> list[Block]:
    """Section G (use of context), when the study ran it."""
    g = doc.retrieval
    if not g:
        return []
    out = [
        Heading("G. Use of context: retrieval at distance"),
        Text(f"Perplexity rewards a model that survives a long input; it cannot tell it from one that uses it. "
             f"One run per scheme ({g.preset} preset, trained at {g.train_len} bytes for {g.steps} steps, batch "
             f"{g.batch}, lr {g.lr:g}, `--mix {g.mix}`, {g.seeds} seed), scored on held-out copy "
             f"needles ({g.size} random letters after a marker, validation filler, the marker again; "
             f"{g.samples} documents at each depth {', '.join(f'{d:g}' for d in g.depths)} %): exact match "
             "of greedy decoding at each multiple of the training length, beside the configuration's bpb. On "
             f"the rope run, table E's methods (scalings at x{max(g.multiples)}, ReRoPE, log-n, sinks; the "
             f"fine-tunes run {g.finetune_steps} steps at 4x with the same mix)."),
        tables.retrieval_table(doc),
        Figure("retrieval_scatter.png", "bpb against retrieval at 16x"),
        Figure("retrieval_heatmap.png", "exact match by configuration and length"),
        Text("Answer bits per byte (teacher-forced; a copying model scores near 0, a uniform guess over the "
             "letters 4.70):"),
        tables.answer_bits_table(doc),
    ]
    out += listed("Where each configuration that loses the skill stops retrieving (below 90 % over all depths):",
                  findings.retrieval_findings(doc))
    goal = findings.context_goal_finding(doc)
    return out + ([Text(goal)] if goal is not None else [])


def listed(intro: str, items: list[str]) -> list[Block]:
    """``items`` as bullets after ``intro``; nothing when there are none."""
    return [Text(intro), Bullets(items)] if items else []


def write_report(results: StudyResults | dict, out: str | Path) -> None:
    """In the directory ``out``: the figures (:func:`lexkit.plots.report_figures`), ``report.md``,
    ``report.html`` (the same blocks, figures embedded) and ``results.csv``."""
    doc, out = query.read(results), Path(out)
    images = report_figures(doc, out)
    blocks = document(doc)
    atomic_write(out / "report.md", markdown(blocks))
    atomic_write(out / "report.html", html(blocks, images))
    atomic_write(out / "results.csv", csv_text(query.evaluation_table(doc), CSV_FIELDS))
