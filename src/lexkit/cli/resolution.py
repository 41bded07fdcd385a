"""``lexkit resolution``: attention resolution R, analytic (before a run) or empirical (of a run).

Analytic, no training::

    lexkit resolution --scheme rope --scheme xpos --scheme alibi --lengths 1024,2048 [--pattern bca:1024]

Empirical, on a trained run's validation text::

    lexkit resolution RUN_DIR [--lengths 128,256,1024] [--pattern window] [--texts 8]

Both, of a Hugging Face causal LM (its own positions from its config, then the score hook on text)::

    lexkit resolution hf:PATH [--rope-scaling yarn:4] [--data stdlib]

R is per head, averaged over heads (and, empirically, over layers); 0 <= R <= 1.
See ``docs/resolution.md``.
"""

from __future__ import annotations

import argparse
import math
import sys

from .. import checks, plots
from .. import resolution as res
from ..notation import number
from ..runs import write_json
from ..specs import parse_lengths
from .eval import add_hf_arguments, layout_lines
from .table import print_table

ANALYTIC_LENGTHS = "1024,2048"


def add_parser(sub):
    p = sub.add_parser(
        "resolution",
        help="attention resolution R: analytic from --scheme, or empirical from a RUN_DIR",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", nargs="?", metavar="RUN_DIR",
                   help="a training run (empirical form), or hf:PATH (a Hugging Face causal LM: both forms)")
    p.add_argument("--scheme", action="append", metavar="SPEC",
                   help="position scheme spec (analytic form); repeatable")
    p.add_argument("--heads", type=int, default=None, help="heads (analytic; default 16)")
    p.add_argument("--head-dim", type=int, default=None, help="head dimension (analytic; default 64)")
    p.add_argument("--seed", type=int, default=None, help="seed of learnable initial values (analytic; default 0)")
    p.add_argument("--lengths", default=None, metavar="N,N,...",
                   help=f"lengths (default: analytic {ANALYTIC_LENGTHS}; empirical the training length and twice it)")
    p.add_argument("--pattern", default="causal", metavar="SPEC",
                   help="attention pattern: causal, window:W, bca:W (analytic needs W; a run defaults W to its "
                        "training length)")
    p.add_argument("--train-len", type=int, default=None, metavar="L",
                   help="analytic: the training length the schemes assume (a scaled RoPE's original_len, "
                   "ReRoPE's w, a pattern's W, log-n's L)")
    p.add_argument("--logn", action=argparse.BooleanOptionalAction, default=None,
                   help="log-n attention scaling (analytic: needs --train-len; empirical: overrides the run's)")
    p.add_argument("--texts", type=int, default=None, help="validation texts per length (empirical; default 8)")
    p.add_argument("--batch", type=int, default=1, help="texts per forward pass (empirical; default 1)")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="write a figure (s[n] by distance, R by length)")
    p.add_argument("--data", metavar="SPEC",
                   help="text for the empirical R (default: a run's validation split; an hf: model: stdlib's)")
    add_hf_arguments(p.add_argument_group("Hugging Face models (hf:PATH; needs pip install 'lexkit[hf]')"))
    return p


def run(args) -> int:
    # outputs and numbers are checked before any work
    if args.json is not None:
        checks.writable("--json", args.json)
    if args.plot is not None:
        args.plot = checks.png_path("--plot", args.plot)
    for flag, value in (("--heads", args.heads), ("--head-dim", args.head_dim), ("--texts", args.texts),
                        ("--batch", args.batch)):
        checks.number(flag, value, maximum=MAX_WIDTH)
    checks.number("--seed", args.seed, maximum=2**63 - 1, strict=False)
    if args.lengths is not None:
        checks.lengths("--lengths", parse_lengths(args.lengths), checks.MAX_RESOLUTION_LENGTH)
    if args.run_dir is None:
        for flag in ("rope_scaling", "dtype", "data"):
            if getattr(args, flag) is not None:
                raise ValueError(f"--{flag.replace('_', '-')} needs a model (RUN_DIR or hf:PATH)")
        return _analytic(args)
    from ..subject import kind, load

    scheme = args.scheme[0] if args.scheme else None
    kind(args.run_dir).refuse(heads=args.heads, head_dim=args.head_dim, seed=args.seed, train_len=args.train_len,
                              scheme=scheme, logn=args.logn, rope_scaling=args.rope_scaling, dtype=args.dtype)
    if args.scheme and len(args.scheme) > 1:
        raise ValueError("with a RUN_DIR, --scheme SPEC (once) measures the run under that scheme")
    subject = load(args.run_dir, scheme=scheme, logn=args.logn, rope_scaling=args.rope_scaling, dtype=args.dtype)
    if subject.model.unit == "tokens":  # its own positions: the analytic R too
        return _model(args, subject)
    return _empirical(args, subject)


#: heads x head dimension of the analytic form, and --texts/--batch: at most this (memory)
MAX_WIDTH = 4096


def measured(x: float | None) -> str:
    """A measured value (R, entropy) in a cell: 4 decimals, 3 significant digits below 1e-3, ``n/a``
    for None (:func:`lexkit.notation.number`)."""
    return number(x, digits=4, small=True)


def _require_finite(results: list[dict], what: str) -> None:
    """A NaN or inf R means NaN/inf scores (damaged weights, or a scheme's values overflowing)."""
    for r in results:
        if r.get("resolution") is not None and not math.isfinite(r["resolution"]):
            raise ValueError(f"R of {r.get('scheme', what)} at length {r['length']} is {r['resolution']}: "
                             f"the attention scores are not finite ({what})")


# -- analytic -----------------------------------------------------------------------------------
def _analytic(args) -> int:
    if not args.scheme:
        raise ValueError("give a RUN_DIR (empirical) or at least one --scheme SPEC (analytic)")
    if args.texts is not None:
        raise ValueError("--texts is for the empirical form (lexkit resolution RUN_DIR)")
    heads = 16 if args.heads is None else args.heads
    head_dim = 64 if args.head_dim is None else args.head_dim
    seed = 0 if args.seed is None else args.seed
    if heads * head_dim > MAX_WIDTH:
        raise ValueError(f"--heads {heads} x --head-dim {head_dim} = {heads * head_dim}: at most {MAX_WIDTH} (memory)")
    lengths = parse_lengths(args.lengths if args.lengths is not None else ANALYTIC_LENGTHS)
    checks.number("--train-len", args.train_len, maximum=checks.MAX_TRAIN_LEN)
    extra = {"train_len": args.train_len, "logn": bool(args.logn)}
    docs = [res.analytic(spec, lengths, args.pattern, heads=heads, head_dim=head_dim, seed=seed, **extra)
            for spec in args.scheme]
    pattern = docs[0]["pattern"]
    _require_finite([r for d in docs for r in d["results"]], "check the scheme's parameters")

    print(f"attention resolution R, analytic: {heads} heads x {head_dim}, pattern {pattern}, seed {seed} "
          "(mean over heads; 0 <= R <= 1)")
    rows = [["scheme"] + [str(n) for n in lengths]]
    notes = []
    for doc in docs:
        row = [doc["scheme"]]
        for r in doc["results"]:
            row.append(measured(r["resolution"]))
            if r.get("note"):
                notes.append(f"{doc['scheme']} at {r['length']}: {r['note']}")
        rows.append(row)
    print_table(rows)
    for note in notes:
        print(f"n/a: {note}")

    if args.json:
        out = {
            **res.header("analytic", None), "source": "analytic",
            "scheme": docs[0]["scheme"] if len(docs) == 1 else [d["scheme"] for d in docs],
            "heads": heads, "head_dim": head_dim, "seed": seed, "pattern": pattern,
            "results": [r for d in docs for r in d["results"]],
        }
        write_output(args.json, out)
    if args.plot:
        longest = max(lengths)
        curves = {}
        for doc in docs:
            try:
                curves[doc["scheme"]] = res.analytic_curve(doc["scheme"], longest, args.pattern,
                                                           heads=heads, head_dim=head_dim, seed=seed, **extra)
            except ValueError:
                pass  # undefined at this length (learned past its table): noted in the table
        table = {d["scheme"]: {r["length"]: r["resolution"] for r in d["results"]} for d in docs}
        plots.plot_analytic(curves, table, args.plot, marks=sorted(set(lengths) - {longest}),
                          title=f"analytic, {heads} heads x {head_dim}, pattern {pattern}")
        print(f"wrote {args.plot}")
    return 0


# -- empirical ----------------------------------------------------------------------------------
def _empirical(args, subject) -> int:
    texts = 8 if args.texts is None else args.texts
    doc = res.empirical_run(subject, args.lengths, args.pattern, texts_per_length=texts, batch_size=args.batch,
                            progress=sys.stderr.isatty(), data=args.data)
    results = doc["results"]
    _require_finite(results, "the run's weights are damaged or its training diverged")
    print(f"attention resolution R, empirical: {doc['run']} ({doc['scheme']}, trained at {doc['train_len']}), "
          f"pattern {doc['pattern']}, {texts} texts per length (mean over heads; 0 <= R <= 1)")
    head = ["layer"] + [str(r["length"]) for r in results]
    for key, total, title in (("per_layer", "resolution", "R"), ("entropy_per_layer", "entropy", "entropy (nats)")):
        if title != "R":
            print(f"\n{title}")
        rows = [head]
        for layer in range(doc["layers"]):
            rows.append([str(layer)] + [measured(r[key][layer] if r.get(key) else None) for r in results])
        rows.append(["mean"] + [measured(r[total]) for r in results])
        print_table(rows)
    print("texts: " + ", ".join(f"{r['length']}: {r['texts']}" for r in results))
    for r in results:
        if r.get("note"):
            print(f"n/a at {r['length']}: {r['note']}")
    if args.json:
        write_output(args.json, res.to_json(doc))
    if args.plot:
        plots.plot_empirical(doc, args.plot)
        print(f"wrote {args.plot}")
    return 0


# -- a model with its own positions (hf:PATH): analytic, then empirical ----------------------------
def _model(args, subject) -> int:
    """The analytic R from the model's own positions (RoPE theta, rotary dims, scaling; ALiBi
    slopes; the learned table), then empirical R and entropy per layer through the score hook; on a
    model whose layers differ, analytic rows per group of equal layers and empirical means per
    layer type."""
    model = subject.model
    lengths = parse_lengths(args.lengths if args.lengths is not None else res.resolution_lengths(subject))
    analytic = res.analytic(model, lengths, args.pattern)
    print(f"attention resolution R of {subject.source} ({model.cfg.scheme}), pattern {analytic['pattern']} "
          "(mean over heads; 0 <= R <= 1)")
    for line in layout_lines(subject.describe()):
        print(line)
    groups = list(dict.fromkeys(r["scheme"] for r in analytic["results"]))
    rows = [["", *map(str, lengths)]]
    for label in groups:
        rows.append(["analytic" + (f" {label}" if len(groups) > 1 else "")]
                    + [measured(r["resolution"]) for r in analytic["results"] if r["scheme"] == label])
    out = {**res.header("model", subject.source), "analytic": analytic}
    empirical = None
    if model.hook_refusal() is not None:
        print(f"empirical: n/a ({model.hook_refusal()})")
    else:
        texts = 8 if args.texts is None else args.texts
        empirical = res.empirical_run(subject, lengths, args.pattern, texts_per_length=texts, batch_size=args.batch,
                                      progress=sys.stderr.isatty(), data=args.data)
        rows += _layer_rows(model, empirical["results"])
        out["empirical"] = res.to_json(empirical)
        out["per_type"] = _per_type(model, empirical["results"])
    print_table(rows)
    for doc in (analytic, empirical or {"results": []}):
        for r in doc["results"]:
            if r.get("note"):
                print(f"n/a at {r['length']}: {r['note']}")
    if empirical is not None:
        counts = ", ".join(f"{r['length']}: {r['texts']} texts" for r in empirical["results"])
        print(f"data {args.data or 'stdlib'}: {counts}")
    if args.json:
        write_output(args.json, out)
    if args.plot:
        if empirical is not None and any(r.get("resolution") is not None for r in empirical["results"]):
            plots.plot_empirical(empirical, args.plot)
        else:
            curve = res.model_curve(model, max(lengths), args.pattern)
            table = {model.cfg.scheme: {r["length"]: r["resolution"] for r in analytic["results"]}}
            plots.plot_analytic({model.cfg.scheme: curve}, table, args.plot, title=f"{subject.source}, analytic")
        print(f"wrote {args.plot}")
    return 0


def _types(model) -> list[str] | None:
    """Each layer's type on a model whose layers differ (None: every layer alike)."""
    return model.cfg.layer_types if getattr(model.cfg, "layout", None) is not None else None


def _per_type(model, results: list[dict]) -> dict:
    """Empirical R per layer type: the mean over its layers, per length ({type: {length: R}})."""
    types = _types(model)
    if types is None:
        return {}
    out: dict[str, dict] = {}
    for kind in dict.fromkeys(types):
        members = [i for i, t in enumerate(types) if t == kind]
        out[kind] = {r["length"]: (sum(r["per_layer"][i] for i in members) / len(members) if r.get("per_layer")
                                   else None) for r in results}
    return out


def _layer_rows(model, results: list[dict]) -> list[list[str]]:
    """Table rows: R per layer (with its type where layers differ), the mean per layer type, the
    mean over layers and the entropy."""
    types = _types(model)
    rows = []
    for layer in range(model.cfg.n_layers):
        label = f"layer {layer}" + (f" {types[layer]}" if types else "")
        rows.append([label] + [measured(r["per_layer"][layer]) if r.get("per_layer") else "n/a" for r in results])
    for kind, by_length in _per_type(model, results).items():
        rows.append([f"{kind} (mean)"] + [measured(by_length[r["length"]]) for r in results])
    rows.append(["empirical"] + [measured(r["resolution"]) for r in results])
    rows.append(["entropy (nats)"] + [measured(r.get("entropy")) for r in results])
    return rows


# -- output -------------------------------------------------------------------------------------
def write_output(path: str, obj: dict) -> None:
    """``--json``: strict JSON, atomically, like every JSON lexkit writes; says where."""
    write_json(checks.writable("--json", path), obj)
    print(f"wrote {path}")
