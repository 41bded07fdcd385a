"""The ``hf:PATH`` form of ``lexkit eval`` and ``lexkit resolution``: a Hugging Face causal LM
(``lexkit.hf``) in place of a run directory. Not a command of its own: ``eval`` and
``resolution`` add these flags and hand ``hf:`` arguments here. See ``docs/pretrained.md``.
"""

from __future__ import annotations

import sys

from .table import format_table, print_table


def is_hf(target: str | None) -> bool:
    return bool(target) and target.startswith("hf:")


def add_model_arguments(parser) -> None:
    """Flags that only an ``hf:PATH`` model reads (eval and resolution)."""
    group = parser.add_argument_group("Hugging Face models (hf:PATH; needs pip install 'lexkit[hf]')")
    group.add_argument("--rope-scaling", metavar="SPEC",
                       help="RoPE scaling through the model's config: TYPE:FACTOR (linear:2, dynamic:2, yarn:4), "
                       "TYPE:key=value,... or a JSON object")
    group.add_argument("--dtype", default=None, metavar="DTYPE", help="float32 (default), bfloat16 or float16")
    return group


def add_eval_arguments(parser) -> None:
    group = add_model_arguments(parser)
    group.add_argument("--max-tokens", type=int, metavar="N", help="score at most about N tokens per length")
    group.add_argument("--plot", metavar="FILE.png", help="bpb by length per pattern, and by position")




# -- eval -----------------------------------------------------------------------------------------
def run_eval(args, lengths, patterns, device: str) -> int:
    """``lexkit eval hf:PATH``: the table of bpb and token perplexity, loss by position."""
    from .. import checks, hf, plots
    from ..runs import atomic_write, write_json

    if args.max_bytes is not None:
        raise ValueError("--max-bytes is for byte models; an hf: model caps tokens with --max-tokens")
    if args.max_tokens is not None and args.max_tokens <= 0:
        raise ValueError(f"--max-tokens must be a positive integer, got {args.max_tokens}")
    checks.number("--max-tokens", args.max_tokens)
    if args.plot is not None:
        args.plot = checks.png_path("--plot", args.plot)
    report = hf.evaluate_path(
        args.run_dir, lengths=lengths, patterns=patterns, data=args.data, rope_scaling=args.rope_scaling,
        dtype=args.dtype or "float32", device=device, stride=args.stride, max_docs=args.max_docs,
        max_tokens=args.max_tokens, batch_size=args.batch_size, kernel=args.kernel,
        progress=args.progress and sys.stderr.isatty(),
    )
    # the files first: a reader that closes the pipe early (`| head`) must not lose them
    if args.json:
        write_json(args.json, report)
    if args.csv:
        import csv
        import io

        fields = ("length", "pattern", "stride", "bpb", "ppl", "tokens", "bytes", "unavailable")
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows({k: ("" if r.get(k) is None else r.get(k)) for k in fields} for r in report["results"])
        atomic_write(args.csv, buffer.getvalue())
    if args.plot:
        plots.eval_report(report, args.plot)
    print(format_eval(report))
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def format_eval(report: dict) -> str:
    """Header, then one table per measure (bpb, token perplexity; lengths as columns, one row
    per pattern), unavailable reasons, then bpb by position per pattern."""
    from .table import length_label

    data, train_len = report["data"], report["train_len"]
    lengths, patterns = report["lengths"], report["patterns"]
    cell = {(r["length"], r["pattern"]): r for r in report["results"]}
    lines = [
        f"model {report['run']}  {report['scheme']}  train_len {train_len}",
        f"data {data['spec']} ({data['split']}): {data['documents']} document{'' if data['documents'] == 1 else 's'} "
        f"x {data['tokens_per_document']:,} tokens ({data['bytes_scored']:,} bytes) scored per length"
        + (f"; sliding windows, stride {report['stride']}" if report.get("stride") else "; non-overlapping chunks"),
    ]
    notes: dict[str, list[int]] = {}
    for key, title, fmt in (("bpb", "bits per byte (lower is better)", "{:.4f}"),
                            ("ppl", "token perplexity (this tokenizer's; lower is better)", "{:.3f}")):
        rows = [["pattern"] + [length_label(n, train_len) for n in lengths]]
        for pat in patterns:
            row = [pat]
            for n in lengths:
                r = cell.get((n, pat))
                row.append("-" if r is None or r[key] is None else fmt.format(r[key]))
                if r is not None and r[key] is None:
                    notes.setdefault(r["unavailable"], []).append(n)
            rows.append(row)
        lines += ["", title] + format_table(rows)
    for reason, at in notes.items():
        lines.append(f"  - at {', '.join(map(str, sorted(set(at))))}: {reason}")
    lines.append("  (lengths in tokens; x = multiple of the training length)")
    for pat in patterns:
        buckets = {(b["from"], b["to"], b["length"]): b for b in report["by_position"] if b["pattern"] == pat}
        if not buckets:
            continue
        spans = sorted({(lo, hi) for lo, hi, _ in buckets})
        lines += ["", f"bits per byte by token position, pattern {pat} (* = beyond the training length)"]
        rows = [["positions"] + [str(n) for n in lengths]]
        for lo, hi in spans:
            label = (f"{lo}" if hi == lo + 1 else f"{lo}-{hi - 1}") + (" *" if train_len and lo >= train_len else "")
            cells = [buckets.get((lo, hi, n)) for n in lengths]
            rows.append([label] + [f"{b['bpb']:.4f}" if b else "" for b in cells])
        lines += format_table(rows)
    return "\n".join(lines)


# -- resolution -----------------------------------------------------------------------------------
def run_resolution(args) -> int:
    """``lexkit resolution hf:PATH``: analytic R from the config (RoPE theta, rotary dims,
    scaling; ALiBi slopes; the learned table), then empirical R and entropy per layer through the
    score hook on ``--data`` (stdlib's validation split by default)."""
    from .. import hf, plots
    from .. import resolution as res
    from ..evaluate import eval_documents
    from ..specs import parse_lengths
    from .resolution import write_output
    from .table import number

    extra = [flag for flag, value in (("--scheme", args.scheme), ("--heads", args.heads),
                                      ("--head-dim", args.head_dim), ("--seed", args.seed)) if value is not None]
    if extra:
        raise ValueError(f"{', '.join(extra)}: only for the analytic form without a model; the model fixes them")
    texts = 8 if args.texts is None else args.texts
    if texts <= 0 or args.batch <= 0:
        raise ValueError(f"--texts and --batch must be positive, got {texts} and {args.batch}")
    model = hf.load(args.run_dir, rope_scaling=args.rope_scaling, dtype=args.dtype or "float32")
    if args.lengths is not None:
        lengths = parse_lengths(args.lengths)
    elif model.cfg.train_len:
        lengths = [model.cfg.train_len, 2 * model.cfg.train_len]
    else:
        raise ValueError(f"{model.source}: the config gives no training length; pass --lengths")
    analytic = hf.analytic(model, lengths, args.pattern)
    print(f"attention resolution R of {model.source} ({model.cfg.scheme}), pattern {analytic['pattern']} "
          "(mean over heads; 0 <= R <= 1)")
    rows = [["", *map(str, lengths)], ["analytic"] + [number(r["resolution"]) for r in analytic["results"]]]
    out = {"analytic": analytic}
    empirical = None
    try:
        model.check(1, 0, "chunked", hooked=True)
    except ValueError as exc:
        print(f"empirical: n/a ({exc})")
    else:
        documents, _ = eval_documents(args.data or "stdlib")
        empirical = hf.empirical_run(model, documents, lengths, args.pattern, texts_per_length=texts,
                                     batch_size=args.batch, progress=sys.stderr.isatty())
        results = empirical["results"]
        for layer in range(model.cfg.n_layers):
            rows.append([f"layer {layer}"] + [number(r["per_layer"][layer]) if r.get("per_layer") else "n/a"
                                              for r in results])
        rows.append(["empirical"] + [number(r["resolution"]) for r in results])
        rows.append(["entropy (nats)"] + [number(r.get("entropy")) for r in results])
        out["empirical"] = res.to_json(empirical)
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
            longest = max(lengths)
            curve = hf.analytic_curve(model, longest, args.pattern)
            table = {model.cfg.scheme: {r["length"]: r["resolution"] for r in analytic["results"]}}
            plots.plot_analytic({model.cfg.scheme: curve}, table, args.plot, title=f"{model.source}, analytic")
        print(f"wrote {args.plot}")
    return 0
