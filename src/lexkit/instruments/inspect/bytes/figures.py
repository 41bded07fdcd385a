"""The byte table's figure (``lexkit inspect RUN --plot``), drawn from its report."""

from __future__ import annotations

from pathlib import Path

from ....documents.plots import figure, place_labels, save


def embedding(report: dict, path: str | Path) -> None:
    """The byte table (``lexkit inspect RUN``'s JSON document): left, each token's cosine to the mean
    row of the unseen ones against how often training showed it (count + 1, log axis; unseen at 1),
    the most collapsed seen tokens and the three rarest labelled; right, its row norm. An untied head's output rows are
    drawn beside the input rows."""
    rows = report["rows"]
    key = "trained" if "trained" in rows[0] else "corpus"
    untied = "out_cosine" in rows[0]
    fig, (left, right) = figure(panels=2)
    by_corpus = report["summary"].get("unseen_by") == "corpus"
    for prefix, what, marker in (("", "input rows" if untied else "rows", "o"), ("out_", "output rows", "s")):
        if prefix and not untied:
            continue
        for seen, color in ((True, "tab:blue" if not prefix else "tab:orange"), (False, "tab:gray")):
            part = [r for r in rows if r["seen"] == seen]
            xs = [r[key] + 1 for r in part]
            label = f"{what}, " + (("in the corpus" if seen else "not in the corpus") if by_corpus
                                   else ("seen" if seen else "never shown"))
            if part and part[0][f"{prefix}cosine"] is not None:
                left.scatter(xs, [r[f"{prefix}cosine"] for r in part], s=10, marker=marker, facecolors="none",
                             edgecolors=color, linewidths=0.7, label=label)
            right.scatter(xs, [r[f"{prefix}norm"] for r in part], s=10, marker=marker, facecolors="none",
                          edgecolors=color, linewidths=0.7, label=label)
    unseen = "corpus-absent" if by_corpus else "never-shown"
    for ax, ylabel in ((left, f"cosine to the mean row of the {unseen} tokens"), (right, "row norm")):
        ax.set_xscale("log")
        ax.set_xlabel(f"{'times training showed it' if key == 'trained' else 'count in the corpus'} + 1")
        ax.set_ylabel(ylabel)
        if ax.collections:
            ax.legend(fontsize="small")
    if not left.collections:
        left.text(0.5, 0.5, f"no {unseen} token: no mean to compare with", transform=left.transAxes, ha="center")
    fig.suptitle(f"{report.get('run', '')}: {report.get('scheme', '')}, head {'tied' if report['tied'] else 'untied'}")
    summary = report["summary"]
    marked = {c["token"]: c for c in summary.get("collapsed", []) + summary.get("rarest", [])[:3]}  # and the rarest
    cosine = {r["token"]: r["cosine"] for r in rows}
    points = [(c[key] + 1, cosine[t]) for t, c in marked.items() if cosine[t] is not None]
    if points:  # after the title: placing labels freezes the layout
        place_labels(left, points, [c["label"] for t, c in marked.items() if cosine[t] is not None])
    save(fig, path)
