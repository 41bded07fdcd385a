"""Attention resolution as an instrument (:mod:`lexkit.instruments.base`; ``lexkit resolution``): its three
forms (:mod:`.forms`) over the measure's rooms, one job each (:mod:`.formula`: R and the entropy;
:mod:`.accumulator`: s_hat by distance, blockwise; :mod:`.curves`: the analytic s[n] of a scheme or of a
model's own positions; :mod:`.analytic` and :mod:`.empirical`: the analytic and the empirical documents;
:mod:`.document`: their header and JSON), joined by :mod:`.measure` (``lexkit.resolution(...)``), its
:mod:`.report` and :mod:`.figures`. ``lexkit.resolution`` is its measure under the name users import,
callable."""

from __future__ import annotations

import dataclasses

from ...attention import pattern_help
from ...core import checks
from ...core import options as declared
from ...core.options import setting
from ...core.specs import parse_lengths
from ..base import ON_CPU, Context, Instrument, register
from ..evaluate import DTYPE, ROPE_SCALING
from . import figures, forms
from . import report as reports
from .forms import ANALYTIC_LENGTHS
from .rows import ResolutionReport

#: heads x head dimension of the analytic form, and --texts/--batch: at most this (memory)
MAX_WIDTH = 4096


@dataclasses.dataclass(frozen=True)
class ResolutionOptions:
    """``lexkit resolution``'s settings; each field is a flag (:mod:`lexkit.core.options`), checked by :meth:`check`
    there and by ``lexkit.resolution(...)`` (:func:`.measure.measure`); ``schemes`` the --scheme specs."""

    schemes: tuple[str, ...] = setting((), "position scheme spec (analytic form); repeatable", flag="--scheme",
                                       metavar="SPEC")
    heads: int | None = setting(None, "heads (analytic; default 16)", type=int, maximum=MAX_WIDTH)
    head_dim: int | None = setting(None, "head dimension (analytic; default 64)", type=int, maximum=MAX_WIDTH)
    seed: int | None = setting(None, "seed of learnable initial values (analytic; default 0)", type=int, minimum=0,
                               maximum=2**63 - 1)
    lengths: list[int] | None = setting(
        None, f"lengths (default: analytic {ANALYTIC_LENGTHS}; empirical the training length and twice it)",
        metavar="N,N,...", parse=parse_lengths, check=declared.bounded_lengths(checks.MAX_RESOLUTION_LENGTH))
    pattern: str = setting("causal", lambda: pattern_help(
        default="causal", selectors=True, extra="analytic needs W; a run defaults W to its training length"),
        metavar="SPEC")
    train_len: int | None = setting(
        None, "analytic: the training length the schemes assume (a scaled RoPE's original_len, ReRoPE's w, a "
        "pattern's W, log-n's L)", type=int, metavar="L", maximum=checks.MAX_TRAIN_LEN)
    logn: bool | None = setting(None, "log-n attention scaling (analytic: needs --train-len; empirical: overrides "
                                "the run's)", type=bool)
    texts: int | None = setting(None, "validation texts per length (empirical; default 8)", type=int,
                                maximum=MAX_WIDTH)
    batch: int = setting(1, "texts per forward pass (empirical; default 1)", maximum=MAX_WIDTH)
    data: str | None = setting(None, "text for the empirical R (default: a run's validation split; an hf: model: "
                               "stdlib's)", type=str, metavar="SPEC")
    rope_scaling: str | dict | None = dataclasses.field(default=None, metadata=ROPE_SCALING)
    dtype: str | None = dataclasses.field(default=None, metadata=DTYPE)

    def check(self) -> ResolutionOptions:
        """ValueError naming the flag of the first setting out of range (lengths at most
        :data:`lexkit.core.checks.MAX_RESOLUTION_LENGTH`, heads, head dim, texts and batch at most
        :data:`MAX_WIDTH`, the seed, the training length)."""
        declared.check(self)
        return self

    def check_analytic(self) -> None:
        """What the analytic form needs (scheme specs; no --texts) and bounds (heads x head dim)."""
        if not self.schemes:
            raise ValueError("give a RUN_DIR (empirical) or at least one --scheme SPEC (analytic)")
        if self.texts is not None:
            raise ValueError("--texts is for the empirical form (lexkit resolution RUN_DIR)")
        heads = 16 if self.heads is None else self.heads
        head_dim = 64 if self.head_dim is None else self.head_dim
        if heads * head_dim > MAX_WIDTH:
            raise ValueError(f"--heads {heads} x --head-dim {head_dim} = {heads * head_dim}: at most {MAX_WIDTH} "
                             "(memory)")


@register
class Resolution(Instrument):
    """Attention resolution R: analytic from scheme specs (target None), empirical of a run, both of an hf: model."""

    name, command, Options, Report = "resolution", "resolution", ResolutionOptions, ResolutionReport
    summary = "attention resolution R: analytic from --scheme, or empirical from a RUN_DIR"
    #: the command names the --json file it wrote after its text (as it always has)
    names_json = True

    def measure(self, target, options: ResolutionOptions, context: Context = ON_CPU) -> ResolutionReport:
        options.check()
        if target is None:
            return forms.analytic(options, context.figures)
        from ..subject import load

        scheme = options.schemes[0] if options.schemes else None
        subject = target if hasattr(target, "model") else load(
            target, scheme=scheme, logn=options.logn, rope_scaling=options.rope_scaling, dtype=options.dtype)
        if subject.model.unit == "tokens":  # its own positions: the analytic R too
            return forms.model(subject, options, context.progress, context.figures)
        return forms.empirical(subject, options, context.progress)

    def text(self, report: ResolutionReport, options: ResolutionOptions) -> str:
        view = report.view
        if report.source == "analytic":
            return reports.analytic_text(view["docs"], view["lengths"], heads=view["heads"], head_dim=view["head_dim"],
                                        seed=view["seed"])
        if report.source == "empirical":
            return reports.empirical_text(view["doc"], view["texts"])
        return reports.model_text(view)

    def figures(self, report: ResolutionReport, path: str) -> None:
        view = report.view
        if report.source == "analytic":
            lengths = view["lengths"]
            table = {d["scheme"]: {r["length"]: r["resolution"] for r in d["results"]} for d in view["docs"]}
            figures.plot_analytic(view["curves"], table, path, marks=sorted(set(lengths) - {max(lengths)}),
                                  title=f"analytic, {view['heads']} heads x {view['head_dim']}, pattern "
                                  f"{view['docs'][0]['pattern']}")
        elif report.source == "empirical":
            figures.plot_empirical(view["doc"], path)
        elif view["curve"] is None:
            figures.plot_empirical(view["empirical"], path)
        else:
            table = {view["label"]: {r["length"]: r["resolution"] for r in view["analytic"]["results"]}}
            figures.plot_analytic({view["label"]: view["curve"]}, table, path, title=f"{view['source']}, analytic")
