"""Attention resolution's entry points: :func:`measure` (``lexkit.resolution(...)``: a scheme spec gives
the analytic document, a run, ``hf:PATH`` or a subject the empirical one) and :func:`check_options`, the
command's checks in the library. The rooms it joins, one job each:

* :mod:`.formula`: R(s) (Eq. 11) and the attention entropy;
* :mod:`.accumulator`: s_hat by distance, blockwise through the score hook;
* :mod:`.curves`: the analytic s[n] of a scheme, or of a loaded model's own positions;
* :mod:`.analytic`: the analytic R documents (a scheme at several lengths, a model per group of layers);
* :mod:`.empirical`: s_hat, R and entropy measured on a model, per layer and head, and a run's document;
* :mod:`.document`: every document's header and its JSON (no tensors).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from .analytic import analytic
from .empirical import empirical_run
from .rows import ResolutionReport


def check_options(lengths: Iterable[int] | str | None = None, **options: Any) -> None:
    """ValueError naming the flag of a setting out of range: ``lengths`` (each at most
    :data:`lexkit.core.checks.MAX_RESOLUTION_LENGTH`) and those keywords of :func:`analytic` and
    :func:`empirical_run` that are settings of :class:`lexkit.instruments.resolution.ResolutionOptions`
    (``texts_per_length`` its texts, ``batch_size`` its batch), checked by its :meth:`check`."""
    from . import ResolutionOptions

    names = {"texts_per_length": "texts", "batch_size": "batch"}
    fields = {field.name for field in dataclasses.fields(ResolutionOptions)}
    ResolutionOptions(lengths=lengths, **{names.get(key, key): value for key, value in options.items()
                                          if names.get(key, key) in fields and value is not None}).check()


def measure(target, lengths: Iterable[int] | str | None = None, pattern: str = "causal",
            **options) -> ResolutionReport:
    """Attention resolution of anything lexkit measures (``lexkit.resolution(...)`` calls it): a scheme
    spec or :class:`Scheme` gives the analytic document (:func:`analytic`, default lengths 1024
    and 2048); a run directory, ``hf:PATH`` or a loaded subject (:func:`lexkit.load`) the
    empirical one (:func:`empirical_run`). ``options`` go to that function, checked first as ``lexkit
    resolution`` checks them (:func:`check_options`: lengths at most 65,536, ...). The document is a
    :class:`~.rows.ResolutionReport` (an empirical one's rows keep their tensors; its ``to_json`` drops them)."""
    import os

    check_options(lengths, **options)
    named = isinstance(target, (str, os.PathLike)) and (str(target).startswith("hf:") or os.path.isdir(target))
    if named or hasattr(target, "documents"):
        return ResolutionReport(**empirical_run(target, lengths, pattern, **options))
    return ResolutionReport(**analytic(target, lengths if lengths is not None else [1024, 2048], pattern, **options))
