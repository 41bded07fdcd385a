"""The study report: markdown tables (the paper's Tables 2, 5 and 3 layouts plus the design
principles), CSV, plots, and the headline table in the terminal. Built from ``results.json``
alone, so a report can be rebuilt without the runs.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from pathlib import Path

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


def _agg(values: list) -> tuple[float | None, float | None]:
    vals = [v for v in values if v is not None and isinstance(v, (int, float)) and math.isfinite(v)]
    if not vals:
        return None, None
    mean = sum(vals) / len(vals)
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else None
    return mean, std


def _fmt(mean: float | None, std: float | None = None, digits: int = 3) -> str:
    if mean is None:
        return "n/a"
    text = f"{mean:.{digits}f}" if abs(mean) < 1e4 else f"{mean:.3g}"
    return text + (f" ± {std:.{digits}f}" if std is not None else "")


def _schemes(results: dict) -> list[str]:
    return list(dict.fromkeys(r["scheme"] for r in results["runs"]))


def _eval_value(results: dict, scheme: str, pattern: str, length: int, key: str = "bpb"):
    values = [
        row.get(key)
        for run in results["runs"] if run["scheme"] == scheme
        for row in run["eval"]["results"] if row["pattern"] == pattern and row["length"] == length
    ]
    return _agg(values)


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _length_label(n: int, train_len: int) -> str:
    return f"{n}" + (" (extrap.)" if n > train_len else "")


def table_a(results: dict, key: str = "bpb") -> tuple[list[str], list[list[str]]]:
    """Table 2 layout: scheme x length under causal attention."""
    t = results["train_len"]
    header = ["scheme"] + [_length_label(n, t) for n in results["lengths"]]
    rows = [[s] + [_fmt(*_eval_value(results, s, "causal", n, key), digits=3 if key == "bpb" else 2)
                   for n in results["lengths"]] for s in _schemes(results)]
    return header, rows


def table_b(results: dict) -> tuple[list[str], list[list[str]]]:
    """Table 5 layout: each relative scheme under every pattern beyond the training length (bpb)."""
    t = results["train_len"]
    beyond = [n for n in results["lengths"] if n > t] or results["lengths"]
    header = ["scheme", "pattern"] + [_length_label(n, t) for n in beyond]
    rows = []
    for run_scheme in _schemes(results):
        run = next(r for r in results["runs"] if r["scheme"] == run_scheme)
        if not run["relative"]:
            continue
        for pattern in results["patterns"]:
            rows.append([run_scheme, pattern] + [_fmt(*_eval_value(results, run_scheme, pattern, n)) for n in beyond])
    return header, rows


def _empirical(results: dict, scheme: str, pattern: str, length: int):
    values = [
        row.get("resolution")
        for run in results["runs"] if run["scheme"] == scheme
        for row in run["resolution"] if row["pattern"] == pattern and row["length"] == length
    ]
    return _agg(values)


def _analytic(results: dict, scheme: str, pattern: str, length: int):
    for row in results["analytic"]:
        if row["scheme"] == scheme and row["pattern"] == pattern and row["length"] == length:
            return row["resolution"], None
    return None, None


def table_c(results: dict) -> tuple[list[str], list[list[str]]]:
    """Table 3 layout: resolution per scheme (and pattern) at 1x, 2x, ... the training length,
    analytic (before training) beside empirical (after)."""
    t = results["train_len"]
    header = ["scheme", "pattern"]
    for n in results["resolution_lengths"]:
        header += [f"analytic {n}", f"empirical {n}"]
    rows = []
    for scheme in _schemes(results):
        for pattern in results["patterns"]:
            row = [scheme, pattern]
            for n in results["resolution_lengths"]:
                row += [_fmt(*_analytic(results, scheme, pattern, n)), _fmt(*_empirical(results, scheme, pattern, n))]
            rows.append(row)
    del t
    return header, rows


def principles(results: dict) -> list[dict]:
    """Per scheme: order variance, translation change, extrapolation ratios, and whether the loss
    keeps falling past the training length (loss by position at the longest length)."""
    t, lengths = results["train_len"], results["lengths"]
    out = []
    for scheme in _schemes(results):
        runs = [r for r in results["runs"] if r["scheme"] == scheme]
        one = _eval_value(results, scheme, "causal", t)[0] if t in lengths else None

        def ratio(n: int, pattern: str = "causal"):
            value = _eval_value(results, scheme, pattern, n)[0] if n in lengths else None
            return value / one if value is not None and one else None

        falls = {}
        for pattern in results["patterns"]:
            inside, beyond = [], []
            for run in runs:
                rows = [r for r in run["eval"]["by_position"] if r["length"] == max(lengths) and r["pattern"] == pattern]
                inside += [r["bpb"] for r in rows if not r["beyond_train"]][-1:]
                beyond += [r["bpb"] for r in rows if r["beyond_train"]]
            if inside and beyond:
                falls[pattern] = (_agg(beyond)[0] or 0) - (_agg(inside)[0] or 0)
        out.append({
            "scheme": scheme,
            "order_variance": _agg([r["principles"].get("order_variance") for r in runs])[0],
            "translation": _agg([r["principles"].get("translation") for r in runs])[0],
            "ratio_4x": ratio(4 * t), "ratio_16x": ratio(16 * t),
            "best_pattern_16x": _best(results, scheme, 16 * t),
            "beyond_minus_inside": falls,
        })
    return out


def _best(results: dict, scheme: str, n: int) -> str | None:
    if n not in results["lengths"]:
        return None
    scored = [(v, p) for p in results["patterns"] if (v := _eval_value(results, scheme, p, n)[0]) is not None]
    return min(scored)[1] if scored else None


def table_d(results: dict) -> tuple[list[str], list[list[str]]]:
    t = results["train_len"]
    header = ["scheme", "order variance", "translation Δ", f"bpb {4 * t}/{t}", f"bpb {16 * t}/{t}",
              "best pattern at 16x"] + [f"beyond − inside ({p})" for p in results["patterns"]]
    rows = []
    for p in principles(results):
        row = [p["scheme"], _fmt(p["order_variance"], digits=3), _fmt(p["translation"], digits=4),
               _fmt(p["ratio_4x"], digits=2), _fmt(p["ratio_16x"], digits=2), p["best_pattern_16x"] or "n/a"]
        row += [_fmt(p["beyond_minus_inside"].get(pat), digits=3) for pat in results["patterns"]]
        rows.append(row)
    return header, rows


def _paper_tables() -> str:
    parts = []
    for title, table, digits in (("Table 2 (perplexity, causal)", PAPER_TABLE2, 2),
                                 ("Table 5 (perplexity beyond 1024)", PAPER_TABLE5, 2),
                                 ("Table 3 (attention resolution)", PAPER_TABLE3, 2)):
        header = ["variant"] + [str(n) for n in table["lengths"]]
        rows = [[k] + [f"{v:.{digits}f}" for v in vals] for k, vals in table.items() if k != "lengths"]
        parts.append(f"**{title}**\n\n" + _markdown(header, rows))
    return "\n\n".join(parts)


def csv_rows(results: dict) -> list[dict]:
    rows = []
    for run in results["runs"]:
        for row in run["eval"]["results"]:
            rows.append({"scheme": run["scheme"], "seed": run["seed"], "pattern": row["pattern"], "length": row["length"],
                         "bpb": row.get("bpb"), "ppl": row.get("ppl"), "bytes": row.get("bytes"),
                         "unavailable": row.get("unavailable", "")})
    return rows


def markdown(results: dict) -> str:
    t = results["train_len"]
    fp = results["data"]["fingerprint"]
    m = results["model"]
    train = results["train"]
    seeds = results["config"]["seeds"]
    cell = " (mean ± std over seeds)" if seeds > 1 else ""
    docs = results["runs"][0]["eval"]["documents"] if results["runs"] else 0
    per_doc = results["runs"][0]["eval"]["bytes_per_document"] if results["runs"] else 0
    sections = [
        "# lexkit study report",
        f"Byte-level decoders ({m['n_layers']} layers, width {m['d_model']}, {m['n_heads']} heads, "
        f"{results['params']:,} parameters) trained at **{t} bytes** for {train['steps']} steps "
        f"(batch {train['batch']}), evaluated at {', '.join(map(str, results['lengths']))} bytes under "
        f"{', '.join(results['patterns'])}. Every length scores the same bytes: the first "
        f"{per_doc:,} bytes of {docs} validation documents (the paper's protocol). Numbers are bits "
        f"per byte (lower is better){cell}.",
        "![bpb by length](bpb_by_length.png)",
        "## A. Perplexity by length, causal attention (the paper's Table 2 layout)",
        "Bits per byte; columns past the training length are extrapolation.",
        _markdown(*table_a(results)),
        "Perplexity per byte (e^NLL):",
        _markdown(*table_a(results, "ppl")),
        "## B. Relative schemes under each attention pattern beyond the training length (Table 5 layout)",
        "window:W is the essay's super-strong baseline (each query sees the last W keys); bca:W is the "
        "paper's blockwise causal attention (blocks of W/2, each sees itself and the previous block).",
        _markdown(*table_b(results)),
        "## C. Attention resolution (Table 3 layout)",
        "Analytic: from the encoding alone, before training (learnable biases at their initial values); "
        "empirical: measured per layer on the trained model (mean over heads, then layers) on "
        f"{results['config']['resolution_texts']} validation texts. R lies in [0, 1] for any curve, so the "
        "paper's 1.08 for xPos+BCA cannot come from the formula as printed.",
        _markdown(*table_c(results)),
        "![s[n] curves](s_curves.png)\n\n![resolution per layer](resolution_per_layer.png)\n\n![entropy](entropy.png)",
        "## D. The design principles, measured",
        "Order variance: max |f(PX) − Pf(X)| / max|f(X)| for a random permutation P (0 = bag of words). "
        f"Translation Δ: max change of the logits under a position offset of {t // 2}, relative (≈0 for "
        "relative schemes). Extrapolation: bpb at 4x and 16x over bpb at 1x under causal attention "
        "(≤ 1 extrapolates). Beyond − inside: bpb of positions past the training length minus bpb of the "
        "last bucket inside it, at the longest length (negative: the model uses the extra context, "
        "seed 000's \"not exploding is not extrapolating\").",
        _markdown(*table_d(results)),
        "![loss by position](loss_by_position.png)",
        "## The paper's numbers, for orientation",
        "A different model (24 layers, hidden 1024), data (a Pile subset, BPE tokens) and scale: compare "
        "shapes and orderings, not values.",
        _paper_tables(),
        "## Provenance",
        _markdown(["item", "value"], [
            ["corpus", f"{results['data']['spec']}: {fp.get('files')} files, {fp.get('bytes', 0):,} bytes, "
                       f"Python {fp.get('python', '?')}, sha256 {fp.get('sha256', '?')}"],
            ["model", f"{m['n_layers']} layers, d_model {m['d_model']}, {m['n_heads']} heads, {results['params']:,} parameters"],
            ["training", f"{train['steps']} steps, batch {train['batch']}, lr {train['lr']}, length {t}"],
            ["seeds", str(seeds)],
            ["wall time", f"{results['wall_seconds']:.0f} s (this invocation; {results['work']['ran']} tasks ran, "
                          f"{results['work']['cached']} cached)"],
            ["versions", f"lexkit {results['lexkit']}, torch {results['torch']}"],
        ]),
    ]
    return "\n\n".join(sections) + "\n"


def write_report(results: dict, out: str | Path) -> None:
    out = Path(out)
    atomic_write(out / "report.md", markdown(results))
    buffer = io.StringIO()
    rows = csv_rows(results)
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else ["scheme"])
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(out / "results.csv", buffer.getvalue())
    plots(results, out)


def terminal(results: dict) -> None:
    """The headline table (A) and Table B in the terminal."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for title, (header, rows) in (("bits per byte, causal (A)", table_a(results)),
                                  ("beyond the training length, by pattern (B)", table_b(results))):
        table = Table(title=title)
        for h in header:
            table.add_column(h, justify="left" if h in ("scheme", "pattern") else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plots(results: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from .resolution import analytic_curve

    schemes = _schemes(results)
    t = results["train_len"]
    # bpb against length, one panel per pattern
    fig, axes = plt.subplots(1, len(results["patterns"]), figsize=(5 * len(results["patterns"]), 4), squeeze=False)
    for ax, pattern in zip(axes[0], results["patterns"]):
        for scheme in schemes:
            xs, ys = [], []
            for n in results["lengths"]:
                v = _eval_value(results, scheme, pattern, n)[0]
                if v is not None:
                    xs.append(n)
                    ys.append(v)
            ax.plot(xs, ys, marker="o", label=scheme)
        ax.axvline(t, color="grey", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_title(pattern)
        ax.set_xlabel("evaluation length (bytes)")
        ax.set_ylabel("bits per byte")
        ax.set_ylim(top=min(8.5, ax.get_ylim()[1]))
    axes[0][0].legend(fontsize=7)
    _save(fig, out / "bpb_by_length.png")

    # analytic s[n] (mean over heads) at 4x the training length, causal
    model = results["model"]
    fig, ax = plt.subplots(figsize=(7, 4))
    n = min(4 * t, max(results["lengths"]))
    for scheme in schemes:
        torch.manual_seed(0)
        try:
            from . import positions

            obj = positions.create(scheme, model["n_heads"], model["d_model"] // model["n_heads"],
                                   max_len=model.get("max_len") or t)
            curve = analytic_curve(obj, n)
        except ValueError:
            continue
        s = curve.mean(0)
        ax.plot(range(n), (s - s[0]).tolist(), label=scheme, lw=1)
    ax.axvline(t, color="grey", ls=":", lw=1)
    ax.set_xlabel("distance n")
    ax.set_ylabel("s[n] − s[0] (analytic, mean over heads)")
    ax.legend(fontsize=7)
    _save(fig, out / "s_curves.png")

    # empirical resolution per layer, causal, per scheme across lengths
    fig, ax = plt.subplots(figsize=(7, 4))
    for scheme in schemes:
        rows = [r for run in results["runs"] if run["scheme"] == scheme for r in run["resolution"]
                if r["pattern"] == "causal" and r.get("per_layer")]
        by_len = defaultdict(list)
        for r in rows:
            by_len[r["length"]].append(r["per_layer"])
        for length, layers in sorted(by_len.items())[-1:]:
            ax.plot(range(len(layers[0])), [sum(v) / len(v) for v in zip(*layers)], marker="o", label=f"{scheme} @ {length}")
    ax.set_xlabel("layer")
    ax.set_ylabel("empirical R (mean over heads)")
    ax.legend(fontsize=7)
    _save(fig, out / "resolution_per_layer.png")

    # entropy against length (causal and window)
    fig, ax = plt.subplots(figsize=(7, 4))
    for scheme in schemes:
        for pattern, style in (("causal", "-"), (results["patterns"][-1] if len(results["patterns"]) > 1 else "causal", "--")):
            pts = sorted((r["length"], r["entropy"]) for run in results["runs"] if run["scheme"] == scheme
                         for r in run["resolution"] if r["pattern"] == pattern and r.get("entropy") is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker=".", label=f"{scheme} {pattern}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("length")
    ax.set_ylabel("attention entropy (nats, mean over layers)")
    ax.legend(fontsize=6, ncol=2)
    _save(fig, out / "entropy.png")

    # loss by position at the longest length
    fig, axes = plt.subplots(1, len(results["patterns"]), figsize=(5 * len(results["patterns"]), 4), squeeze=False)
    longest = max(results["lengths"])
    for ax, pattern in zip(axes[0], results["patterns"]):
        for scheme in schemes:
            rows = [r for run in results["runs"] if run["scheme"] == scheme for r in run["eval"]["by_position"]
                    if r["length"] == longest and r["pattern"] == pattern]
            pts = sorted(((r["from"] + r["to"]) / 2, r["bpb"]) for r in rows)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=scheme)
        ax.axvline(t, color="grey", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{pattern} at {longest}")
        ax.set_xlabel("position in the chunk")
        ax.set_ylabel("bits per byte")
        ax.set_ylim(top=min(8.5, ax.get_ylim()[1]))
    axes[0][0].legend(fontsize=7)
    _save(fig, out / "loss_by_position.png")
