"""The study report's tables of the grid, built from results.json through :mod:`lexkit.study.results`
alone: the paper's Tables 2, 5 and 3 layouts (A, B, C), the design principles (D), the paper's own
numbers and the provenance; and the cells every table of the report is made of (:func:`cell`,
:func:`percent`, the tables beside the grid's too). Each table is a :class:`lexkit.documents.blocks.Table` of
:class:`~lexkit.documents.blocks.Number` cells that every renderer draws."""

from __future__ import annotations

from ...core import notation
from ...core.notation import length_label, number
from ...documents.blocks import Number, Table
from .. import results as query
from ..schema import StudyResults

LOWEST_BPB = "best (lowest) bpb per column marked"

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


def cell(mean: float | None, std: float | None = None, digits: int = 3, *, small: bool = False) -> Number:
    """A number cell whose value is the mean as shown (so cells that read the same tie)."""
    shown = None if mean is None else float(number(mean, digits=digits, small=small))
    return Number(number(mean, std, digits, small=small), shown)


def percent(x: float | None) -> Number:
    """An exact-match cell in percent (:func:`lexkit.core.notation.percent`; its value the fraction as shown)."""
    if x is None:
        return Number("n/a", None)
    text = notation.percent(x)
    return Number(text, float(text) / 100 if text[0].isdigit() else x)


def length_table(doc: StudyResults, key: str = "bpb") -> Table:
    """A, the paper's Table 2 layout: row (scheme or layout) x length under causal attention (``key``:
    bpb or ppl)."""
    t = doc.train_len
    header = ["scheme"] + [length_label(n, t) for n in doc.lengths]
    rows = [[s] + [cell(*query.evaluation(doc, s, "causal", n, key), digits=3 if key == "bpb" else 2)
                   for n in doc.lengths] for s in query.labels(doc)]
    return Table.of(header, rows, "min", LOWEST_BPB if key == "bpb" else "best (lowest) perplexity per column marked")


def pattern_table(doc: StudyResults) -> Table:
    """B, the paper's Table 5 layout: each row without absolute embeddings (the relative schemes,
    FIRE's bias of the query's position, the layouts) under every pattern beyond the training length
    (bpb)."""
    t = doc.train_len
    beyond = [n for n in doc.lengths if n > t] or doc.lengths
    header = ["scheme", "pattern"] + [length_label(n, t) for n in beyond]
    rows = [[label, pattern] + [cell(*query.evaluation(doc, label, pattern, n)) for n in beyond]
            for label in query.labels(doc) if _without_absolute(query.runs_of(doc, label)[0])
            for pattern in doc.patterns]
    return Table.of(header, rows, "min", LOWEST_BPB)


def _without_absolute(run) -> bool:
    """Whether a grid row is one of table B's: a scheme whose family is not absolute, or a layout."""
    return run.layered or run.family != "absolute"


def resolution_table(doc: StudyResults) -> Table:
    """C, the paper's Table 3 layout: resolution per row (and pattern) at 1x, 2x, ... the
    training length, analytic (before training) beside empirical (after); R spans decades (a flat
    curve gives 1/N^2), so values below 1e-3 are shown in scientific notation. A layout's R is the
    mean over its layers, and its label says so (each layer's: :func:`layer_resolution_table`)."""
    header = ["scheme", "pattern"]
    for n in doc.resolution_lengths:
        header += [f"analytic {n}", f"empirical {n}"]
    rows, layered = [], set(query.layouts(doc))
    for label in query.labels(doc):
        for pattern in doc.patterns:
            row = [f"{label} (mean over layers)" if label in layered else label, pattern]
            for n in doc.resolution_lengths:
                row += [cell(*query.analytic_resolution(doc, label, pattern, n), small=True),
                        cell(*query.empirical_resolution(doc, label, pattern, n), small=True)]
            rows.append(row)
    return Table.of(header, rows, "max", "best (highest) resolution per column marked")


def layer_resolution_table(doc: StudyResults) -> Table:
    """C, layer by layer: each layout's R of every layer, analytic beside empirical (mean over
    seeds), at every resolution length, so that a layer the mean hides (a global layer beneath
    local ones) shows."""
    header = ["layout", "pattern", "layer"]
    for n in doc.resolution_lengths:
        header += [f"analytic {n}", f"empirical {n}"]
    rows = []
    for label in query.layouts(doc):
        for pattern in doc.patterns:
            by_length = {n: query.layer_resolution(doc, label, pattern, n) for n in doc.resolution_lengths}
            count = max((len(v) for pair in by_length.values() for v in pair if v), default=0)
            for i in range(count):
                row = [label, pattern, str(i)]
                for n in doc.resolution_lengths:
                    row += [cell(values[i] if values and i < len(values) else None, small=True)
                            for values in by_length[n]]
                rows.append(row)
    return Table.of(header, rows, "max", "best (highest) resolution per column marked")


def principles_table(doc: StudyResults) -> Table:
    """D, the design principles measured: order variance, translation change, extrapolation
    ratios, the best pattern at 16x and whether loss keeps falling past the training length."""
    t = doc.train_len
    header = ["scheme", "order variance", "translation Δ", f"bpb {4 * t}/{t}", f"bpb {16 * t}/{t}",
              "best pattern at 16x"] + [f"beyond − inside ({p})" for p in doc.patterns]
    rows = []
    for p in query.principles(doc):
        row = [p.label, cell(p.order_variance, digits=3), cell(p.translation, digits=4),
               cell(p.ratio_4x, digits=2), cell(p.ratio_16x, digits=2), p.best_pattern_16x or "n/a"]
        row += [cell(p.beyond_minus_inside.get(pat), digits=3) for pat in doc.patterns]
        rows.append(row)
    best = {3: "min", 4: "min"} | {6 + i: "min" for i in range(len(doc.patterns))}
    return Table.of(header, rows, best, "lowest extrapolation ratio and lowest beyond − inside per column marked "
                    "(order variance and translation Δ describe a scheme, they are not scores: unmarked)")


def paper_tables() -> list[tuple[str, Table]]:
    """The paper's Tables 2, 5 and 3, each with its title."""
    out = []
    for title, table, rule in (("Table 2 (perplexity, causal)", PAPER_TABLE2, "min"),
                               ("Table 5 (perplexity beyond 1024)", PAPER_TABLE5, "min"),
                               ("Table 3 (attention resolution)", PAPER_TABLE3, "max")):
        header = ["variant"] + [str(n) for n in table["lengths"]]
        rows = [[k] + [cell(v, digits=2) for v in vals] for k, vals in table.items() if k != "lengths"]
        what = "perplexity" if rule == "min" else "resolution"
        out.append((title, Table.of(header, rows, rule, f"best ({'lowest' if rule == 'min' else 'highest'}) "
                                                        f"{what} per column marked")))
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


def provenance_table(doc: StudyResults) -> Table:
    """What the study ran on: corpus, model, training, seeds, time, versions, the attention kernels
    its evaluations ran, then every entry of results.json's ``provenance`` (when the study recorded
    one) as it is."""
    t, fp, m, train = doc.train_len, doc.data["fingerprint"], doc.model, doc.train
    rows = [
        ["corpus", f"{doc.data['spec']}: {fp.get('files')} files, {fp.get('bytes', 0):,} bytes, "
                   f"Python {fp.get('python', '?')}, sha256 {fp.get('sha256', '?')}"],
        ["model", f"{m['n_layers']} layers, d_model {m['d_model']}, {m['n_heads']} heads, {doc.params:,} parameters"],
        ["training", f"{train['steps']} steps, batch {train['batch']}, lr {train['lr']}, length {t}"],
        ["seeds", str(doc.config["seeds"])],
        ["wall time", f"{doc.wall_seconds:.0f} s (this invocation; {doc.work['ran']} tasks ran, "
                      f"{doc.work['cached']} cached)" + computed(doc)],
        ["versions", f"lexkit {doc.lexkit}, torch {doc.torch}"],
    ]
    ran = query.kernels_ran(doc)
    if ran:
        rows.append(["attention kernels", "; ".join(f"{k} at {', '.join(map(str, n))}" for k, n in ran.items())])
    rows += [[str(k), provenance_value(v)] for k, v in (doc.provenance or {}).items()]
    return Table.of(["item", "value"], rows)


def computed(doc: StudyResults) -> str:
    """What computing the study took, where this invocation is not all of it (a cached re-run, a
    resumed one): the wall time of the invocations that ran tasks."""
    work = doc.computing()
    if not work or not work[1] or (work[1] == 1 and (doc.work or {}).get("ran")):  # none, or this one alone
        return ""
    seconds, count = work
    return f"; computing it took {seconds:.0f} s over {count} invocation{'s' if count != 1 else ''} that ran tasks"
