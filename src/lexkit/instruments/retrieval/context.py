"""The use of context: retrieval beside bpb, one configuration at every multiple of its training length
(:func:`context_rows`): exact match and answer bits of a grid (:mod:`.cells`) and the bpb of the same
model at each length, measured paired (:mod:`lexkit.instruments.evaluate.paired`), each multiple's ratio
to the first with its interval over documents; :func:`use_of_context` for several labelled runs. The
study's retrieval table reads it."""

from __future__ import annotations

from collections.abc import Sequence

from ... import tasks
from ..subject import Subject
from .cells import score, summary
from .grid import DEFAULT_DEPTHS, DEFAULT_MULTIPLES
from .rows import ContextRow, RetrievalCell


def context_rows(
    subject: Subject,
    label: str,
    *,
    task: str = "copy",
    multiples: Sequence[int] = DEFAULT_MULTIPLES,
    patterns: Sequence[str] = ("causal", "window", "bca"),
    depths: Sequence[float] = DEFAULT_DEPTHS,
    samples: int = 10,
    seed: int = 0,
    size: int | None = None,
    documents: Sequence[bytes] | None = None,
    bpb_multiples: Sequence[int] | None = None,
    max_docs: int | None = 4,
    train_len: int | None = None,
    decode: bool = True,
    progress: bool = False,
    format: str | None = None,
) -> tuple[list[ContextRow], list[RetrievalCell]]:
    """One configuration (a byte model's subject, shown as ``label``): exact match and answer
    bits at every multiple of its training length under every pattern, and beside each its bpb
    at that length where the multiple is in ``bpb_multiples`` (default: every multiple), measured
    paired (:mod:`lexkit.instruments.evaluate.paired`: the same bytes at every multiple, each window opening on a byte
    of
    its document, on ``documents``, default the subject's own validation documents, at most
    ``max_docs`` of them), with each multiple's ratio to the first and its interval over documents.
    Lengths are multiples of ``train_len`` (default: the subject's training length; a fine-tune's
    parent's, to line it up with its parent). Also the cells (depth by depth). ``format``: the
    needles' format (:func:`score`)."""
    from ..evaluate.measure import evaluate, paired_rows

    t = train_len or subject.train_len
    lengths = [t * m for m in multiples]
    docs = list(documents) if documents is not None else subject.documents()[0]
    cells = score(subject, task, lengths, depths=depths, samples=samples, patterns=patterns,
                  haystack=tasks.Haystack.from_documents(docs), seed=seed, size=size, decode=decode,
                  progress=progress, format=format)
    wanted = [t * m for m in (multiples if bpb_multiples is None else bpb_multiples)]
    bits, ratios = {}, {}
    if wanted:
        report = evaluate(subject.model, docs, wanted, list(patterns), max_docs=max_docs, train_len=t, start="text",
                          per_document=len(set(wanted)) > 1)
        bits = {(r["pattern"], r["length"]): r["bpb"] for r in report["results"]}
        if len(set(wanted)) > 1:
            ratios = {(p.pattern, p.longer): p for p in paired_rows(report)}
    rows = []
    for line in summary(cells):
        pair = ratios.get((line.pattern, line.length))
        rows.append(ContextRow(label, line.pattern, line.length // t, line.length, line.accuracy, line.low, line.high,
                               line.answer_bits, bits.get((line.pattern, line.length)),
                               *((pair.ratio, pair.low, pair.high, pair.documents) if pair else ())))
    return rows, cells


def use_of_context(targets: dict[str, str], **options) -> list[ContextRow]:
    """:func:`context_rows` for each labelled run (``{"rope+mix": "runs/rope-mix", ...}``; a run
    may be scored under another scheme with ``"runs/rope-mix@rope:scaling=yarn,factor=16"``)."""
    from ..subject import load

    rows: list[ContextRow] = []
    for label, target in targets.items():
        path, _, scheme = target.partition("@")
        rows += context_rows(load(path, scheme=scheme or None), label, **options)[0]
    return rows
