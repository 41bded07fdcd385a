"""The resolution command's two figures: the analytic s[n] and R by length (:func:`plot_analytic`), and the
empirical s_hat[n] per layer and R per layer by length (:func:`plot_empirical`), with :mod:`lexkit.documents.plots`'
helpers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from ...documents import plots


def plot_analytic(curves: dict[str, Tensor], table: dict[str, dict[int, float | None]], path: str | Path,
                  *, marks: Sequence[int] = (), title: str = "") -> None:
    """Left: s[n] (mean over heads) against distance, one line per scheme (the paper's Fig. 1
    style; symlog y so bias and rotary curves share an axis). Right: R against length."""
    fig, (left, right) = plots.figure(panels=2)
    for label, curve in curves.items():
        y = plots.finite(curve.mean(0) if curve.ndim == 2 else curve)
        left.plot(torch.arange(y.shape[-1]).numpy(), y.numpy(), label=label, linewidth=1)
    for m in marks:
        left.axvline(m, color="grey", linestyle=":", linewidth=0.8)
    left.set_yscale("symlog", linthresh=1.0)
    left.set_xlabel("distance n")
    left.set_ylabel("s[n], mean over heads")
    left.set_title("expected score by distance")
    left.legend(fontsize="small")
    for label, by_len in table.items():
        xs = [n for n, r in by_len.items() if r is not None]
        right.plot(xs, [by_len[n] for n in xs], marker="o", label=label)
    right.set_xscale("log", base=2)
    right.set_yscale("log")  # R spans decades (a flat curve gives 1/N^2); at most 1
    right.set_xlabel("length N")
    right.set_ylabel("R (mean over heads, log scale)")
    right.set_title("attention resolution")
    right.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    plots.save(fig, path)


def plot_empirical(doc: dict, path: str | Path) -> None:
    """Left: s_hat[n] (mean over heads) per layer at the longest length, training length marked.
    Right: R per layer (and the mean) across lengths."""
    rows = [r for r in doc["results"] if r.get("resolution") is not None]
    if not rows:
        raise ValueError("nothing to plot: no length could be measured")
    fig, (left, right) = plots.figure(panels=2)
    longest = max(rows, key=lambda r: r["length"])
    curve = longest["curve"]  # [L, H, N]
    for layer in range(curve.shape[0]):
        left.plot(plots.finite(curve[layer].mean(0)).numpy(), label=f"layer {layer}", linewidth=1)
    if doc.get("train_len"):
        left.axvline(doc["train_len"], color="grey", linestyle=":", linewidth=0.8)
    left.set_xlabel("distance n")
    left.set_ylabel("s_hat[n], mean over heads")
    left.set_title(f"empirical score by distance, length {longest['length']}")
    left.legend(fontsize="small")
    xs = [r["length"] for r in rows]
    for layer in range(len(rows[0]["per_layer"])):
        right.plot(xs, [r["per_layer"][layer] for r in rows], marker="o", linewidth=1, label=f"layer {layer}")
    right.plot(xs, [r["resolution"] for r in rows], marker="s", color="black", linewidth=2, label="mean")
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("length N")
    right.set_ylabel("R (mean over heads, log scale)")
    right.set_title("attention resolution per layer")
    right.legend(fontsize="small")
    fig.suptitle(f"{doc.get('label', '')}, pattern {doc.get('pattern', '')}")
    plots.save(fig, path)
