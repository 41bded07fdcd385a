"""Attention resolution as an instrument (:mod:`lexkit.instruments.base`; ``lexkit resolution``): its three
forms (:mod:`.forms`) over :mod:`.measure`, its :mod:`.report` and :mod:`.figures`. ``lexkit.resolution`` is
its measure under the name users import, callable."""

from __future__ import annotations

import dataclasses

from ..base import ON_CPU, Context, Instrument, register
from . import figures, forms, report


@dataclasses.dataclass(frozen=True)
class ResolutionOptions:
    """``lexkit resolution``'s settings (its help says what each means); ``schemes`` the --scheme specs."""

    schemes: tuple[str, ...] = ()
    heads: int | None = None
    head_dim: int | None = None
    seed: int | None = None
    lengths: str | None = None
    pattern: str = "causal"
    train_len: int | None = None
    logn: bool | None = None
    texts: int | None = None
    batch: int = 1
    data: str | None = None
    rope_scaling: str | None = None
    dtype: str | None = None


@register
class Resolution(Instrument):
    """Attention resolution R: analytic from scheme specs (target None), empirical of a run, both of an hf: model."""

    name, command, Options = "resolution", "resolution", ResolutionOptions
    summary = "attention resolution R: analytic from --scheme, or empirical from a RUN_DIR"
    #: the command names the --json file it wrote after its text (as it always has)
    names_json = True

    def measure(self, target, options: ResolutionOptions, context: Context = ON_CPU) -> dict:
        if target is None:
            return forms.analytic(options, context.figures)
        from ..subject import load

        scheme = options.schemes[0] if options.schemes else None
        subject = target if hasattr(target, "model") else load(
            target, scheme=scheme, logn=options.logn, rope_scaling=options.rope_scaling, dtype=options.dtype)
        if subject.model.unit == "tokens":  # its own positions: the analytic R too
            return forms.model(subject, options, context.progress, context.figures)
        return forms.empirical(subject, options, context.progress)

    def document(self, report_: dict) -> dict:
        return report_["document"]

    def text(self, report_: dict, options: ResolutionOptions) -> str:
        view = report_["view"]
        if report_["form"] == "analytic":
            return report.analytic_text(view["docs"], view["lengths"], heads=view["heads"], head_dim=view["head_dim"],
                                        seed=view["seed"])
        if report_["form"] == "empirical":
            return report.empirical_text(view["doc"], view["texts"])
        return report.model_text(view)

    def figures(self, report_: dict, path: str) -> None:
        view = report_["view"]
        if report_["form"] == "analytic":
            lengths = view["lengths"]
            table = {d["scheme"]: {r["length"]: r["resolution"] for r in d["results"]} for d in view["docs"]}
            figures.plot_analytic(view["curves"], table, path, marks=sorted(set(lengths) - {max(lengths)}),
                                  title=f"analytic, {view['heads']} heads x {view['head_dim']}, pattern "
                                  f"{view['docs'][0]['pattern']}")
        elif report_["form"] == "empirical":
            figures.plot_empirical(view["doc"], path)
        elif view["curve"] is None:
            figures.plot_empirical(view["empirical"], path)
        else:
            table = {view["label"]: {r["length"]: r["resolution"] for r in view["analytic"]["results"]}}
            figures.plot_analytic({view["label"]: view["curve"]}, table, path, title=f"{view['source']}, analytic")
