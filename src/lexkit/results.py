"""Reading a study's ``results.json``: the queries the report's tables and figures share.

A study writes one JSON document (see :mod:`lexkit.study`); every number the report shows is
looked up here, so a table and the figure beside it can never disagree. A cell with several
seeds aggregates to the mean and the sample standard deviation; a cell nobody could compute
(``None``, NaN) is left out, and a cell with no value at all is ``(None, None)``.
"""

from __future__ import annotations

import math

from .rows import eval_rows


def aggregate(values: list) -> tuple[float | None, float | None]:
    """(mean, sample std) of the finite numbers in ``values``; std is None below two values."""
    vals = [v for v in values if v is not None and isinstance(v, (int, float)) and math.isfinite(v)]
    if not vals:
        return None, None
    mean = sum(vals) / len(vals)
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else None
    return mean, std


def schemes(results: dict) -> list[str]:
    """The schemes of the study, in the order it ran them."""
    return list(dict.fromkeys(r["scheme"] for r in results["runs"]))


def runs_of(results: dict, scheme: str) -> list[dict]:
    """Every seed's run of ``scheme``."""
    return [r for r in results["runs"] if r["scheme"] == scheme]


def evaluation(results: dict, scheme: str, pattern: str, length: int, key: str = "bpb"):
    """(mean, std) over seeds of one evaluation cell (``key``: ``bpb`` or ``ppl``), read as
    typed rows (:class:`lexkit.rows.EvalRow`)."""
    return aggregate([getattr(row, key) for run in runs_of(results, scheme) for row in eval_rows(run["eval"])
                      if row.pattern == pattern and row.length == length])


def empirical_resolution(results: dict, scheme: str, pattern: str, length: int):
    """(mean, std) over seeds of the empirical R (mean over heads, then layers)."""
    return aggregate([row.get("resolution") for run in runs_of(results, scheme) for row in run["resolution"]
                      if row["pattern"] == pattern and row["length"] == length])


def analytic_resolution(results: dict, scheme: str, pattern: str, length: int):
    """(R, None): the analytic R computed before training (one value, no seeds)."""
    for row in results["analytic"]:
        if row["scheme"] == scheme and row["pattern"] == pattern and row["length"] == length:
            return row["resolution"], None
    return None, None


def best_pattern(results: dict, scheme: str, length: int) -> str | None:
    """The pattern with the lowest mean bpb at ``length`` (None if the length was not run)."""
    if length not in results["lengths"]:
        return None
    scored = [(v, p) for p in results["patterns"] if (v := evaluation(results, scheme, p, length)[0]) is not None]
    return min(scored)[1] if scored else None


def by_position(results: dict, scheme: str, pattern: str, length: int) -> list[dict]:
    """Every seed's loss-by-position rows of one (scheme, pattern, length)."""
    return [r for run in runs_of(results, scheme) for r in run["eval"]["by_position"]
            if r["length"] == length and r["pattern"] == pattern]


def principles(results: dict) -> list[dict]:
    """Per scheme: order variance, translation change, extrapolation ratios (bpb at 4x and 16x
    over bpb at 1x, causal), the best pattern at 16x, and per pattern the bpb of positions past
    the training length minus that of the last bucket inside it, at the longest length."""
    t, lengths = results["train_len"], results["lengths"]
    out = []
    for scheme in schemes(results):
        runs = runs_of(results, scheme)
        one = evaluation(results, scheme, "causal", t)[0] if t in lengths else None

        def ratio(n: int, scheme: str = scheme, one: float | None = one):
            value = evaluation(results, scheme, "causal", n)[0] if n in lengths else None
            return value / one if value is not None and one else None

        falls = {}
        for pattern in results["patterns"]:
            inside, beyond = [], []
            for run in runs:
                rows = [r for r in run["eval"]["by_position"]
                        if r["length"] == max(lengths) and r["pattern"] == pattern]
                inside += [r["bpb"] for r in rows if not r["beyond_train"]][-1:]
                beyond += [r["bpb"] for r in rows if r["beyond_train"]]
            if inside and beyond:
                falls[pattern] = (aggregate(beyond)[0] or 0) - (aggregate(inside)[0] or 0)
        out.append({
            "scheme": scheme,
            "order_variance": aggregate([r["principles"].get("order_variance") for r in runs])[0],
            "translation": aggregate([r["principles"].get("translation") for r in runs])[0],
            "ratio_4x": ratio(4 * t), "ratio_16x": ratio(16 * t),
            "best_pattern_16x": best_pattern(results, scheme, 16 * t),
            "beyond_minus_inside": falls,
        })
    return out


# -- context extension --------------------------------------------------------------------------
def extension_rows(results: dict) -> list[dict]:
    """The context-extension configurations (empty when the study ran none): per (label,
    pattern), ``scheme``, ``logn``, ``finetune`` (its settings or None) and ``bpb``: length ->
    (mean, std) over seeds."""
    ext = results.get("extension") or {}
    keys = list(dict.fromkeys((r["label"], r["pattern"]) for r in ext.get("rows", [])))
    out = []
    for label, pattern in keys:
        rows = [r for r in ext["rows"] if r["label"] == label and r["pattern"] == pattern]
        bpb = {n: aggregate([x.get("bpb") for r in rows for x in r["results"] if x["length"] == n])
               for n in results["lengths"]}
        out.append({"label": label, "pattern": pattern, "scheme": rows[0]["scheme"], "logn": rows[0]["logn"],
                    "finetune": rows[0]["finetune"], "bpb": bpb})
    return out


def configurations(results: dict) -> list[dict]:
    """Every configuration the study measured, as ``{"name", "pattern", "finetuned", "bpb":
    {length: mean}}``: each (scheme, pattern) of the main grid, then each context-extension row."""
    out = [{"name": scheme, "pattern": pattern, "finetuned": False,
            "bpb": {n: evaluation(results, scheme, pattern, n)[0] for n in results["lengths"]}}
           for scheme in schemes(results) for pattern in results["patterns"]]
    out += [{"name": row["label"], "pattern": row["pattern"], "finetuned": row["finetune"] is not None,
             "bpb": {n: mean for n, (mean, _) in row["bpb"].items()}} for row in extension_rows(results)]
    return out


def _best(configs: list[dict], length: int) -> dict | None:
    scored = [(c["bpb"][length], i) for i, c in enumerate(configs) if c["bpb"].get(length) is not None]
    return {**configs[min(scored)[1]], "value": min(scored)[0]} if scored else None


def goal(results: dict) -> dict | None:
    """The lowest bpb at 16x the training length (the longest length if 16x was not run) over
    every configuration, against the best bpb any trained scheme reaches at 1x under any pattern
    (the main grid): ``margin`` = (best at 1x - best at 16x) / best at 1x, positive when the
    longer context is *used*. None when either length is missing."""
    t = results["train_len"]
    far = 16 * t if 16 * t in results["lengths"] else max(results["lengths"])
    if t not in results["lengths"] or far == t:
        return None
    every = configurations(results)
    one = _best([c for c in every if c["name"] in schemes(results)], t)
    best = _best(every, far)
    if one is None or best is None:
        return None
    return {"length": far, "best": best, "one_x": one, "margin": (one["value"] - best["value"]) / one["value"]}


# -- use of context (table G) -----------------------------------------------------------------
#: the goal: bpb at 16x within this fraction of the configuration's own bpb at 1x ...
FLAT = 0.03
#: ... and at least this exact match at 16x at every needle depth
RETRIEVES = 0.9


def retrieval_rows(results: dict) -> list[dict]:
    """Table G's configurations (empty when the study ran none), one per (label, pattern):
    ``kind`` (scheme, method, fine-tune), ``scheme``, ``run``, and by multiple of the training
    length: ``accuracy`` (exact match over every depth), ``low``/``high`` (its 95 % interval),
    ``answer_bits``, ``bpb`` (None where not measured) and ``worst_depth`` (the lowest exact
    match of any one depth)."""
    g = results.get("retrieval") or {}
    out = []
    for entry in g.get("configs", []):
        by = {r["multiple"]: r for r in entry["rows"]}
        depth: dict[int, list[float]] = {}
        for c in entry["cells"]:
            depth.setdefault(c["length"] // g["train_len"], []).append(c["accuracy"])
        out.append({"label": entry["label"], "pattern": entry["pattern"], "kind": entry["kind"],
                    "scheme": entry["scheme"], "run": entry["run"],
                    **{key: {m: r[key] for m, r in by.items()} for key in ("accuracy", "low", "high", "answer_bits",
                                                                             "bpb")},
                    "worst_depth": {m: min(v) for m, v in depth.items()}})
    return out


def stops_at(row: dict, level: float = RETRIEVES) -> int | None:
    """The first multiple of the training length at which ``row`` (of :func:`retrieval_rows`)
    retrieves below ``level`` over all depths (1 when it never retrieves); None when it keeps
    ``level`` at every multiple measured."""
    return next((m for m in sorted(row["accuracy"]) if row["accuracy"][m] < level), None)


def context_goal(results: dict) -> dict | None:
    """The stated goal of table G: a configuration whose bpb at the longest multiple (16x) is
    within :data:`FLAT` of its own bpb at 1x *and* whose exact match there is at least
    :data:`RETRIEVES` at every depth. Returns ``multiple``, ``scored`` (every configuration with
    ``ratio`` = bpb far / bpb 1x, ``flat``, ``worst`` = its lowest per-depth exact match far,
    ``met``), ``met`` (the labels that meet it), ``nearest`` (a configuration that meets it, else
    the flat configuration that retrieves best at every depth, else the flattest) and
    ``best_retrieval`` (the highest worst-depth exact match far, whatever its bpb) and
    ``longest_reach`` (the configuration whose ``reach``, the longest multiple up to which every
    depth keeps :data:`RETRIEVES`, is longest; None when none retrieves at 1x); None when the
    study ran no table G."""
    rows = retrieval_rows(results)
    if not rows:
        return None
    far = max(results["retrieval"]["multiples"])
    scored = []
    for row in rows:
        one, long = row["bpb"].get(1), row["bpb"].get(far)
        ratio = long / one if one and long is not None else None
        flat = ratio is not None and ratio <= 1 + FLAT
        worst = row["worst_depth"].get(far, 0.0)
        scored.append({**row, "ratio": ratio, "flat": flat, "worst": worst, "met": flat and worst >= RETRIEVES})

    def rank(r):  # better retrieval first, then flatter
        return (r["worst"], r["accuracy"].get(far, 0.0), -(r["ratio"] if r["ratio"] is not None else float("inf")))

    met = [r for r in scored if r["met"]]
    flat = [r for r in scored if r["flat"]]
    if met or flat:
        nearest = max(met or flat, key=rank)
    else:
        nearest = min((r for r in scored if r["ratio"] is not None), key=lambda r: r["ratio"], default=scored[0])
    for r in scored:  # the longest multiple up to which every depth keeps RETRIEVES
        held = [m for m in sorted(r["worst_depth"])]
        r["reach"] = next((held[i - 1] for i, m in enumerate(held) if r["worst_depth"][m] < RETRIEVES),
                          held[-1] if held else None) if held and r["worst_depth"][held[0]] >= RETRIEVES else None
    reaching = [r for r in scored if r["reach"] is not None]
    return {"multiple": far, "scored": scored, "met": [f"{r['label']} ({r['pattern']})" for r in met],
            "nearest": nearest, "best_retrieval": max(scored, key=rank),
            "longest_reach": max(reaching, key=lambda r: (r["reach"], r["accuracy"].get(r["reach"], 0)),
                                 default=None)}
