"""Retrieval at distance: does a model *use* its context? Scoring of :mod:`lexkit.tasks` documents.

Two measures per document, both under an attention pattern:

* **exact match**: greedy decoding from the prompt (everything before the answer) reproduces the
  answer's bytes (a tokenizer model: its decoded text starts with them, LongLoRA's rule). A
  byte model decodes through its KV cache where the pattern allows it
  (:func:`lexkit.attention.cache.use_cache`), token for token what the uncached decoding gives.
* **answer bits**: teacher-forced bits per answer byte, the negative log2-likelihood of the
  tokens that cover the answer divided by its bytes. Chance for a uniform guess is
  log2(alphabet) per byte (``tasks.chance_bits``); a model that copies scores near 0.

A cell (task, pattern, length, depth) holds ``samples`` documents; its accuracy carries a 95 %
Wilson score interval (:func:`wilson`). Every pattern scores the same documents (paired).

Models come through the model seam (:mod:`lexkit.instruments.subject`): ``lexkit.load(TARGET)`` for a run
or ``hf:PATH``, :meth:`lexkit.instruments.subject.RunSubject.of` for a byte model in memory. Scoring uses the
subject's model (logits under a pattern), ``encode`` (text -> tokens and the bytes each covers)
and ``continue_text`` (greedy decoding, through the KV cache where the pattern allows it).

Invariant (what a pattern can see): a needle whose value ends more than ``n_layers x (reach-1)``
tokens before the answer's first predicting position cannot change the answer's logits under
``window``/``bca`` (each layer moves information back by less than the pattern's reach), except
through the first K keys under ``sinks:W,K``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor

from ... import tasks
from ...attention import Pattern
from ...core import checks
from ...core.device import eval_mode
from ...core.stats import Z95, wilson  # noqa: F401 (the interval of every retrieval accuracy; re-exported)
from .. import identity
from ..subject import Subject
from .rows import ContextRow, RetrievalCell, RetrievalSummary

#: the needle-in-a-haystack depth grid: 0, 10, ..., 100 percent
DEFAULT_DEPTHS = tuple(float(d) for d in range(0, 101, 10))
#: the lengths retrieval is scored at by default, as multiples of the training length
DEFAULT_MULTIPLES = (1, 2, 4, 8, 16)

#: the report ``lexkit retrieval --json`` writes and its layout's version (:func:`lexkit.core.version.header`)
REPORT, REPORT_VERSION = "lexkit.retrieval", 3


def unit(subject: Subject) -> str:
    """What a length counts for this subject: ``"bytes"`` (byte models) or ``"tokens"``."""
    return getattr(subject.model, "unit", "bytes")


def style(subject: Subject) -> str:
    """The document style a subject reads: ``"bytes"`` (lexkit's byte models) or ``"standard"``
    (tokenizer models: the standard passkey prompt)."""
    return "bytes" if unit(subject) == "bytes" else "standard"


# -- measures -------------------------------------------------------------------------------------
def answer_tokens(nbytes: Tensor, start: int) -> Tensor:
    """Bool [T-1]: which of tokens 1.. cover some byte at or after byte ``start`` of the text."""
    ends = nbytes.cumsum(0)  # bytes of text covered up to and including each token
    return ends > start


#: bytes of float32 logits one teacher-forced batch may hold (:func:`rows_per_batch`)
BATCH_BYTES = 256 << 20
LOGIT_BYTES = 4  # float32; the float64 log-softmax is taken at the answer's tokens only
UNKNOWN_VOCAB = 1 << 18  # a model whose config gives no vocab_size is budgeted as if it had this many
#: bytes of one layer's float32 attention scores, [b, heads, n, n] and the copies computed from them,
#: one teacher-forced batch may hold: a global layer runs the dense kernel at any length
SCORE_BYTES = 1 << 30
#: the [b, heads, n, n] float32 tensors one attention step keeps at once: stick-breaking's log space
#: (scores, log sigma, log(1 - sigma), the reversed cumulative sum and its flips, the weights) is the most;
#: a 1,024-byte scoring of 100 needles held 13.6 GB with the logits' budget alone, and the kernel killed it
SCORE_COPIES = 8


def rows_per_batch(tokens: int, vocab: int, budget: int | None = None, heads: int = 0,
                   score_budget: int | None = None) -> int:
    """Documents the model reads ``tokens`` tokens of that one teacher-forced batch holds: as many
    as keep its logits (``tokens x vocab`` float32 each) within ``budget`` bytes (default
    :data:`BATCH_BYTES`) and one layer's attention scores (:data:`SCORE_COPIES` x ``heads x tokens x
    tokens`` float32 each) within ``score_budget`` (default :data:`SCORE_BYTES`), and at least one. So
    memory is bounded whatever ``--samples`` asks (one batch per cell held 4.5 MB per 1,024-byte document
    in float64, ~36 GB for 1,000 documents of 8,192)."""
    budget = BATCH_BYTES if budget is None else budget
    score_budget = SCORE_BYTES if score_budget is None else score_budget
    rows = budget // (max(1, tokens) * max(1, vocab) * LOGIT_BYTES)
    if heads > 0:
        rows = min(rows, score_budget // (SCORE_COPIES * heads * max(1, tokens) ** 2 * 4))
    return max(1, rows)


@torch.no_grad()
def answer_scores(subject: Subject, docs: Sequence[tasks.Document], pattern: Pattern,
                  kernel: str = "auto") -> list[tuple[float, bool]]:
    """Per document, teacher-forced: (bits per answer byte, whether the argmax over text tokens
    is right at every answer token). Documents of one token count run together, in batches of
    at most :func:`rows_per_batch` documents."""
    encoded = [subject.encode(d.text) for d in docs]
    out: list[tuple[float, bool]] = [(0.0, False)] * len(docs)
    groups: dict[int, list[int]] = {}
    for i, (ids, _) in enumerate(encoded):
        groups.setdefault(ids.numel(), []).append(i)
    device = next(subject.model.parameters()).device
    top = getattr(subject, "text_tokens", None)
    vocab = getattr(subject.model.cfg, "vocab_size", None) or UNKNOWN_VOCAB
    heads = getattr(subject.model.cfg, "n_heads", None) or 0  # a lexkit GPT's and HFModel's config both say
    for n, members in groups.items():
        size = rows_per_batch(n - 1, vocab, heads=heads)  # the model reads n - 1 tokens of each
        for start in range(0, len(members), size):
            idx = members[start : start + size]
            ids = torch.stack([encoded[i][0] for i in idx])  # [b, T]
            logits = subject.model(ids[:, :-1].to(device), pattern=pattern, kernel=kernel)  # [b, T-1, V]
            for row, i in enumerate(idx):
                out[i] = _answer_score(logits[row], ids[row, 1:], encoded[i][1], docs[i], top)
    return out


def _answer_score(logits: Tensor, targets: Tensor, nbytes: Tensor, doc: tasks.Document,
                  top: int | None) -> tuple[float, bool]:
    """(bits per answer byte, argmax right at every answer token) of one document: logits
    [T-1, V] float32, targets [T-1]; the log-softmax in float64 at the answer's tokens only."""
    take = answer_tokens(nbytes, doc.answer[0]).to(logits.device)  # [T-1]
    picked = logits[take].double()  # [a, V]
    nll = -torch.log_softmax(picked, dim=-1).gather(-1, targets.to(logits.device)[take, None])[:, 0]  # [a]
    right = picked[:, :top].argmax(-1).cpu() == targets[take.cpu()]
    return float(nll.sum()) / math.log(2) / (doc.answer[1] - doc.answer[0]), bool(right.all())


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
    """ValueError for an unknown task or needle format (or a format given to a task that takes
    none), a depth outside [0, 100], a length that is not a positive integer or too short for the
    needle, a sample count or size that is not a positive integer, or a list given as one value:
    before any model loads. Lengths of the ``standard`` style (tokenizer models) count tokens,
    checked against the needle once the tokenizer is loaded (:func:`cell_documents`)."""
    tasks.check_task(task)
    tasks.check_scored(task)
    tasks.check_format(task, format)
    checks.number("--samples", samples)
    checks.number("--size", size)
    for depth in _listed("depths", depths, "[0, 50, 100]"):
        tasks.check_depth(depth)
    for length in _listed("lengths", lengths, "[64, 128]"):
        checks.number("lengths", length, maximum=checks.MAX_EVAL_LENGTH)
    need = tasks.minimum_length(task, style, size, format)
    for length in lengths if style == "bytes" else ():
        if length < need:
            raise ValueError(f"length {length} is shorter than the {task} needle and question ({need} bytes); "
                             f"use lengths of at least {need}")


def check_options(**options) -> None:
    """ValueError naming the flag of a setting out of range: ``options`` (:func:`retrieval_run`'s keywords) as
    :class:`lexkit.instruments.retrieval.RetrievalOptions`, checked as ``lexkit retrieval`` checks them."""
    from . import RetrievalOptions

    RetrievalOptions(**options).check()


def _listed(name: str, values, example: str) -> list:
    """``values`` as a list; ValueError for one value (a string is one pattern, not a list of letters)."""
    if isinstance(values, (str, bytes, Pattern)) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a list, e.g. {name}={example}, not {values!r}")
    return list(values)


def unique(name: str, values: Sequence, keys: Sequence) -> list:
    """``values`` without those whose key an earlier one has (a depth given twice; ``window`` and
    ``window:64`` on a run trained at 64), with one warning naming what was dropped: each is
    scored once, never pooled twice."""
    seen: dict = {}
    for value, key in zip(values, keys):
        seen.setdefault(key, value)
    if len(seen) < len(values):
        twice = sorted({str(k) for k in keys if list(keys).count(k) > 1})
        warnings.warn(f"{name}: {', '.join(twice)} given more than once (after resolving): scored once each",
                      RuntimeWarning, stacklevel=3)
    return list(seen.values())


def read_tokens(subject: Subject, text: bytes) -> int:
    """The tokens a model reads for a document: its encoding (BOS first) but the last token.
    A byte model reads as many as the document has bytes."""
    return subject.encode(text)[0].numel() - 1


def minimum_length(subject: Subject, task: str, size: int | None = None, format: str | None = None) -> int:
    """The shortest length of a ``task`` document in the subject's unit: bytes, or the tokens a
    tokenizer model reads of the shortest document (of one key: another may take a token or two
    more, which :func:`cell_documents` checks per document)."""
    kind = style(subject)
    need = tasks.minimum_length(task, kind, size, format)
    if kind == "bytes":
        return need
    return read_tokens(subject, tasks.make(task, need, 0.0, haystack=tasks.Haystack(b"x"), style=kind, size=size,
                                           format=format).text)


def cell_documents(subject: Subject, task: str, length: int, depth: float, count: int, *,
                   haystack: tasks.Haystack | None, seed: int = 0, size: int | None = None,
                   format: str | None = None) -> list[tasks.Document]:
    """``count`` documents of one cell, ``length`` in the subject's unit: bytes for a byte model;
    for a tokenizer model the longest document (in bytes) whose tokens the model reads are at
    most ``length``, so that lengths mean tokens as in ``lexkit eval hf:`` (found by bisection
    over the byte length: the count lands on ``length`` or just below). ``format``: the needles'
    format (:mod:`lexkit.tasks.needles`) for a task that takes one."""
    kind = style(subject)
    if kind == "bytes":
        return tasks.documents(task, length, depth, count, haystack=haystack, seed=seed, style=kind, size=size,
                               format=format)
    return [_token_document(subject, task, length, depth, i, haystack, seed, size, format) for i in range(count)]


def _token_document(subject: Subject, task: str, length: int, depth: float, index: int,
                    haystack: tasks.Haystack | None, seed: int, size: int | None,
                    format: str | None = None) -> tasks.Document:
    def make(n: int) -> tasks.Document:
        return tasks.make(task, n, depth, haystack=haystack, seed=seed, index=index, style="standard", size=size,
                          format=format)

    def count(n: int) -> int:
        return read_tokens(subject, make(n).text)

    low = tasks.minimum_length(task, "standard", size, format)
    shortest = count(low)
    if shortest > length:
        raise ValueError(f"length {length} is shorter than the {task} needle and question ({shortest} tokens); "
                         f"use lengths of at least {shortest}")
    high = max(low + 1, int(length * low / max(1, shortest) * 1.1))  # bytes per token of the shortest, 10 % over
    while count(high) <= length:  # invariant below: count(low) <= length < count(high)
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if count(mid) <= length else (low, mid)
    return make(low)


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
    resolved = [subject.model.pattern(p) for p in _listed("patterns", patterns, "['causal', 'window']")]
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


def other_candidates(subject: Subject, docs: Sequence[tasks.Document], pattern: Pattern,
                     kernel: str = "auto") -> list[bool]:
    """Per document, teacher-forced: whether the model's answer is one of its *other* candidates
    (:meth:`lexkit.tasks.Document.candidates` but the answer): the argmax right at every answer token
    with that candidate in the answer's place, which is when greedy decoding would produce it (a
    byte model). False for a document without other candidates; one pass over every candidate."""
    alternatives = [(i, doc.with_answer(c)) for i, doc in enumerate(docs) for c in doc.candidates()[1:]]
    out = [False] * len(docs)
    if alternatives:
        for (i, _), (_, right) in zip(alternatives, answer_scores(subject, [d for _, d in alternatives], pattern,
                                                                   kernel)):
            out[i] = out[i] or right
    return out


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
    add: str | None = None,
) -> dict:
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


def needle_lengths(subject: Subject, task: str, size: int | None, target: str,
                   format: str | None = None) -> list[int]:
    """The default lengths of ``lexkit retrieval``: the multiples of the training length
    (:data:`DEFAULT_MULTIPLES`) whose length holds the needle and question, in the subject's unit
    (bytes; tokens for a tokenizer model)."""
    train_len = subject.train_len
    if not train_len:
        raise ValueError(f"{target} records no training length: give --lengths")
    need = minimum_length(subject, task, size, format)
    lengths = [train_len * k for k in DEFAULT_MULTIPLES if train_len * k >= need]
    if not lengths:
        raise ValueError(f"the {task} needle and question need {need} {unit(subject)}, more than "
                         f"{DEFAULT_MULTIPLES[-1]}x the training length {train_len}: give --lengths")
    return lengths


def report(target: str, info: dict, rows: Sequence[RetrievalCell], *, task: str, style: str, size: int | None,
           seed: int, haystack: str | None, samples: int, lengths: Sequence[int], depths: Sequence[float],
           format: str | None = None) -> dict:
    """The JSON document of ``lexkit retrieval``: the report's header (:func:`lexkit.core.version.header`),
    the subject's (``info``: what ran, :func:`lexkit.instruments.identity`; log-n, training length), the
    grid's settings (lengths, depths and patterns as scored, each once; lengths in ``unit``), every cell
    (:class:`~lexkit.instruments.retrieval.rows.RetrievalCell`) and the summary over depths
    (:class:`~lexkit.instruments.retrieval.rows.RetrievalSummary`)."""
    from ...core.version import header

    return {
        **header(REPORT, REPORT_VERSION),
        "target": target,
        **identity(info),
        "logn": info.get("logn", False),
        "train_len": info["train_len"],
        "task": task,
        **({"format": format} if format is not None else {}),
        "style": style,
        "unit": "bytes" if style == "bytes" else "tokens",
        "size": size,
        "seed": seed,
        "haystack": haystack,
        "samples": samples,
        "lengths": list(dict.fromkeys(r.length for r in rows)) or list(lengths),
        "depths": list(dict.fromkeys(r.depth for r in rows)) or list(depths),
        "patterns": list(dict.fromkeys(r.pattern for r in rows)),
        "rows": [r.to_json() for r in rows],
        "summary": [s.to_json() for s in summary(rows)],
    }
