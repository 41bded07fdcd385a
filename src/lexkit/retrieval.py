"""Retrieval at distance: does a model *use* its context? Scoring of :mod:`lexkit.tasks` documents.

Two measures per document, both under an attention pattern:

* **exact match**: greedy decoding from the prompt (everything before the answer) reproduces the
  answer's bytes (a tokenizer model: its decoded text starts with them, LongLoRA's rule). A
  byte model decodes through its KV cache where the pattern allows it
  (:func:`lexkit.sample.use_cache`), token for token what the uncached decoding gives.
* **answer bits**: teacher-forced bits per answer byte, the negative log2-likelihood of the
  tokens that cover the answer divided by its bytes. Chance for a uniform guess is
  log2(alphabet) per byte (``tasks.chance_bits``); a model that copies scores near 0.

A cell (task, pattern, length, depth) holds ``samples`` documents; its accuracy carries a 95 %
Wilson score interval (:func:`wilson`). Every pattern scores the same documents (paired).

Models come through the model seam (:mod:`lexkit.subject`): ``lexkit.load(TARGET)`` for a run
or ``hf:PATH``, :meth:`lexkit.subject.RunSubject.of` for a byte model in memory. Scoring uses the
subject's model (logits under a pattern), ``encode`` (text -> tokens and the bytes each covers)
and ``continue_text`` (greedy decoding, through the KV cache where the pattern allows it).

Invariant (what a pattern can see): a needle whose value ends more than ``n_layers x (reach-1)``
tokens before the answer's first predicting position cannot change the answer's logits under
``window``/``bca`` (each layer moves information back by less than the pattern's reach), except
through the first K keys under ``sinks:W,K``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import torch
from torch import Tensor

from . import checks, render, tasks
from .attention import Pattern
from .device import eval_mode
from .rows import ContextRow, RetrievalCell, RetrievalSummary
from .stats import Z95, wilson  # noqa: F401 (the interval of every retrieval accuracy; re-exported)
from .subject import Subject

#: the needle-in-a-haystack depth grid: 0, 10, ..., 100 percent
DEFAULT_DEPTHS = tuple(float(d) for d in range(0, 101, 10))
#: the lengths retrieval is scored at by default, as multiples of the training length
DEFAULT_MULTIPLES = (1, 2, 4, 8, 16)


def style(subject: Subject) -> str:
    """The document style a subject reads: ``"bytes"`` (lexkit's byte models) or ``"standard"``
    (tokenizer models: the standard passkey prompt)."""
    return "bytes" if getattr(subject.model, "unit", "bytes") == "bytes" else "standard"


# -- measures -------------------------------------------------------------------------------------
def answer_tokens(nbytes: Tensor, start: int) -> Tensor:
    """Bool [T-1]: which of tokens 1.. cover some byte at or after byte ``start`` of the text."""
    ends = nbytes.cumsum(0)  # bytes of text covered up to and including each token
    return ends > start


@torch.no_grad()
def answer_scores(subject: Subject, docs: Sequence[tasks.Document], pattern: Pattern,
                  kernel: str = "auto") -> list[tuple[float, bool]]:
    """Per document, teacher-forced: (bits per answer byte, whether the argmax over text tokens
    is right at every answer token). Documents of one token count run in one batch."""
    encoded = [subject.encode(d.text) for d in docs]
    out: list[tuple[float, bool]] = [(0.0, False)] * len(docs)
    groups: dict[int, list[int]] = {}
    for i, (ids, _) in enumerate(encoded):
        groups.setdefault(ids.numel(), []).append(i)
    device = next(subject.model.parameters()).device
    top = getattr(subject, "text_tokens", None)
    for idx in groups.values():
        ids = torch.stack([encoded[i][0] for i in idx])  # [b, T]
        logits = subject.model(ids[:, :-1].to(device), pattern=pattern, kernel=kernel).double()  # [b, T-1, V]
        nll = -torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None].to(device))[..., 0].cpu()  # [b, T-1]
        right = (logits[..., :top].argmax(-1).cpu() == ids[:, 1:])  # [b, T-1]
        for row, i in enumerate(idx):
            doc = docs[i]
            take = answer_tokens(encoded[i][1], doc.answer[0])
            bits = float(nll[row][take].sum()) / math.log(2) / (doc.answer[1] - doc.answer[0])
            out[i] = (bits, bool(right[row][take].all()))
    return out


def answer_bits(subject: Subject, docs: Sequence[tasks.Document], pattern: Pattern,
                kernel: str = "auto") -> list[float]:
    """Teacher-forced bits per answer byte of each document (:func:`answer_scores`)."""
    return [bits for bits, _ in answer_scores(subject, docs, pattern, kernel)]


def exact_match(subject: Subject, doc: tasks.Document, pattern: Pattern, cache: bool | None = None,
                kernel: str = "auto") -> tuple[bool, bytes]:
    """Whether greedy decoding reproduces the answer, and the bytes it produced."""
    out = subject.continue_text(doc.prompt, len(doc.expected), pattern=pattern, cache=cache, kernel=kernel)
    return out[: len(doc.expected)] == doc.expected, out


def check_grid(task: str, lengths: Sequence[int], depths: Sequence[float], samples: int, style: str,
               size: int | None = None, format: str | None = None) -> None:
    """ValueError for an unknown task or needle format, a depth outside [0, 100], a length too
    short for the needle or a sample count that is not positive: before any model loads."""
    tasks.check_task(task)
    tasks.check_format(task, format)
    checks.number("--samples", samples)
    for depth in depths:
        tasks.check_depth(depth)
    need = tasks.minimum_length(task, style, size, format)
    for length in lengths:
        if length < need:
            raise ValueError(f"length {length} is shorter than the {task} needle and question ({need} bytes); "
                             f"use lengths of at least {need}")


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
    """The grid length x depth x pattern for ``task`` (evaluation split of the needles), its
    needles in ``format`` (:mod:`lexkit.needles`) for a task that takes one (``copy``).

    ``decode=False`` (byte models only) takes exact match from the teacher-forced pass that gives
    the answer bits: with one token per byte, greedy decoding reproduces the answer exactly when
    the argmax is right at every answer token given the right bytes before it (the first wrong
    argmax is where greedy decoding leaves the answer), so no decoding loop is needed."""
    from .progress import bar
    from .sample import use_cache

    kind = style(subject)
    if not decode and kind != "bytes":
        raise ValueError("exact match without decoding needs a byte model (one token per byte)")
    check_grid(task, lengths, depths, samples, kind, size, format)
    pats = [subject.model.pattern(p) for p in patterns]
    rows: list[RetrievalCell] = []
    with eval_mode(subject.model), \
            bar(len(lengths) * len(depths) * len(pats), f"retrieval {task}", enabled=progress, unit="cell") as b:
        for length in lengths:
            for depth in depths:
                docs = tasks.documents(task, length, depth, samples, haystack=haystack, seed=seed, style=kind,
                                       size=size, format=format)
                tokens = sum(subject.encode(d.text)[0].numel() for d in docs) / len(docs)
                for pat in pats:
                    scored = answer_scores(subject, docs, pat, kernel)
                    bits = [x for x, _ in scored]
                    cached = decode and use_cache(subject.model, kernel, cache, pat)
                    if decode:
                        hits = sum(exact_match(subject, d, pat, cached, kernel)[0] for d in docs)
                    else:
                        hits = sum(right for _, right in scored)
                    low, high = wilson(hits, len(docs))
                    rows.append(RetrievalCell(task, pat.spec, length, float(depth), len(docs), hits, hits / len(docs),
                                              low, high, sum(bits) / len(bits), tasks.chance_bits(docs[0]),
                                              sum(d.distance for d in docs) / len(docs), tokens, cached, decode))
                    b.advance(1, acc=hits / len(docs))
    return rows


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


# -- the study's "use of context" table ----------------------------------------------------------------
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
    at that length (:func:`lexkit.evaluate.evaluate` on ``documents``, default the subject's
    own validation documents; ``max_docs`` of them) where the multiple is in ``bpb_multiples``
    (default: every multiple). Lengths are multiples of ``train_len`` (default: the subject's
    training length; a fine-tune's parent's, to line it up with its parent). Also the cells
    (depth by depth). ``format``: the needles' format (:func:`score`)."""
    from .evaluate import evaluate

    t = train_len or subject.train_len
    lengths = [t * m for m in multiples]
    docs = list(documents) if documents is not None else subject.documents()[0]
    cells = score(subject, task, lengths, depths=depths, samples=samples, patterns=patterns,
                  haystack=tasks.Haystack.from_documents(docs), seed=seed, size=size, decode=decode,
                  progress=progress, format=format)
    wanted = [t * m for m in (multiples if bpb_multiples is None else bpb_multiples)]
    bits = {}
    if wanted:
        report = evaluate(subject.model, docs, wanted, list(patterns), max_docs=max_docs, train_len=t)
        bits = {(r["pattern"], r["length"]): r["bpb"] for r in report["results"]}
    rows = [ContextRow(label, line.pattern, line.length // t, line.length, line.accuracy, line.low, line.high,
                       line.answer_bits, bits.get((line.pattern, line.length))) for line in summary(cells)]
    return rows, cells


def use_of_context(targets: dict[str, str], **options) -> list[ContextRow]:
    """:func:`context_rows` for each labelled run (``{"rope+mix": "runs/rope-mix", ...}``; a run
    may be scored under another scheme with ``"runs/rope-mix@rope:scaling=yarn,factor=16"``)."""
    from .subject import load

    rows: list[ContextRow] = []
    for label, target in targets.items():
        path, _, scheme = target.partition("@")
        rows += context_rows(load(path, scheme=scheme or None), label, **options)[0]
    return rows


# -- lexkit retrieval, end to end ----------------------------------------------------------------------
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
) -> dict:
    """``lexkit retrieval TARGET``: load a run directory or an ``hf:PATH`` model
    (:func:`lexkit.subject.load`), score ``task`` on the grid lengths x depths x patterns
    (:func:`score`; default lengths: the training length x 1-16, those that hold the needle) with
    haystacks from its documents (a run's own validation split, or ``data``) and return the
    report (:func:`report`). Every option that can be checked without the model is checked before
    it loads; an option the target cannot honour is a ValueError naming it. ``format``: the
    needles' format for a task that takes one (``copy``; :mod:`lexkit.needles`, trained or held
    out), so a run can be checked for the skill rather than its training format."""
    from .layouts import check_pattern, check_scheme
    from .subject import kind, load

    hf = str(target).startswith("hf:")
    kind_of = "standard" if hf else "bytes"
    tasks.check_task(task)
    check_grid(task, lengths or [], depths, samples, kind_of, size, format)
    for spec in patterns:
        check_pattern(spec)
    kind(target).refuse(scheme=scheme, logn=logn, rope_scaling=rope_scaling)
    if hf and cache:
        raise ValueError("--cache is for lexkit runs: a hf: model decodes without lexkit's KV cache")
    if scheme is not None:
        check_scheme(scheme)
    subject = load(target, device=device, scheme=scheme, logn=logn, rope_scaling=rope_scaling)
    if lengths is None:
        lengths = needle_lengths(subject.train_len, task, kind_of, size, target, format)
    haystack = corpus = None
    if task == "copy" or kind_of == "bytes":
        docs, described = subject.documents(data)
        haystack, corpus = tasks.Haystack.from_documents(docs), described["spec"]
    rows = score(subject, task, lengths, depths=depths, samples=samples, patterns=patterns, haystack=haystack,
                 seed=seed, size=size, cache=cache, kernel=kernel, progress=progress, format=format)
    return report(target, subject.describe(), rows, task=task, style=kind_of, size=size, seed=seed,
                  haystack=corpus, samples=samples, lengths=lengths, depths=depths, format=format)


def needle_lengths(train_len: int | None, task: str, style: str, size: int | None, target: str,
                   format: str | None = None) -> list[int]:
    """The default lengths of ``lexkit retrieval``: the multiples of the training length
    (:data:`DEFAULT_MULTIPLES`) whose length holds the needle and question."""
    if not train_len:
        raise ValueError(f"{target} records no training length: give --lengths")
    need = tasks.minimum_length(task, style, size, format)
    lengths = [train_len * k for k in DEFAULT_MULTIPLES if train_len * k >= need]
    if not lengths:
        raise ValueError(f"the {task} needle and question need {need} bytes, more than "
                         f"{DEFAULT_MULTIPLES[-1]}x the training length {train_len}: give --lengths")
    return lengths


def report(target: str, info: dict, rows: Sequence[RetrievalCell], *, task: str, style: str, size: int | None,
           seed: int, haystack: str | None, samples: int, lengths: Sequence[int], depths: Sequence[float],
           format: str | None = None) -> dict:
    """The JSON document of ``lexkit retrieval``: the lexkit version, the subject's header (``info``:
    its scheme, the scheme it trained with when another was given, log-n, training length), the
    grid's settings, every cell (:class:`~lexkit.rows.RetrievalCell`) and the summary over depths
    (:class:`~lexkit.rows.RetrievalSummary`)."""
    from .version import __version__

    return {
        "version": __version__,
        "target": target,
        "scheme": info["scheme"],
        **({"trained_scheme": info["trained_scheme"]} if "trained_scheme" in info else {}),
        "logn": info.get("logn", False),
        "train_len": info["train_len"],
        "task": task,
        **({"format": format} if format is not None else {}),
        "style": style,
        "size": size,
        "seed": seed,
        "haystack": haystack,
        "samples": samples,
        "lengths": list(lengths),
        "depths": list(depths),
        "patterns": list(dict.fromkeys(r.pattern for r in rows)),
        "rows": [r.to_json() for r in rows],
        "summary": [s.to_json() for s in summary(rows)],
    }


def csv_text(report: dict) -> str:
    """The CSV of a report: one line per cell, the fields of :class:`~lexkit.rows.RetrievalCell`."""
    return render.csv_text(report["rows"], [f.name for f in dataclasses.fields(RetrievalCell)])
