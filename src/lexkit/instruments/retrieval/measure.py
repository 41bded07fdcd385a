"""``lexkit retrieval``, end to end (the instrument's entry points): :func:`retrieval_run` checks every
option it can before the model loads (:func:`check_options`, :func:`.grid.check_grid`), loads a run or an
``hf:PATH`` model through the model seam (:mod:`lexkit.instruments.subject`), scores the grid (:mod:`.cells`)
and assembles its report (:func:`report`). The rooms it joins, one job each:

* :mod:`.grid`: the grid of documents (tasks, lengths, depths, formats; its checks);
* :mod:`.scoring`: scoring a model on documents (teacher-forced bits and argmax, greedy decoding);
* :mod:`.cells`: a grid's cells and their summary over depths;
* :mod:`.context`: retrieval beside bpb, paired (the study's use of context).
"""

from __future__ import annotations

from collections.abc import Sequence

from ... import tasks
from .. import identity
from .cells import score, summary
from .grid import DEFAULT_DEPTHS, check_grid, needle_lengths
from .rows import RetrievalCell, RetrievalReport

#: the report ``lexkit retrieval --json`` writes and its layout's version (:func:`lexkit.core.version.header`)
REPORT, REPORT_VERSION = "lexkit.retrieval", 3


def check_options(**options) -> None:
    """ValueError naming the flag of a setting out of range: ``options`` (:func:`retrieval_run`'s keywords) as
    :class:`lexkit.instruments.retrieval.RetrievalOptions`, checked as ``lexkit retrieval`` checks them."""
    from . import RetrievalOptions

    RetrievalOptions(**options).check()


def retrieval_run(
    target: str,
    task: str = "passkey",
    *,
    lengths: Sequence[int] | None = None,
    depths: Sequence[float] = DEFAULT_DEPTHS,
    samples: int = 10,
    size: int | None = None,
    seed: int = 0,
    patterns: Sequence[str] = ("causal",),
    data: str | None = None,
    scheme: str | None = None,
    logn: bool | None = None,
    rope_scaling: dict | str | None = None,
    cache: bool | None = None,
    kernel: str = "auto",
    device: str = "cpu",
    progress: bool = False,
    format: str | None = None,
    add: str | None = None,
) -> RetrievalReport:
    """``lexkit retrieval TARGET``: load a run directory or an ``hf:PATH`` model
    (:func:`lexkit.instruments.subject.load`), score ``task`` on the grid lengths x depths x patterns
    (:func:`score`; default lengths: the training length x 1-16, those that hold the needle) with
    haystacks from its documents (a run's own validation split, or ``data``) and return the
    report (:func:`report`). Every option that can be checked without the model is checked before
    it loads; an option the target cannot honour is a ValueError naming it. ``format``: the
    needles' format for a task that takes one (``copy``; :mod:`lexkit.tasks.needles`, trained or held
    out), so a run can be checked for the skill rather than its training format."""
    from ...layouts import check_pattern, check_scheme
    from ..subject import load, subject_class

    hf = str(target).startswith("hf:")
    kind_of = "standard" if hf else "bytes"
    check_options(lengths=lengths, samples=samples, size=size, seed=seed, kernel=kernel)
    check_grid(task, lengths or [], depths, samples, kind_of, size, format)
    task = tasks.canonical(task)
    for spec in patterns:
        check_pattern(spec)
    subject_class(target).refuse(scheme=scheme, logn=logn, rope_scaling=rope_scaling, add=add)
    if hf and cache:
        raise ValueError("--cache is for lexkit runs: a hf: model decodes without lexkit's KV cache")
    if scheme is not None:
        check_scheme(scheme)
    subject = load(target, device=device, scheme=scheme, logn=logn, rope_scaling=rope_scaling, add=add)
    if lengths is None:
        lengths = needle_lengths(subject, task, size, target, format)
    haystack = corpus = None
    if task == "copy" or kind_of == "bytes":
        docs, described = subject.documents(data)
        haystack, corpus = tasks.Haystack.from_documents(docs), described["spec"]
    rows = score(subject, task, lengths, depths=depths, samples=samples, patterns=patterns, haystack=haystack,
                 seed=seed, size=size, cache=cache, kernel=kernel, progress=progress, format=format)
    return report(target, subject.describe(), rows, task=task, style=kind_of, size=size, seed=seed,
                  haystack=corpus, samples=samples, lengths=lengths, depths=depths, format=format)


def report(target: str, info: dict, rows: Sequence[RetrievalCell], *, task: str, style: str, size: int | None,
           seed: int, haystack: str | None, samples: int, lengths: Sequence[int], depths: Sequence[float],
           format: str | None = None) -> RetrievalReport:
    """The report of ``lexkit retrieval`` (a :class:`~.rows.RetrievalReport`): the header
    (:func:`lexkit.core.version.header`), the subject's (``info``: what ran, :func:`lexkit.instruments.identity`;
    log-n, training length), the grid's settings (lengths, depths and patterns as scored, each once; lengths in
    ``unit``), every cell (:class:`~lexkit.instruments.retrieval.rows.RetrievalCell`) and the summary over depths
    (:class:`~lexkit.instruments.retrieval.rows.RetrievalSummary`)."""
    from ...core.version import header

    return RetrievalReport(
        **header(REPORT, REPORT_VERSION),
        target=target,
        **identity(info),
        logn=info.get("logn", False),
        train_len=info["train_len"],
        task=task,
        **({"format": format} if format is not None else {}),
        style=style,
        unit="bytes" if style == "bytes" else "tokens",
        size=size,
        seed=seed,
        haystack=haystack,
        samples=samples,
        lengths=list(dict.fromkeys(r.length for r in rows)) or list(lengths),
        depths=list(dict.fromkeys(r.depth for r in rows)) or list(depths),
        patterns=list(dict.fromkeys(r.pattern for r in rows)),
        rows=[r.to_json() for r in rows],
        summary=[s.to_json() for s in summary(rows)],
    )
