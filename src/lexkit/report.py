"""The study report: its tables (the paper's Tables 2, 5 and 3 layouts plus the design
principles), text and figures as one list of blocks (:func:`document`), rendered as markdown
(``report.md``) and as one self-contained HTML file (``report.html``, :mod:`lexkit.htmlreport`),
plus CSV; all from ``results.json`` alone (no model, no scheme is built here), so a report can be
rebuilt without the runs. The figures are drawn by :mod:`lexkit.plots` from the same document;
the numbers come through :mod:`lexkit.results`.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from . import results as query
from .blocks import Block, Bullets, Cell, Figure, Heading, Table, Text
from .htmlreport import html
from .plots import report_figures
from .runs import atomic_write

#: The paper's numbers (Sun et al. 2022; 24 layers, hidden 1024, Pile subset, trained at 1024):
#: perplexity, a different model, data and scale, shown for orientation only.
PAPER_TABLE2 = {
    "lengths": [256, 512, 1024, 2048, 4096],
    "absolute (sinusoidal)": [46.34, 36.39, 29.94, 132.63, 1283.79],
    "alibi": [37.66, 29.92, 24.99, 23.14, 24.26],
    "rope": [38.09, 30.38, 25.52, 73.6, 294.45],
    "xpos + bca": [34.3, 27.55, 23.31, 21.6, 20.73],
}
PAPER_TABLE5 = {"lengths": [2048, 4096], "rope + bca": [25.57, 25.65], "alibi + bca": [24.6, 25.37],
                "xpos": [22.56, 28.43], "xpos + bca": [21.6, 20.73]}
PAPER_TABLE3 = {"lengths": [1024, 2048], "absolute": [0.87, 0.28], "alibi": [0.81, 0.88], "rope": [0.91, 0.08],
                "xpos + bca": [0.98, 1.08], "xpos": [0.98, 0.54]}


def number(mean: float | None, std: float | None = None, digits: int = 3, *, small: bool = False) -> str:
    """A cell: ``mean`` (± ``std``) to ``digits`` decimals (3 significant digits from 1e4 up, and
    below 1e-3 when ``small``: a quantity spanning decades), ``n/a`` for None; a value that rounds
    to zero reads ``0.000``, never ``-0.000``."""
    if mean is None:
        return "n/a"
    if small and 0 < abs(mean) < 1e-3:
        return f"{mean:.2e}" + (f" ± {std:.2e}" if std is not None else "")
    return _unsigned_zero(f"{mean:.{digits}f}" if abs(mean) < 1e4 else f"{mean:.3g}") + (
        f" ± {std:.{digits}f}" if std is not None else "")


def signed(x: float, digits: int = 3) -> str:
    """A difference with its sign (``+0.012``, ``-0.120``); one that rounds to zero reads ``0.000``."""
    text = f"{x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


def _unsigned_zero(text: str) -> str:
    return text.lstrip("-") if float(text) == 0 else text


def multiple(n: int, train_len: int) -> str:
    """``n`` as a multiple of the training length to three significant digits, never in exponent
    form: ``0.5x``, ``1x``, ``16x``, ``1.03x``, ``0.219x`` (the one format of every length label)."""
    ratio = float(f"{n / train_len:.3g}")
    return f"{ratio:g}x" if ratio < 1e6 else f"{ratio:.0f}x"


def cell(mean: float | None, std: float | None = None, digits: int = 3, *, small: bool = False) -> Cell:
    """A number cell whose value is the mean as shown (so cells that read the same tie)."""
    shown = None if mean is None else float(number(mean, digits=digits, small=small))
    return Cell(number(mean, std, digits, small=small), shown)


def length_label(n: int, train_len: int) -> str:
    """A length as a column label, with its multiple of the training length: ``64 (4x)``."""
    return f"{n} ({multiple(n, train_len)})"


LOWEST_BPB = "best (lowest) bpb per column marked"


def length_table(results: dict, key: str = "bpb") -> Table:
    """A, the paper's Table 2 layout: scheme x length under causal attention (``key``: bpb or ppl)."""
    t = results["train_len"]
    header = ["scheme"] + [length_label(n, t) for n in results["lengths"]]
    rows = [[s] + [cell(*query.evaluation(results, s, "causal", n, key), digits=3 if key == "bpb" else 2)
                   for n in results["lengths"]] for s in query.schemes(results)]
    return Table.of(header, rows, "min", LOWEST_BPB if key == "bpb" else "best (lowest) perplexity per column marked")


def pattern_table(results: dict) -> Table:
    """B, the paper's Table 5 layout: each scheme without absolute embeddings (the relative ones,
    and FIRE's bias of the query's position) under every pattern beyond the training length (bpb)."""
    t = results["train_len"]
    beyond = [n for n in results["lengths"] if n > t] or results["lengths"]
    header = ["scheme", "pattern"] + [length_label(n, t) for n in beyond]
    rows = []
    for scheme in query.schemes(results):
        if query.runs_of(results, scheme)[0]["family"] == "absolute":
            continue
        for pattern in results["patterns"]:
            rows.append([scheme, pattern] + [cell(*query.evaluation(results, scheme, pattern, n)) for n in beyond])
    return Table.of(header, rows, "min", LOWEST_BPB)


def resolution_table(results: dict) -> Table:
    """C, the paper's Table 3 layout: resolution per scheme (and pattern) at 1x, 2x, ... the
    training length, analytic (before training) beside empirical (after); R spans decades (a flat
    curve gives 1/N^2), so values below 1e-3 are shown in scientific notation."""
    header = ["scheme", "pattern"]
    for n in results["resolution_lengths"]:
        header += [f"analytic {n}", f"empirical {n}"]
    rows = []
    for scheme in query.schemes(results):
        for pattern in results["patterns"]:
            row = [scheme, pattern]
            for n in results["resolution_lengths"]:
                row += [cell(*query.analytic_resolution(results, scheme, pattern, n), small=True),
                        cell(*query.empirical_resolution(results, scheme, pattern, n), small=True)]
            rows.append(row)
    return Table.of(header, rows, "max", "best (highest) resolution per column marked")


def principles_table(results: dict) -> Table:
    """D, the design principles measured: order variance, translation change, extrapolation
    ratios, the best pattern at 16x and whether loss keeps falling past the training length."""
    t = results["train_len"]
    header = ["scheme", "order variance", "translation Δ", f"bpb {4 * t}/{t}", f"bpb {16 * t}/{t}",
              "best pattern at 16x"] + [f"beyond − inside ({p})" for p in results["patterns"]]
    rows = []
    for p in query.principles(results):
        row = [p["scheme"], cell(p["order_variance"], digits=3), cell(p["translation"], digits=4),
               cell(p["ratio_4x"], digits=2), cell(p["ratio_16x"], digits=2), p["best_pattern_16x"] or "n/a"]
        row += [cell(p["beyond_minus_inside"].get(pat), digits=3) for pat in results["patterns"]]
        rows.append(row)
    best = {3: "min", 4: "min"} | {6 + i: "min" for i in range(len(results["patterns"]))}
    return Table.of(header, rows, best, "lowest extrapolation ratio and lowest beyond − inside per column marked "
                    "(order variance and translation Δ describe a scheme, they are not scores: unmarked)")


def extension_table(results: dict) -> Table:
    """E: the context-extension configurations of the rope run (bpb by length), then the main
    grid's rope and xpos rows for reference."""
    t = results["train_len"]
    header = ["configuration", "pattern"] + [length_label(n, t) for n in results["lengths"]]
    rows = [[row["label"], row["pattern"]]
            + [cell(*row["bpb"][n]) for n in results["lengths"]] for row in query.extension_rows(results)]
    for scheme in ("rope", "xpos"):
        if scheme in query.schemes(results):
            rows += [[f"{scheme} (tables A, B)", pattern]
                     + [cell(*query.evaluation(results, scheme, pattern, n)) for n in results["lengths"]]
                     for pattern in results["patterns"]]
    return Table.of(header, rows, "min", LOWEST_BPB)


#: A bpb difference below this reads as "no clear change" in the report's findings.
CLEAR = 0.005

def extension_findings(results: dict) -> list[str]:
    """One line per no-fine-tune method: what it costs at 1x and what it gives at the longest
    length, against plain rope under causal attention (where a method loses is said)."""
    t, far = results["train_len"], max(results["lengths"])
    rows = query.extension_rows(results)
    base = next((r for r in rows if r["label"] == "rope" and r["pattern"] == "causal" and not r["logn"]), None)
    if base is None or t not in results["lengths"] or base["bpb"][t][0] is None or base["bpb"][far][0] is None:
        return []
    lines = []
    for row in rows:
        if row is base or row["finetune"] is not None:
            continue
        at_one, at_far = row["bpb"][t][0], row["bpb"][far][0]
        if at_one is None or at_far is None:
            continue
        d_one, d_far = at_one - base["bpb"][t][0], at_far - base["bpb"][far][0]
        past = ("helps past the training length" if d_far < -CLEAR else
                "loses past the training length" if d_far > CLEAR else "no clear change past the training length")
        inside = "; costs inside it" if d_one > CLEAR else ("; also helps inside it" if d_one < -CLEAR else "")
        verdict = past + inside
        lines.append(f"{row['label']} ({row['pattern']}): "
                     f"{signed(d_one)} bpb at {t} (1x), {signed(d_far)} at {far} against plain rope: {verdict}.")
    return lines


def extension_sections(results: dict) -> list[Block]:
    """Sections E (context extension) and F (the stated goal), when the study ran them."""
    ext = results.get("extension")
    if not ext:
        return []
    t = results["train_len"]
    out = [
        Heading("E. Context extension: stretching RoPE, beside local attention and xPos"),
        Text(f"The study's `rope` run evaluated without retraining under each method (every scaling set "
             f"for the longest length: factor {ext['factor']:.3g}), and fine-tuned for {ext['finetune_steps']} "
             f"steps at {ext['finetune_len']} bytes ({multiple(ext['finetune_len'], t)}) with `--init` under no "
             "scaling, PI and YaRN, each evaluated under causal attention and under window/BCA at its new "
             "length. Bits per byte; the same bytes at every length."),
        extension_table(results),
        Figure("extension.png", "context extension"),
    ]
    findings = extension_findings(results)
    if findings:
        out += [Text("Against plain rope under causal attention (lower is better):"), Bullets(findings)]
    return out + goal_section(results)


def goal_section(results: dict) -> list[Block]:
    """F: the configuration with the lowest bpb at 16x, and its margin below the best bpb any
    trained scheme reaches at 1x."""
    g = query.goal(results)
    if g is None:
        return []
    best, one = g["best"], g["one_x"]
    t = results["train_len"]
    verdict = "met" if g["margin"] >= 0.05 else "not met"
    caveat = ""
    own = best["bpb"].get(t)
    if best["finetuned"] and own is not None:
        caveat = (f" That configuration was fine-tuned, so it also had more training than the 1x reference; "
                  f"against its own bpb at 1x ({own:.3f}) the gain from the longer context alone is "
                  f"{100 * (own - best['value']) / own:.1f} %.")
    return [
        Heading("F. The stated goal: context that is used"),
        Text(f"Of every configuration measured (tables A, B and E), the lowest bpb at {g['length']} bytes "
             f"({multiple(g['length'], t)}) is **{best['value']:.3f}**: {best['name']} under {best['pattern']}"
             f"{' (fine-tuned)' if best['finetuned'] else ''}. The best any trained scheme reaches at {t} "
             f"bytes (1x) is {one['value']:.3f} ({one['name']} under {one['pattern']}). Margin: "
             f"**{100 * g['margin']:.1f} %** below (the aim is at least 5 %: {verdict}). Found by taking the "
             "minimum over every configuration of the study (lexkit.results.goal); a longer search is a "
             "matter of adding configurations to lexkit.extension." + caveat),
    ]


def percent(x: float | None) -> Cell:
    """An exact-match cell in percent (its value the fraction as shown)."""
    return Cell("n/a", None) if x is None else Cell(f"{100 * x:.0f}", round(100 * x) / 100)


def retrieval_table(results: dict) -> Table:
    """G: exact match (%) of copy needles at every multiple of the training length, then bpb at
    1x and 16x and their ratio, one row per configuration (scheme or method) and pattern."""
    g = results["retrieval"]
    ms, bms = g["multiples"], g["bpb_multiples"]
    header = (["configuration", "pattern"] + [f"exact {m}x (%)" for m in ms] + [f"bpb {m}x" for m in bms]
              + [f"bpb {bms[-1]}x / {bms[0]}x"])
    rows = []
    for row in query.retrieval_rows(results):
        b = [row["bpb"].get(m) for m in bms]
        ratio = b[-1] / b[0] if b[0] and b[-1] is not None else None
        rows.append([row["label"], row["pattern"]] + [percent(row["accuracy"].get(m)) for m in ms]
                    + [cell(v) for v in b] + [cell(ratio, digits=2)])
    best = {2 + i: "max" for i in range(len(ms))} | {2 + len(ms) + i: "min" for i in range(len(bms) + 1)}
    return Table.of(header, rows, best, "highest exact match and lowest bpb (and ratio) per column marked")


def answer_bits_table(results: dict) -> Table:
    """G, continuous: teacher-forced bits per answer byte by multiple (chance: log2 26 = 4.70)."""
    g = results["retrieval"]
    header = ["configuration", "pattern"] + [f"{m}x" for m in g["multiples"]]
    rows = [[row["label"], row["pattern"]] + [cell(row["answer_bits"].get(m), digits=2) for m in g["multiples"]]
            for row in query.retrieval_rows(results)]
    return Table.of(header, rows, "min", "lowest answer bits per column marked")


def retrieval_findings(results: dict) -> list[str]:
    """One line per configuration that loses the skill: where it stops retrieving (below 90 %
    exact match over all depths), with what it keeps at 16x and its bpb there."""
    far = max(results["retrieval"]["multiples"])
    lines = []
    for row in query.retrieval_rows(results):
        stop = query.stops_at(row)
        if stop is None:
            continue
        acc = row["accuracy"]
        first, best = min(acc), max(acc, key=lambda m: (acc[m], -m))
        if stop != first:
            where = f"retrieves {100 * acc[first]:.0f} % at {first}x, stops at {stop}x ({100 * acc[stop]:.0f} %)"
        elif acc[best] > 0:
            where = f"never reaches 90 % (best {100 * acc[best]:.0f} % at {best}x)"
        else:
            where = "retrieves nothing at any length"
        bpb = row["bpb"].get(far)
        lines.append(f"{row['label']} ({row['pattern']}): {where}; {100 * acc[far]:.0f} % at {far}x"
                     + (f", where its bpb is {bpb:.3f}" if bpb is not None else "") + ".")
    return lines


def context_goal_text(results: dict) -> Text | None:
    """The goal of table G, stated and measured: met by which configuration, or how far the
    nearest one is."""
    g = query.context_goal(results)
    if g is None:
        return None
    far = g["multiple"]
    aim = (f"bpb at {far}x within {100 * query.FLAT:.0f} % of its own bpb at 1x and at least "
           f"{100 * query.RETRIEVES:.0f} % exact match at {far}x at every depth")

    def describe(r):
        ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.3f}"
        return (f"{r['label']} ({r['pattern']}): bpb {far}x / 1x {ratio}, exact match at {far}x "
                f"{100 * r['accuracy'].get(far, 0):.0f} % over all depths, {100 * r['worst']:.0f} % at its worst depth")

    if g["met"]:
        verdict = f"**met** by {', '.join(g['met'])}. Best: {describe(g['nearest'])}."
    else:
        near = g["nearest"]
        gaps = []
        if not near["flat"]:
            gaps.append("bpb " + ("not measured" if near["ratio"] is None
                                  else f"{100 * (near['ratio'] - 1):.1f} % above its 1x"))
        gaps.append(f"{100 * (query.RETRIEVES - near['worst']):.0f} points short of "
                    f"{100 * query.RETRIEVES:.0f} % at its worst depth")
        verdict = f"**not met**. Nearest: {describe(near)} ({'; '.join(gaps)})."
        best = g["best_retrieval"]
        if best is not near:
            verdict += f" Best retrieval at {far}x whatever its bpb: {describe(best)}."
    reach = g["longest_reach"]
    if reach is not None and reach["reach"] < far:
        verdict += (f" The longest length at which any configuration still retrieves at least "
                    f"{100 * query.RETRIEVES:.0f} % at every depth: {reach['reach']}x "
                    f"({reach['label']}, {reach['pattern']}).")
    return Text(f"The goal ({aim}; nothing tuned on the evaluation needles): {verdict}")


def retrieval_sections(results: dict) -> list[Block]:
    """Section G (use of context), when the study ran it."""
    g = results.get("retrieval")
    if not g:
        return []
    t = g["train_len"]
    out = [
        Heading("G. Use of context: retrieval at distance"),
        Text(f"Perplexity rewards a model that survives a long input; it cannot tell it from one that uses it. "
             f"One run per scheme ({g['preset']} preset, trained at {t} bytes for {g['steps']} steps, batch "
             f"{g['batch']}, lr {g['lr']:g}, `--mix {g['mix']}`, {g['seeds']} seed), scored on held-out copy "
             f"needles ({g['size']} random letters after a marker, validation filler, the marker again; "
             f"{g['samples']} documents at each depth {', '.join(f'{d:g}' for d in g['depths'])} %): exact match "
             "of greedy decoding at each multiple of the training length, beside the configuration's bpb. On "
             f"the rope run, table E's methods (scalings at x{max(g['multiples'])}, ReRoPE, log-n, sinks; the "
             f"fine-tunes run {g['finetune_steps']} steps at 4x with the same mix)."),
        retrieval_table(results),
        Figure("retrieval_scatter.png", "bpb against retrieval at 16x"),
        Figure("retrieval_heatmap.png", "exact match by configuration and length"),
        Text("Answer bits per byte (teacher-forced; a copying model scores near 0, a uniform guess over the "
             "letters 4.70):"),
        answer_bits_table(results),
    ]
    findings = retrieval_findings(results)
    if findings:
        out += [Text("Where each configuration that loses the skill stops retrieving (below 90 % over all "
                     "depths):"), Bullets(findings)]
    goal = context_goal_text(results)
    return out + ([goal] if goal is not None else [])


def paper_tables() -> list[Block]:
    out: list[Block] = []
    for title, table, rule in (("Table 2 (perplexity, causal)", PAPER_TABLE2, "min"),
                               ("Table 5 (perplexity beyond 1024)", PAPER_TABLE5, "min"),
                               ("Table 3 (attention resolution)", PAPER_TABLE3, "max")):
        header = ["variant"] + [str(n) for n in table["lengths"]]
        rows = [[k] + [cell(v, digits=2) for v in vals] for k, vals in table.items() if k != "lengths"]
        what = "perplexity" if rule == "min" else "resolution"
        out += [Text(f"**{title}**"), Table.of(header, rows, rule, f"best ({'lowest' if rule == 'min' else 'highest'}) "
                                                               f"{what} per column marked")]
    return out


def provenance_value(value) -> str:
    """One provenance entry as text: a dict as ``key value`` pairs, a list comma-separated."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {provenance_value(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(provenance_value(v) for v in value)
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def provenance_table(results: dict) -> Table:
    """What the study ran on: corpus, model, training, seeds, time, versions, then every entry of
    results.json's ``provenance`` (when the study recorded one) as it is."""
    t, fp, m, train = results["train_len"], results["data"]["fingerprint"], results["model"], results["train"]
    rows = [
        ["corpus", f"{results['data']['spec']}: {fp.get('files')} files, {fp.get('bytes', 0):,} bytes, "
                   f"Python {fp.get('python', '?')}, sha256 {fp.get('sha256', '?')}"],
        ["model", f"{m['n_layers']} layers, d_model {m['d_model']}, {m['n_heads']} heads, "
                  f"{results['params']:,} parameters"],
        ["training", f"{train['steps']} steps, batch {train['batch']}, lr {train['lr']}, length {t}"],
        ["seeds", str(results["config"]["seeds"])],
        ["wall time", f"{results['wall_seconds']:.0f} s (this invocation; {results['work']['ran']} tasks ran, "
                      f"{results['work']['cached']} cached)"],
        ["versions", f"lexkit {results['lexkit']}, torch {results['torch']}"],
    ]
    ran = kernels_ran(results)
    if ran:
        rows.append(["attention kernels", ran])
    rows += [[str(k), provenance_value(v)] for k, v in (results.get("provenance") or {}).items()]
    return Table.of(["item", "value"], rows)


def kernels_ran(results: dict) -> str | None:
    """The attention kernels the study's evaluations actually ran (each evaluation row's ``kernel``:
    ``auto`` resolved, or the flex ladder's rung or fallback), each with the lengths it ran at;
    None for results recorded before rows carried the kernel."""
    at: dict[str, set[int]] = {}
    for run in results.get("runs", []):
        for row in run.get("eval", {}).get("results", []):
            if row.get("kernel"):
                at.setdefault(row["kernel"], set()).add(row["length"])
    return "; ".join(f"{k} at {', '.join(map(str, sorted(n)))}" for k, n in at.items()) or None


def document(results: dict) -> list[Block]:
    """The report, block by block."""
    t = results["train_len"]
    m = results["model"]
    train = results["train"]
    seeds = results["config"]["seeds"]
    note = " (mean ± std over seeds)" if seeds > 1 else ""
    docs = results["runs"][0]["eval"]["documents"] if results["runs"] else 0
    per_doc = results["runs"][0]["eval"]["bytes_per_document"] if results["runs"] else 0
    return [
        Heading("lexkit study report", 1),
        Text(f"Byte-level decoders ({m['n_layers']} layers, width {m['d_model']}, {m['n_heads']} heads, "
             f"{results['params']:,} parameters) trained at **{t} bytes** for {train['steps']} steps "
             f"(batch {train['batch']}), evaluated at {', '.join(map(str, results['lengths']))} bytes under "
             f"{', '.join(results['patterns'])}. Every length scores the same bytes: the first "
             f"{per_doc:,} bytes of {docs} validation documents (the paper's protocol). Numbers are bits "
             f"per byte (lower is better){note}."),
        Figure("bpb_by_length.png", "bpb by length"),
        Heading("A. Perplexity by length, causal attention (the paper's Table 2 layout)"),
        Text("Bits per byte; columns past the training length (1x) are extrapolation."),
        length_table(results),
        Text("Perplexity per byte (e^NLL):"),
        length_table(results, "ppl"),
        Heading("B. Relative schemes under each attention pattern beyond the training length (Table 5 layout)"),
        Text("window:W is the essay's super-strong baseline (each query sees the last W keys); bca:W is the "
             "paper's blockwise causal attention (blocks of W/2, each sees itself and the previous block)."),
        pattern_table(results),
        Heading("C. Attention resolution (Table 3 layout)"),
        Text("Analytic: from the encoding alone, before training (learnable biases at their initial values); "
             "empirical: measured per layer on the trained model (mean over heads, then layers) on "
             f"{results['config']['resolution_texts']} validation texts. R lies in [0, 1] for any curve, so the "
             "paper's 1.08 for xPos+BCA cannot come from the formula as printed."),
        resolution_table(results),
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
        principles_table(results),
        Figure("loss_by_position.png", "loss by position"),
        *extension_sections(results),
        *retrieval_sections(results),
        Heading("The paper's numbers, for orientation"),
        Text("A different model (24 layers, hidden 1024), data (a Pile subset, BPE tokens) and scale: compare "
             "shapes and orderings, not values."),
        *paper_tables(),
        Heading("Provenance"),
        provenance_table(results),
    ]


def markdown_table(table: Table) -> str:
    lines = ["| " + " | ".join(table.header) + " |", "|" + "|".join(" --- " for _ in table.header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in table.rows]
    return "\n".join(lines)


def markdown_block(block: Block) -> str:
    if isinstance(block, Heading):
        return "#" * block.level + " " + block.text
    if isinstance(block, Text):
        return block.text
    if isinstance(block, Bullets):
        return "\n".join(f"- {item}" for item in block.items)
    if isinstance(block, Figure):
        return f"![{block.alt}]({block.name})"
    return markdown_table(block)


def markdown(results: dict) -> str:
    return "\n\n".join(markdown_block(b) for b in document(results)) + "\n"


def csv_rows(results: dict) -> list[dict]:
    rows = []
    for run in results["runs"]:
        for row in run["eval"]["results"]:
            rows.append({"scheme": run["scheme"], "seed": run["seed"], "pattern": row["pattern"],
                         "length": row["length"],
                         "bpb": row.get("bpb"), "ppl": row.get("ppl"), "bytes": row.get("bytes"),
                         "unavailable": row.get("unavailable", "")})
    return rows


def write_report(results: dict, out: str | Path) -> None:
    """In the directory ``out``: the figures (:func:`lexkit.plots.report_figures`), ``report.md``,
    ``report.html`` (the same blocks, figures embedded) and ``results.csv``."""
    out = Path(out)
    images = report_figures(results, out)
    atomic_write(out / "report.md", markdown(results))
    atomic_write(out / "report.html", html(document(results), images))
    buffer = io.StringIO()
    rows = csv_rows(results)
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else ["scheme"])
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(out / "results.csv", buffer.getvalue())
