"""A grid's cells: :func:`score` reads the documents of every (length, depth) of :mod:`.grid` under every
pattern and scores them (:mod:`.scoring`), one :class:`~.rows.RetrievalCell` each: ``samples`` documents,
their exact match with its 95 % Wilson score interval (:func:`lexkit.core.stats.wilson`), answer bits and,
for documents with distractors, the guessing baseline. Every pattern scores the same documents (paired).
:func:`summary` pools a pattern and length over every depth."""

from __future__ import annotations

from collections.abc import Sequence

from ... import tasks
from ...attention import Pattern
from ...core.device import eval_mode
from ...core.stats import wilson
from ..subject import Subject
from .grid import DEFAULT_DEPTHS, cell_documents, check_grid, listed, read_tokens, style, unique
from .rows import RetrievalCell, RetrievalSummary
from .scoring import answer_scores, exact_match, other_candidates


def score(
    subject: Subject,
    task: str,
    lengths: Sequence[int],
    *,
    depths: Sequence[float] = DEFAULT_DEPTHS,
    samples: int = 10,
    patterns: Sequence[str | Pattern] = ("causal",),
    haystack: tasks.Haystack | None = None,
    seed: int = 0,
    size: int | None = None,
    cache: bool | None = None,
    kernel: str = "auto",
    decode: bool = True,
    progress: bool = False,
    format: str | None = None,
) -> list[RetrievalCell]:
    """The grid length x depth x pattern for ``task`` (a task spec, its parameters after a colon:
    ``kvthread:hops=3``; evaluation split of the needles), its needles in ``format``
    (:mod:`lexkit.tasks.needles`) for a task that takes one (``copy``); lengths in the subject's unit
    (bytes; tokens for a tokenizer model, :func:`cell_documents`). A
    length, depth or pattern given twice (patterns compared once resolved: ``window`` is
    ``window:64`` on a run trained at 64) is scored once, with a warning.

    ``decode=False`` (byte models only) takes exact match from the teacher-forced pass that gives
    the answer bits: with one token per byte, greedy decoding reproduces the answer exactly when
    the argmax is right at every answer token given the right bytes before it (the first wrong
    argmax is where greedy decoding leaves the answer), so no decoding loop is needed."""
    from ...core.progress import bar

    kind = style(subject)
    if not decode and kind != "bytes":
        raise ValueError("exact match without decoding needs a byte model (one token per byte)")
    check_grid(task, lengths, depths, samples, kind, size, format)
    task = tasks.canonical(task)  # a row names the task as its identity does (kvthread:hops=2 is kvthread)
    lengths = unique("lengths", lengths, lengths)
    depths = unique("depths", depths, [float(d) for d in depths])
    resolved = [subject.model.pattern(p) for p in listed("patterns", patterns, "['causal', 'window']")]
    pats = unique("patterns", resolved, [p.spec for p in resolved])
    rows: list[RetrievalCell] = []
    with eval_mode(subject.model), \
            bar(len(lengths) * len(depths) * len(pats), f"retrieval {task}", enabled=progress, unit="cell") as b:
        for length in lengths:
            docs = [cell_documents(subject, task, length, depth, samples, haystack=haystack, seed=seed, size=size,
                                   format=format) for depth in depths]
            cells = {}
            for pat in pats:  # every depth of a length in one teacher-forced pass (batches of equal token counts)
                flat = [d for at in docs for d in at]
                scored = answer_scores(subject, flat, pat, kernel)
                others = None if decode else other_candidates(subject, flat, pat, kernel)
                for i, (depth, at) in enumerate(zip(depths, docs)):
                    part = slice(i * samples, (i + 1) * samples)
                    cells[depth, pat.spec] = _cell(subject, task, length, float(depth), at, pat, cache, kernel, decode,
                                                   scored[part], None if others is None else others[part])
                    b.advance(1, acc=cells[depth, pat.spec].accuracy)
            rows += [cells[depth, pat.spec] for depth in depths for pat in pats]
    return rows


def _cell(subject: Subject, task: str, length: int, depth: float, docs: list[tasks.Document], pat: Pattern,
          cache: bool | None, kernel: str, decode: bool, scored: list[tuple[float, bool]] | None = None,
          others: list[bool] | None = None) -> RetrievalCell:
    """One cell: exact match (greedy decoding, or the teacher-forced argmax) and answer bits
    (``scored``: the documents' :func:`answer_scores`, when already computed); for documents with
    distractors, the guessing baseline and how often the answer is some candidate (``others``: the
    teacher-forced :func:`other_candidates`, when not decoding)."""
    from ...attention.cache import use_cache

    scored = answer_scores(subject, docs, pat, kernel) if scored is None else scored
    bits = [x for x, _ in scored]
    cached = decode and use_cache(subject.model, kernel, cache, pat)
    if decode:
        produced = [exact_match(subject, d, pat, cached, kernel) for d in docs]
        right = [ok for ok, _ in produced]
        some = [out[: len(d.expected)] in d.candidates() for d, (_, out) in zip(docs, produced)]
    else:
        right = [ok for _, ok in scored]
        others = other_candidates(subject, docs, pat, kernel) if others is None else others
        some = [ok or other for ok, other in zip(right, others)]
    hits = sum(right)
    low, high = wilson(hits, len(docs))
    tokens = sum(read_tokens(subject, d.text) for d in docs) / len(docs)
    with_candidates = all(d.distractors for d in docs)
    guess = sum(tasks.guess_rate(d) for d in docs) / len(docs) if with_candidates else None
    return RetrievalCell(task, pat.spec, length, depth, len(docs), hits, hits / len(docs), low, high,
                         sum(bits) / len(bits), tasks.chance_bits(docs[0]), sum(d.distance for d in docs) / len(docs),
                         tokens, cached, decode, guess, sum(some) / len(docs) if with_candidates else None)


def summary(rows: Sequence[RetrievalCell]) -> list[RetrievalSummary]:
    """Accuracy per (pattern, length) over all depths: the lines of the accuracy-vs-length plot."""
    out: dict[tuple[str, int], list[RetrievalCell]] = {}
    for r in rows:
        out.setdefault((r.pattern, r.length), []).append(r)
    result = []
    for (pattern, length), cells in out.items():
        n = sum(c.samples for c in cells)
        k = sum(c.correct for c in cells)
        low, high = wilson(k, n)
        result.append(RetrievalSummary(pattern, length, n, k, k / n, low, high,
                                       sum(c.answer_bits * c.samples for c in cells) / n))
    return result
