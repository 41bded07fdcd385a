"""The resolution instrument's three forms, each as a report (:mod:`lexkit.instruments.base`), a
:class:`~.rows.ResolutionReport`: its keys the JSON that ``--json`` writes, and ``view`` (no key), what the
terminal text and the figure read besides it (the curves of the figure, a model's layer types): analytic R of
scheme specs before any run; empirical R of a run on its validation text; both of a model with positions of
its own (an hf: model)."""

from __future__ import annotations

from ...core.specs import parse_lengths
from . import report
from .analytic import analytic as analytic_of
from .curves import analytic_curve, model_curve
from .document import to_json
from .empirical import empirical_run, resolution_lengths
from .rows import ResolutionReport

#: the analytic form's lengths when --lengths is left out
ANALYTIC_LENGTHS = "1024,2048"


def analytic(options, figure: bool = False) -> ResolutionReport:
    """R of each of ``options.schemes`` at ``options.lengths`` (default :data:`ANALYTIC_LENGTHS`); with
    ``figure``, each scheme's curve at the longest length for it (left out where undefined there)."""
    heads = 16 if options.heads is None else options.heads
    head_dim = 64 if options.head_dim is None else options.head_dim
    seed = 0 if options.seed is None else options.seed
    lengths = parse_lengths(options.lengths if options.lengths is not None else ANALYTIC_LENGTHS)
    extra = {"train_len": options.train_len, "logn": bool(options.logn)}
    docs = [analytic_of(spec, lengths, options.pattern, heads=heads, head_dim=head_dim, seed=seed, **extra)
            for spec in options.schemes]
    report.require_finite([r for d in docs for r in d["results"]], "check the scheme's parameters")
    curves = {}
    for doc in docs if figure else []:
        try:
            curves[doc["scheme"]] = analytic_curve(doc["scheme"], max(lengths), options.pattern, heads=heads,
                                                   head_dim=head_dim, seed=seed, **extra)
        except ValueError:
            pass  # undefined at this length (learned past its table): noted in the table
    return ResolutionReport(**report.analytic_document(docs, heads=heads, head_dim=head_dim, seed=seed),
                            view={"docs": docs, "lengths": lengths, "heads": heads, "head_dim": head_dim,
                                  "seed": seed, "curves": curves})


def empirical(subject, options, progress: bool) -> ResolutionReport:
    """R per layer of a run on its validation text (or ``options.data``)."""
    texts = 8 if options.texts is None else options.texts
    doc = empirical_run(subject, options.lengths, options.pattern, texts_per_length=texts,
                        batch_size=options.batch, progress=progress, data=options.data)
    report.require_finite(doc["results"], "the run's weights are damaged or its training diverged")
    return ResolutionReport(**to_json(doc), view={"doc": doc, "texts": texts})


def model(subject, options, progress: bool, figure: bool = False) -> ResolutionReport:
    """A model with its own positions: the analytic R from them, then (where its score hook runs) the
    empirical R per layer; on a model whose layers differ, per group of equal layers and per layer type.
    With ``figure`` and no empirical R to draw, the analytic curve at the longest length."""
    net = subject.model
    lengths = parse_lengths(options.lengths if options.lengths is not None else resolution_lengths(subject))
    analytic_doc = analytic_of(net, lengths, options.pattern)
    empirical_doc = None
    if net.hook_refusal() is None:
        texts = 8 if options.texts is None else options.texts
        empirical_doc = empirical_run(subject, lengths, options.pattern, texts_per_length=texts,
                                      batch_size=options.batch, progress=progress, data=options.data)
    curve = None
    if figure and (empirical_doc is None or all(r.get("resolution") is None for r in empirical_doc["results"])):
        curve = model_curve(net, max(lengths), options.pattern)
    types = report.layer_types(net)
    return ResolutionReport(**report.model_document(subject.source, analytic_doc, empirical_doc, types),
                            view={"analytic": analytic_doc, "empirical": empirical_doc, "curve": curve,
                                  "lengths": lengths, "data": options.data, "label": net.cfg.label,
                                  "source": subject.source, "describe": subject.describe(),
                                  "refusal": net.hook_refusal(), "types": types, "n_layers": net.cfg.n_layers})
