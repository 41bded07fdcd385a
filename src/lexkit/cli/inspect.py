"""``lexkit inspect TARGET``: instruments that tell retrieval failures apart (docs/inspect.md).

The byte table, of a run directory::

    lexkit inspect RUN [--top 10] [--all] [--steps N] [--data PATH] [--json F] [--csv F] [--plot F.png]

per byte value (and BOS): its count in the run's training corpus, the times training showed it
(the run's batches replayed from its seed, a --mix's task documents included), its embedding row
norm and its cosine to the mean row of the bytes training never showed (with an untied head, the
output rows too); the summary names the most collapsed seen bytes.

The needle mass, of a run or hf:PATH::

    lexkit inspect TARGET --needle-mass --task copy --format hex --lengths 64,256,1024 [--pattern causal]

per layer and length: the attention of the query that predicts the answer's first token, its mass
on the needle (head mean and best head), its entropy against ln(keys), and where the best head's
top key lies (on the needle, or how far from it): dilution or a wrong match. The report is built
by the library (:mod:`lexkit.diagnostics`); this module parses and prints.
"""

from __future__ import annotations

import argparse
import sys

from .. import checks, threads
from ..diagnostics import DEPTHS, SAMPLES, UNSEEN_BY
from ..notation import length_label, number, percent
from ..render import csv_text, text_table
from . import options
from .needle_options import NeedleDefaults, add_needle_options, given, needle_values

#: the byte table's flags: flag -> its argparse dest (the needle flags: lexkit.cli.needle_options)
BYTES_ONLY = {"--top": "top", "--all": "all", "--steps": "steps", "--unseen-by": "unseen_by"}
#: what --needle-mass scores when a needle flag is left out
NEEDLE_DEFAULTS = NeedleDefaults(task="copy", depths=DEPTHS, samples=SAMPLES)


def add_parser(sub):
    p = sub.add_parser("inspect", help="the byte table (counts, embedding norms, collapse) or the needle mass",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="TARGET", help="a run directory written by `lexkit train` (hf:PATH: "
                   "--needle-mass only)")
    p.add_argument("--needle-mass", action="store_true",
                   help="measure the attention at the answer on retrieval documents instead of the byte table")
    bytes_ = p.add_argument_group("the byte table")
    bytes_.add_argument("--top", type=int, metavar="N", help="the seen bytes of highest cosine printed (default 10)")
    bytes_.add_argument("--all", action="store_true", default=None, help="print every byte, not the top N")
    bytes_.add_argument("--steps", type=int, metavar="N",
                        help="replay only the first N training steps (default: every step the weights trained)")
    bytes_.add_argument("--unseen-by", choices=UNSEEN_BY,
                        help="unseen means absent from every replayed training window (training, the default) or "
                        "from the corpus's text (corpus: a --mix may show bytes the corpus never holds)")
    add_needle_options(p.add_argument_group("--needle-mass"), NEEDLE_DEFAULTS)
    p.add_argument("--data", metavar="SPEC",
                   help="byte table: the run's corpus at a new place; --needle-mass: the haystack's corpus "
                   "(default: the run's own)")
    p.add_argument("--add", metavar="[SELECTOR=]MODIFIER",
                   help="--needle-mass: measure the trained weights with stateless layer modifiers added, no "
                   "retraining (global=topk:4; as lexkit eval)")
    p.add_argument("--json", metavar="FILE", help="write the report (JSON)")
    p.add_argument("--csv", metavar="FILE", help="write one row per byte / per (pattern, length, layer) (CSV)")
    p.add_argument("--plot", metavar="FILE.png", help="byte table: cosine and norm against count; --needle-mass: "
                   "mass and entropy against length per layer")
    p.add_argument("--device", default="auto", metavar="DEVICE", help="auto, cpu, cuda or mps (default: auto)")
    p.add_argument("--threads", type=int, metavar="N", help=threads.HELP)
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return p


def run(args) -> int:
    from .. import diagnostics, plots

    wrong = given(args, BYTES_ONLY) if args.needle_mass else given(args)
    if wrong:
        raise ValueError(f"{wrong[0]} is for " + ("the byte table (without --needle-mass)" if args.needle_mass
                                                  else "--needle-mass"))
    progress = args.progress and sys.stderr.isatty()
    if args.needle_mass:
        values = needle_values(args, NEEDLE_DEFAULTS)
        options.check_outputs(args)
        report = diagnostics.needle_mass_run(args.target, values.pop("task"), **values, data=args.data,
                                             device=options.device(args), progress=progress, add=args.add)
        options.write_outputs(args, report, rows_csv, plots.needle_mass)
        print(format_mass(report))
    else:
        if args.add is not None:
            raise ValueError("--add applies to --needle-mass (the byte table reads the embedding, which no "
                             "modifier changes)")
        checks.number("--top", args.top)
        checks.number("--steps", args.steps)
        options.check_outputs(args)
        if str(args.target).startswith("hf:"):
            raise ValueError(f"{args.target}: the byte table is of a lexkit run (an hf: model's tokens are not "
                             "bytes); give --needle-mass to measure its attention")
        report = diagnostics.embedding_run(args.target, data=args.data, steps=args.steps,
                                           top=diagnostics.COLLAPSED if args.top is None else args.top,
                                           unseen_by=args.unseen_by or "training", progress=progress)
        options.write_outputs(args, report, rows_csv, plots.embedding)
        print(format_bytes(report, every=bool(args.all)))
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def rows_csv(report: dict) -> str:
    """The report's rows (bytes, or (pattern, length, layer)) as CSV: every field but the lists (the
    needle mass's per-head values; the JSON has them)."""
    rows = report["rows"]
    lists = {k for r in rows for k, v in r.items() if isinstance(v, list)}
    fields = [k for k in dict.fromkeys(k for r in rows for k in r) if k not in lists]
    return csv_text([{k: r.get(k) for k in fields} for r in rows], fields)


# -- the byte table ---------------------------------------------------------------------------------


def format_bytes(report: dict, every: bool = False) -> str:
    """Header, what was counted, the summary, then the table of the most collapsed seen bytes (every
    byte with ``every``)."""
    s, training, corpus = report["summary"], report["training"], report["corpus"]
    lines = [f"{report['run']}  scheme {report['scheme']}  train_len {report['train_len']}  "
             f"head {'tied' if report['tied'] else 'untied'}",
             f"corpus {corpus['spec']}: {corpus['documents']:,} training documents, {corpus['bytes']:,} bytes"
             + (" (differs from the run's)" if corpus.get("differs_from_run") else "")]
    if training is not None:
        lines.append(f"training replayed: {training['steps']:,} of {training['trained_steps']:,} steps x "
                     f"{training['batch']} windows of {training['length'] + 1} tokens"
                     + (f", mix {training['mix']}" if training["mix"] else "")
                     + (f"; {training['note']}" if training.get("note") else ""))
    else:
        lines.append("training not replayable (no checkpoint): unseen means absent from the corpus")
    shown = ", ".join(s["unseen_tokens"][:24]) + (", ..." if len(s["unseen_tokens"]) > 24 else "")
    where = "in no replayed training window" if s["unseen_by"] == "training windows" else "not in the corpus's text"
    lines.append(f"unseen ({where}): {s['unseen']} of {len(report['rows'])} tokens"
                 + (f" ({shown})" if s["unseen"] else ""))
    if s.get("in_corpus_never_trained"):
        lines.append(f"in the corpus but in no replayed window: {s['in_corpus_never_trained']}")
    count = "trained" if training is not None else "corpus"
    if s["rarest"]:
        lines.append(f"the seen tokens shown least often ({count}): "
                     + ", ".join(f"{r['label']} {r[count]:,}" for r in s["rarest"]))
    for prefix, what in (("", "embedding rows" if report["tied"] else "input rows"), ("out_", "output rows")):
        if f"{prefix}seen_cosine" in s:
            lines.append(f"{what}: mean cosine to the unseen mean {number(s[f'{prefix}seen_cosine'])} (seen), "
                         f"{number(s[f'{prefix}unseen_cohesion'])} (unseen)")
    if s["unseen"] == 0:
        lines.append("every token was shown: no unseen mean, no cosine"
                     + (" (--unseen-by corpus takes the tokens the corpus's text never holds)"
                        if s["unseen_by"] == "training windows" else ""))
    rows = report["rows"]
    if every:
        chosen = rows
        title = "every token"
    else:
        tops = {c["token"] for c in s.get("collapsed", [])}
        chosen = sorted((r for r in rows if r["token"] in tops), key=lambda r: -r["cosine"])
        title = "the seen tokens closest to the unseen mean (highest cosine)"
    if chosen:
        untied = "out_cosine" in rows[0]
        header = ["token", "byte", "corpus"] + (["trained"] if "trained" in rows[0] else []) \
            + (["mix"] if "mix" in rows[0] else []) + ["norm", "cosine"] + (["out norm", "out cos"] if untied else [])
        table = [header]
        for r in chosen:
            table.append([str(r["token"]), r["label"], f"{r['corpus']:,}"]
                         + ([f"{r['trained']:,}"] if "trained" in r else []) + ([f"{r['mix']:,}"] if "mix" in r else [])
                         + [number(r["norm"]), number(r["cosine"])]
                         + ([number(r["out_norm"]), number(r["out_cosine"])] if untied else []))
        lines += ["", title] + text_table(table, "rl" + "r" * (len(header) - 2))
    return "\n".join(lines)


# -- the needle mass --------------------------------------------------------------------------------
def format_mass(report: dict) -> str:
    """Header; per pattern, one line per (layer, length): mass (head mean, best head) beside what
    uniform attention gives, entropy (head mean, best head) beside ln(keys), and the best head's top
    key: on the needle how often, how far from it on average."""
    train_len = report["train_len"]
    documents = f"{report['samples']} document{'' if report['samples'] == 1 else 's'}"
    lines = [f"{report['target']}  scheme {report['scheme']}  train_len {train_len}",
             f"task {report['task']}" + (f", format {report['format']}" if report.get("format") else "")
             + f" ({report['style']} style), {documents} per length and depth at depths "
             + ",".join(f"{d:g}" for d in report["depths"]) + f"; the query that predicts the answer's first "
             f"token; lengths in {report['unit']}"]
    header = ["layer", "length", "keys", "needle", "uniform %", "mass %", "best %", "head", "ln keys", "entropy",
              "best H", "top on needle %", "top distance"]
    for pattern in report["patterns"]:
        table = [header]
        rows = sorted((r for r in report["rows"] if r["pattern"] == pattern), key=lambda r: (r["layer"], r["length"]))
        for r in rows:
            table.append([f"L{r['layer']} {r['kind']}", length_label(r["length"], train_len), f"{r['visible']:.0f}",
                          f"{r['needle']:.1f}", percent(r["uniform"]), percent(r["mass"]), percent(r["mass_max"]),
                          str(r["head"]), number(r["uniform_entropy"], digits=2), number(r["entropy"], digits=2),
                          number(r["head_entropy"], digits=2), percent(r["top_on_needle"]),
                          number(r["top_distance"], digits=1)])
        lines += ["", f"attention at the answer, {pattern}"] + text_table(table, "ll" + "r" * (len(header) - 2))
    lines += weight_notes(report["rows"])
    return "\n".join(lines)


#: what a layer's map is, said under the table where it is not a softmax (lexkit.diagnostics.weight_maps)
WEIGHT_NOTES = {
    "differential": "differential: one map per head pair, softmax1 - λ·softmax2 (mass can be negative, 'head' is the "
                    "pair, entropy over |map| / its sum)",
    "stick-breaking": "stick-breaking: weights that sum to at most 1 (entropy over them as they are, not a "
                      "distribution's; ln keys is not its bound)",
}


def weight_notes(rows: list[dict]) -> list[str]:
    """One line per kind of map that is not a softmax, naming its layers."""
    out = []
    for kind, note in WEIGHT_NOTES.items():
        layers = sorted({r["layer"] for r in rows if r.get("weights") == kind})
        if layers:
            out.append(f"  L{', L'.join(map(str, layers))} {note}")
    return out
