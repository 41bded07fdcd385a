"""The resolution command's report: its terminal tables (:func:`analytic_text`, :func:`empirical_text`,
:func:`model_text`) and its JSON documents (:func:`analytic_document`, :func:`model_document`), from what
:mod:`.analytic` and :mod:`.empirical` return; the numbers are written here, not in the command."""

from __future__ import annotations

import math

from ...core.notation import number
from ...documents.render import text_table
from .. import layout_lines
from .document import header, to_json


def measured(x: float | None) -> str:
    """A measured value (R, entropy) in a cell: 4 decimals, 3 significant digits below 1e-3, ``n/a``
    for None (:func:`lexkit.core.notation.number`)."""
    return number(x, digits=4, small=True)


def require_finite(results: list[dict], what: str) -> None:
    """A NaN or inf R means NaN/inf scores (damaged weights, or a scheme's values overflowing)."""
    for r in results:
        if r.get("resolution") is not None and not math.isfinite(r["resolution"]):
            raise ValueError(f"R of {r.get('scheme', what)} at length {r['length']} is {r['resolution']}: "
                             f"the attention scores are not finite ({what})")


# -- analytic: several schemes --------------------------------------------------------------------
def analytic_document(docs: list[dict], *, heads: int, head_dim: int, seed: int) -> dict:
    """The JSON of the analytic form: one document of several schemes' :func:`~.analytic.analytic`."""
    return {**header("analytic"),
            "scheme": docs[0]["scheme"] if len(docs) == 1 else [d["scheme"] for d in docs],
            "heads": heads, "head_dim": head_dim, "seed": seed, "pattern": docs[0]["pattern"],
            "results": [r for d in docs for r in d["results"]]}


def analytic_text(docs: list[dict], lengths: list[int], *, heads: int, head_dim: int, seed: int) -> str:
    """A row per scheme, a column per length; what could not be measured below."""
    lines = [f"attention resolution R, analytic: {heads} heads x {head_dim}, pattern {docs[0]['pattern']}, seed "
             f"{seed} (mean over heads; 0 <= R <= 1)"]
    rows = [["scheme"] + [str(n) for n in lengths]]
    notes = []
    for doc in docs:
        row = [doc["scheme"]]
        for r in doc["results"]:
            row.append(measured(r["resolution"]))
            if r.get("note"):
                notes.append(f"{doc['scheme']} at {r['length']}: {r['note']}")
        rows.append(row)
    lines += text_table(rows)
    return "\n".join(lines + [f"n/a: {note}" for note in notes])


# -- empirical: a run ----------------------------------------------------------------------------
def empirical_text(doc: dict, texts: int) -> str:
    """R per layer by length (and the mean), the entropy per layer, the texts each length read."""
    results = doc["results"]
    lines = [f"attention resolution R, empirical: {doc['run']} ({doc['label']}, trained at {doc['train_len']}), "
             f"pattern {doc['pattern']}, {texts} texts per length (mean over heads; 0 <= R <= 1)"]
    head = ["layer"] + [str(r["length"]) for r in results]
    for key, total, title in (("per_layer", "resolution", "R"), ("entropy_per_layer", "entropy", "entropy (nats)")):
        if title != "R":
            lines.append(f"\n{title}")
        rows = [head]
        for layer in range(doc["layers"]):
            rows.append([str(layer)] + [measured(r[key][layer] if r.get(key) else None) for r in results])
        rows.append(["mean"] + [measured(r[total]) for r in results])
        lines += text_table(rows)
    lines.append("texts: " + ", ".join(f"{r['length']}: {r['texts']}" for r in results))
    lines += [f"n/a at {r['length']}: {r['note']}" for r in results if r.get("note")]
    return "\n".join(lines)


# -- a model with its own positions (hf:PATH): analytic, then empirical ------------------------------
def layer_types(model) -> list[str] | None:
    """Each layer's type on a model whose layers differ (None: every layer alike)."""
    return model.cfg.layer_types if getattr(model.cfg, "layout", None) is not None else None


def per_type(types: list[str] | None, results: list[dict]) -> dict:
    """Empirical R per layer type (``types``: :func:`layer_types`): the mean over its layers, per length
    ({type: {length: R}}); none where every layer is alike."""
    if types is None:
        return {}
    out: dict[str, dict] = {}
    for kind in dict.fromkeys(types):
        members = [i for i, t in enumerate(types) if t == kind]
        out[kind] = {r["length"]: (sum(r["per_layer"][i] for i in members) / len(members) if r.get("per_layer")
                                   else None) for r in results}
    return out


def model_document(source: str, analytic: dict, empirical: dict | None, types: list[str] | None) -> dict:
    """The JSON of a model's report: its analytic document, and (where its score hook ran) the
    empirical one and the mean R per layer type (``types``: :func:`layer_types`)."""
    out = {**header("model", run=source), "analytic": analytic}
    if empirical is not None:
        out["empirical"] = to_json(empirical)
        out["per_type"] = per_type(types, empirical["results"])
    return out


def model_text(view: dict) -> str:
    """The analytic R (a row per group of equal layers), then R per layer (with its type where layers
    differ), the mean per layer type, the mean over layers and the entropy; what could not be measured.
    ``view``: the model form's (:func:`lexkit.instruments.resolution.forms.model`)."""
    analytic, empirical, lengths = view["analytic"], view["empirical"], view["lengths"]
    lines = [f"attention resolution R of {view['source']} ({view['label']}), pattern {analytic['pattern']} "
             "(mean over heads; 0 <= R <= 1)"]
    lines += layout_lines(view["describe"])
    groups = list(dict.fromkeys(r["scheme"] for r in analytic["results"]))
    rows = [["", *map(str, lengths)]]
    for label in groups:
        rows.append(["analytic" + (f" {label}" if len(groups) > 1 else "")]
                    + [measured(r["resolution"]) for r in analytic["results"] if r["scheme"] == label])
    if empirical is None:
        lines.append(f"empirical: n/a ({view['refusal']})")
    else:
        rows += _layer_rows(view["types"], view["n_layers"], empirical["results"])
    lines += text_table(rows)
    for doc in (analytic, empirical or {"results": []}):
        lines += [f"n/a at {r['length']}: {r['note']}" for r in doc["results"] if r.get("note")]
    if empirical is not None:
        counts = ", ".join(f"{r['length']}: {r['texts']} texts" for r in empirical["results"])
        lines.append(f"data {view['data'] or 'stdlib'}: {counts}")
    return "\n".join(lines)


def _layer_rows(types: list[str] | None, n_layers: int, results: list[dict]) -> list[list[str]]:
    rows = []
    for layer in range(n_layers):
        label = f"layer {layer}" + (f" {types[layer]}" if types else "")
        rows.append([label] + [measured(r["per_layer"][layer]) if r.get("per_layer") else "n/a" for r in results])
    for kind, by_length in per_type(types, results).items():
        rows.append([f"{kind} (mean)"] + [measured(by_length[r["length"]]) for r in results])
    rows.append(["empirical"] + [measured(r["resolution"]) for r in results])
    rows.append(["entropy (nats)"] + [measured(r.get("entropy")) for r in results])
    return rows
