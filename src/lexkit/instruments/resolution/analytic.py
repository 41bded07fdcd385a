"""The analytic R documents: R of one scheme at several lengths (:func:`analytic`), of a loaded model's
own positions, per group of equal layers on a model whose layers differ (:func:`layer_groups`), one
:class:`~.rows.ResolutionRow` per length (:func:`analytic_rows`), from :mod:`.curves`' s[n] and
:mod:`.formula`'s R."""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from ...attention import Pattern, layer_patterns
from ...core.specs import parse_lengths
from ...positions import Scheme
from .curves import analytic_curve, check_logn, make_scheme, model_curve, pattern_of, refuse_cache_positions
from .document import header
from .formula import resolution
from .rows import ResolutionRow


def _named(cfg) -> dict:
    """What a loaded model's analytic document measured: its ``label`` (its layout as typed, an hf: model's
    description) and, where one scheme runs on every layer of a lexkit model, its ``scheme``."""
    one = getattr(cfg, "layout", None) is None and isinstance(getattr(cfg, "scheme", None), str)
    return {"label": cfg.label, **({"scheme": cfg.scheme} if one else {})}


def analytic(
    spec: str | Scheme | nn.Module,
    lengths: Iterable[int] | str,
    pattern: str | Pattern | None = None,
    *,
    heads: int = 16,
    head_dim: int = 64,
    seed: int = 0,
    max_len: int | None = None,
    train_len: int | None = None,
    logn: bool = False,
) -> dict:
    """Analytic R of one scheme at several lengths, as a JSON-ready document::

        {"report": "lexkit.resolution", "report_version": 3, "lexkit_version": ..., "source": "analytic",
         "scheme": SPEC, "heads": H,
         "head_dim": D, "seed": S, "results": [{"scheme", "length", "pattern", "resolution",
         "per_head": [H values], "per_layer": null, "entropy": null}, ...]}

    An absolute scheme that is undefined at a length (``learned`` past its table) gets
    ``"resolution": null`` and a ``"note"`` with the reason instead of stopping the others.
    ``train_len`` (the training length the scheme assumes: a scaled RoPE's ``original_len``,
    ReRoPE's ``w``, a pattern's W, log-n's L) and ``logn`` are recorded when given.

    ``spec`` may also be a loaded model (a :class:`lexkit.GPT`, or an ``hf:`` model whose
    positions are its own: :func:`model_curve`); then the document names it (``run``, its
    ``heads``, ``head_dim``, ``train_len``) and every length it cannot run gets a ``note``.
    """
    lengths = parse_lengths(lengths)
    if isinstance(spec, nn.Module):
        return _analytic_model(spec, lengths, pattern)
    check_logn(logn, train_len)
    scheme = make_scheme(spec, heads=heads, head_dim=head_dim, seed=seed, max_len=max_len, train_len=train_len)
    pat = pattern_of(pattern, train_len)
    refuse_cache_positions(scheme, pat, lengths[-1])
    doc = header("analytic", scheme=scheme.spec)
    doc.update(heads=scheme.n_heads, head_dim=scheme.head_dim, seed=seed, pattern=pat.spec)
    if train_len is not None or logn:
        doc.update(train_len=train_len, logn=logn)
    curve = lambda n: analytic_curve(scheme, n, pat, train_len=train_len, logn=logn)  # noqa: E731
    doc["results"] = analytic_rows(scheme.spec, lengths, pat, curve, raises=scheme.relative)
    return doc


def analytic_rows(label: str, lengths: list[int], pattern: Pattern, curve, *, raises: bool = False) -> list[dict]:
    """One :class:`~lexkit.instruments.resolution.rows.ResolutionRow` per length: R of ``curve(n)`` [H], or a ``note``
    where the curve raises ValueError (learned positions past their table) unless ``raises``."""
    out = []
    for n in lengths:
        try:
            r = resolution(curve(n))  # [H]
        except ValueError as exc:
            if raises:
                raise
            row = ResolutionRow(label, n, pattern.spec, None, None, None, None, note=str(exc))
        else:
            row = ResolutionRow(label, n, pattern.spec, float(r.mean()), [float(x) for x in r], None, None)
        out.append(row.to_json())
    return out


def _analytic_model(model: nn.Module, lengths: list[int], pattern: str | Pattern | None) -> dict:
    """The analytic document of a loaded model; a lexkit model with a layout gets one set of rows
    per group of layers that are the same (scheme, pattern under ``pattern``, temperature),
    labelled ``L0-2 rope@window:16``."""
    cfg = model.cfg
    pat = model.pattern(pattern or "causal")
    doc = header("analytic", **_named(cfg))
    doc.update(run=getattr(model, "source", None), heads=cfg.n_heads, head_dim=cfg.head_dim, pattern=pat.spec,
               train_len=cfg.train_len)
    if getattr(cfg, "layout", None) is None:
        doc["results"] = analytic_rows(cfg.label, lengths, pat, lambda n: model_curve(model, n, pat))
        return doc
    doc["results"] = []
    for label, first in layer_groups(model, pat):
        doc["results"] += analytic_rows(label, lengths, layer_patterns(pat, cfg.n_layers)[first],
                                        lambda n, i=first: model_curve(model, n, pat, layer=i))
    return doc


def layer_groups(model: nn.Module, pattern: Pattern) -> list[tuple[str, int]]:
    """(label, first layer) of each group of a lexkit model's layers that are the same under
    ``pattern``: scheme, pattern and temperature (``L0-2 rope@window:16``, ``L3 none@causal+logn``)."""
    patterns = layer_patterns(pattern, model.cfg.n_layers)
    groups: dict[tuple, list[int]] = {}
    for i, (layer, pat) in enumerate(zip(model.layers, patterns)):
        temperature = layer.temperature
        groups.setdefault((layer.scheme, pat.spec, temperature and temperature.spec), []).append(i)
    out = []
    for (scheme, pat, temp), members in groups.items():
        where = f"L{members[0]}" + (f"-{members[-1]}" if len(members) > 1 else "")
        if len(members) > 1 and members != list(range(members[0], members[-1] + 1)):
            where = ",".join(f"L{i}" for i in members)
        out.append((f"{where} {scheme}@{pat}" + (f"+{temp}" if temp else ""), members[0]))
    return out
