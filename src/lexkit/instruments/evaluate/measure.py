"""Perplexity versus length: the paper's protocol, a sliding-window mode, and loss by position.

**The paper's protocol** (``stride=None``). Given lengths L_1 < ... < L_k, let M = max(L_i). Only
documents at least M bytes long take part, and only their first M bytes are scored. For each
length L those M bytes are cut into non-overlapping chunks of L bytes; a chunk starting at byte s
is scored with the L inputs ``[token before byte s, byte s, ..., byte s+L-2]``, where the token
before byte 0 is BOS. Every chunk is an independent sequence at positions 0..L-1. So every
length scores exactly the same bytes (all M of every document), each exactly once, and only the
context the model sees differs. When L does not divide M, the last chunk holds the remaining
r = M mod L bytes; it is scored in the window of L inputs that ends at byte M-1 (so the model still
runs at exactly L positions) and only its last r predictions count.

**Sliding windows** (``stride=S``, the ALiBi repository's second mode, fairseq's
``--context-window``). The model still runs on windows of exactly L inputs and scores the same M
bytes of every document, each exactly once; the windows advance by S bytes instead of L. The
first window (inputs BOS, byte 0, ..., byte L-2) scores its L bytes; each later window ends S
bytes after the previous one (the last one ends at byte M-1) and scores only its last S bytes
(fewer for the last one). So, past the first window, the byte at window index p is predicted
from p+1 inputs with p >= L-S: at least L-S and at most L-1 earlier bytes of the document, plus the
byte just before those. ``S = L`` is exactly the paper's protocol; ``S = 1`` gives every byte
the longest context the length allows (and costs M-L+1 windows per document). A stride larger
than a length is clamped to that length (non-overlapping) and reported per result.

**The window's first token** (``start``). Under ``start="bos"`` (the protocol above) a
document's first window opens on its BOS and every later window on a byte of the document: at the
longest length every window is a document's first, at the shortest one in M / L is. A model
trained on windows drawn at random offsets of the token stream (:class:`lexkit.data.corpus.Stream`) almost
never saw BOS at key 0, and one trained with a retrieval mix saw it there before every task
document (:class:`lexkit.data.mix.MixedStream`), so a comparison across lengths under ``"bos"`` also
compares how often key 0 holds BOS. ``start="text"`` holds that fixed: the scored bytes are bytes
1..M (documents of at least M + 1 bytes take part) and every window at every length opens on a byte
of the document, as a plain training window does; only the context differs. What
:func:`lexkit.instruments.evaluate.paired.paired_context` measures (use of context, with an interval over documents).

**Bits per byte** = mean NLL (nats) / ln 2 over the scored bytes; **perplexity** = e^(mean NLL).

**Loss by position.** The byte at window index p (0-based: it is predicted from p+1 inputs,
positions 0..p) falls in the bucket ``from <= p < to``. Bucket edges are the powers of two below
L plus the training length T, so every bucket lies either inside (``to <= T``: positions the
model was trained on) or beyond (``from >= T``) the training length. A model that uses its
context well has a *falling* bpb across the buckets, including those beyond T.

**Streaming** (``stream``). Under a pattern with finite reach (``window``, ``bca``) a window of
L inputs is fed through the model in segments of ``SEGMENT`` tokens with a per-layer KV cache
of the keys the pattern can still reach (:class:`lexkit.attention.KVCache`), and each segment's
loss is taken from its own logits, so memory does not grow with L (no L x vocab logits, no
L-long activations). The per-byte losses equal the one-pass ones up to float rounding. ``auto``
streams when it saves memory: a finite reach and L > SEGMENT, on a model that has
``new_cache`` and the ``auto``/``chunked`` kernel.

A length a scheme cannot run (``learned`` past its table, a kernel refusing a span) is reported
with ``bpb: None`` and ``unavailable: <reason>`` when some other (length, pattern) runs; when
none can run (a model whose loss is NaN or inf everywhere included), the reasons are raised as
one ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...attention import Pattern, kernel_label, record_kernels
from ...attention import create as create_pattern
from ...attention.cache import SEGMENT, refusal_of
from ...core import checks
from ...core.device import device_of, eval_mode
from ...core.errors import DataError
from ...core.specs import parse_lengths
from ...core.stats import ratio_interval
from ...data.corpus import LN2, encode, require_long
from ..subject import DEFAULT_MULTIPLIERS, default_lengths, eval_documents, load
from .rows import EvalReport, EvalRow, PairedRow, PositionRow

__all__ = ["DEFAULT_MULTIPLIERS", "default_lengths", "eval_documents", "evaluate", "evaluate_run"]
BATCH_TOKENS = {"cpu": 8192}  # inputs per forward pass by device type; 32768 elsewhere
#: what a window's first token is (module docstring): "bos", the paper's protocol as lexkit ran it (a
#: document's first window opens on its BOS); "text", every window opens on a byte of the document
STARTS = ("bos", "text")

#: the report ``lexkit eval --json`` writes and its layout's version (:func:`lexkit.core.version.header`)
REPORT, REPORT_VERSION = "lexkit.eval", 3


# -- lengths, windows, buckets -----------------------------------------------------------------
def windows(total: int, length: int, stride: int | None = None) -> list[tuple[int, int]]:
    """The windows that score bytes 0..total-1 of one document at ``length``: a list of
    ``(start, first)``. The window's inputs are tokens ``start .. start+length-1`` of the encoded
    document (token 0 is BOS, token t is byte t-1); its predictions at indices ``first ..
    length-1`` are scored: bytes ``start+first .. start+length-1``. Each byte exactly once."""
    if length > total:
        raise ValueError(f"length {length} exceeds the {total} bytes to score")
    step = length if stride is None else min(checks.number("--stride", stride), length)
    out = [(0, 0)]
    end = length  # bytes scored so far
    while end < total:
        new_end = min(end + step, total)
        out.append((new_end - length, length - (new_end - end)))
        end = new_end
    return out


def position_buckets(length: int, train_len: int | None = None) -> list[tuple[int, int]]:
    """``[(from, to), ...]`` covering 0..length-1: edges at powers of two and the training length."""
    edges = {0, length}
    p = 1
    while p < length:
        edges.add(p)
        p *= 2
    if train_len and train_len < length:
        edges.add(train_len)
    ordered = sorted(edges)
    return list(zip(ordered[:-1], ordered[1:]))


def resolve_patterns(model: nn.Module, pattern: str | Pattern | Sequence[str | Pattern]) -> list[Pattern]:
    """Pattern specs resolved against the model (W defaults to its training length), deduplicated."""
    specs = [pattern] if isinstance(pattern, (str, Pattern)) else list(pattern)
    if not specs:
        raise ValueError("no attention pattern given")
    out: list[Pattern] = []
    for spec in specs:
        if hasattr(model, "pattern"):
            resolved = model.pattern(spec)
        else:
            resolved = create_pattern(spec, default_window=_train_len(model))
        if resolved not in out:
            out.append(resolved)
    return out


def _train_len(model: nn.Module) -> int | None:
    cfg = getattr(model, "cfg", None)
    return getattr(cfg, "train_len", None)


def select_documents(
    documents: Sequence[bytes], length: int, *, max_docs: int | None = None, max_bytes: int | None = None
) -> list[bytes]:
    """The documents at least ``length`` bytes long, in order, capped by ``max_docs`` documents
    and ``max_bytes`` scored bytes per length (at least one document); DataError if none."""
    docs = [d.encode("utf-8") if isinstance(d, str) else bytes(d) for d in documents]
    if not docs:
        raise DataError("no documents to evaluate (0 documents)")
    checks.number("--max-docs", max_docs)
    checks.number("--max-bytes", max_bytes)
    long = require_long(docs, length, what="")
    keep = len(long)
    if max_docs is not None:
        keep = min(keep, max_docs)
    if max_bytes is not None:
        keep = min(keep, max(1, max_bytes // length))
    return long[:keep]


def token_documents(
    model: nn.Module, documents: Sequence[bytes], total: int, *, max_docs: int | None = None,
    max_tokens: int | None = None,
) -> tuple[Tensor, Tensor]:
    """A tokenizer model's twin of :func:`select_documents`: ``(tokens [D, total + 1], nbytes
    [D, total])``, the first ``total`` scored tokens (plus the one before them, ``model.encode``'s
    BOS) of every document that has them, capped by ``max_docs`` documents and ``max_tokens``
    scored tokens per length; ``nbytes[d, j]`` is the bytes token j + 1 covers. DataError if
    none is long enough, saying how long the longest tokenized document was."""
    checks.number("--max-docs", max_docs)
    checks.number("--max-tokens", max_tokens)
    keep = len(documents) if max_docs is None else max_docs
    if max_tokens is not None:
        keep = min(keep, max(1, max_tokens // total))
    rows = []
    for doc in documents:
        if len(rows) == keep:
            break
        if len(doc) < total // 2:  # every token covers a byte or more: too short, no need to tokenize
            continue
        ids, nbytes = model.encode(doc)
        if ids.numel() > total:
            rows.append((ids[: total + 1], nbytes[:total]))
    if not rows:
        longest = max((model.encode(d)[0].numel() - 1 for d in documents if len(d) == max(map(len, documents))),
                      default=0)
        raise DataError(f"no document has {total:,} tokens to score ({len(documents)} documents, the longest "
                        f"has {longest:,} tokens); use shorter --lengths or more data")
    return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])


# -- evaluation ---------------------------------------------------------------------------------
def evaluate(
    model: nn.Module,
    documents: Sequence[bytes],
    lengths: Sequence[int],
    pattern: str | Pattern | Sequence[str | Pattern] = "causal",
    *,
    stride: int | None = None,
    max_docs: int | None = None,
    max_bytes: int | None = None,
    max_tokens: int | None = None,
    batch_size: int | None = None,
    batch_tokens: int | None = None,
    kernel: str = "auto",
    train_len: int | None = None,
    progress: bool = False,
    stream: bool | str = "auto",
    segment: int = SEGMENT,
    start: str = "bos",
    per_document: bool = False,
) -> dict:
    """Bits per byte and perplexity of ``model`` on ``documents`` at every (length, pattern).

    See the module docstring for the exact protocol (``stride=None``) and the sliding-window
    mode (``stride=S``). ``model(tokens [b, n], pattern=..., kernel=...)`` must return logits
    ``[b, n, vocab]`` (a :class:`lexkit.GPT`, or a tokenizer model such as :class:`lexkit.model.hf.HFModel`
    whose ``unit`` is ``"tokens"``: then lengths count tokens, the protocol reads tokens for
    bytes, bpb = summed token NLL / (ln 2 x bytes those tokens cover), ``ppl`` is the token
    perplexity and ``max_tokens`` caps the tokens scored). Batches hold ``batch_size`` windows,
    by default as many as fit ``batch_tokens`` inputs (8192 on CPU), at least one: a single
    window at long lengths, so memory follows the kernel's cost at one length (O(n*W) for local
    patterns). ``stream`` (``"auto"``, True, False) feeds each window in pieces of ``segment``
    tokens through a KV cache (module docstring); each result row records whether it streamed.

    Returns a JSON-ready dict: ``lengths``, ``patterns`` (canonical specs), ``stride``,
    ``documents`` (how many took part), ``bytes_per_document`` (= max(lengths); a tokenizer
    model: ``tokens_per_document`` and ``bytes_scored``), ``train_len``, ``results`` (one row per
    length x pattern: ``length, pattern, stride, streamed, bpb, ppl, bytes`` (and ``tokens``)
    and, when it cannot run, ``unavailable``) and ``by_position`` (``length, pattern, from, to,
    beyond_train, bpb, bytes``).
    """
    lengths = parse_lengths(lengths)
    check_options(lengths=lengths, stride=stride, max_docs=max_docs, max_bytes=max_bytes, max_tokens=max_tokens,
                  batch_size=batch_size, kernel=kernel, stream=stream, start=start)
    checks.number("segment", segment)
    patterns = resolve_patterns(model, pattern)
    check_stream(model, stream, kernel, patterns)
    train_len = train_len if train_len is not None else _train_len(model)
    tokens, nbytes, counts = scored_tokens(model, documents, lengths[-1], max_docs, max_bytes, max_tokens, start)
    results, by_position = score_windows(
        model, tokens, lengths, patterns, stride=stride, batch_size=batch_size, batch_tokens=batch_tokens,
        kernel=kernel, train_len=train_len, progress=progress, nbytes=nbytes, stream=stream, segment=segment,
        per_document=per_document,
    )
    return {"lengths": lengths, "patterns": [p.spec for p in patterns], "stride": stride, "start": start, **counts,
            "train_len": train_len, "results": results, "by_position": by_position}


def check_start(start: str) -> None:
    """ValueError for a ``start`` that is not one of :data:`STARTS`."""
    if start not in STARTS:
        raise ValueError(f"unknown start {start!r}; valid: {', '.join(STARTS)} (what a window's first token is)")


def scored_tokens(model: nn.Module, documents: Sequence[bytes], total: int, max_docs: int | None,
                  max_bytes: int | None, max_tokens: int | None,
                  start: str = "bos") -> tuple[Tensor, Tensor | None, dict]:
    """``(tokens [D, total + 1], nbytes [D, total] or None, counts)``: the protocol's documents
    in the model's unit (:func:`select_documents` in bytes, :func:`token_documents` in tokens)
    and what the report says of them. ``start="bos"``: token 0 of a row is the document's BOS and
    the scored tokens are its first ``total``; ``"text"``: token 0 is the document's first byte (or
    token) and the scored ones the ``total`` after it, so no window opens on BOS (documents one
    token longer take part)."""
    skip = STARTS.index(start)  # tokens of each document dropped before token 0: BOS under "text"
    if getattr(model, "unit", "bytes") == "tokens":
        if max_bytes is not None:
            raise ValueError("--max-bytes is for byte models; a tokenizer model caps tokens with --max-tokens")
        tokens, nbytes = token_documents(model, documents, total + skip, max_docs=max_docs, max_tokens=max_tokens)
        tokens, nbytes = tokens[:, skip:], nbytes[:, skip:]
        return tokens, nbytes, {"documents": int(tokens.shape[0]), "tokens_per_document": total,
                                "bytes_scored": int(nbytes.sum())}
    if max_tokens is not None:
        raise ValueError("--max-tokens is for tokenizer (hf:) models; a byte model caps bytes with --max-bytes")
    docs = select_documents(documents, total + skip, max_docs=max_docs, max_bytes=max_bytes)
    tokens = torch.stack([encode(d[: total + skip])[skip:] for d in docs])  # [D, total + 1]
    return tokens, None, {"documents": len(docs), "bytes_per_document": total}


def check_options(**options) -> None:
    """ValueError naming the flag of a setting no evaluation can take: ``options`` (:func:`evaluate_run`'s
    keywords) as :class:`lexkit.instruments.evaluate.EvalOptions`, checked as ``lexkit eval`` checks them
    (lengths at most :data:`lexkit.core.checks.MAX_EVAL_LENGTH`, counts, kernel, stream, start, patterns)."""
    from . import EvalOptions

    EvalOptions(**options).check()


def score_windows(
    model: nn.Module,
    tokens: Tensor,
    lengths: list[int],
    patterns: list[Pattern],
    *,
    stride: int | None = None,
    batch_size: int | None = None,
    batch_tokens: int | None = None,
    kernel: str = "auto",
    train_len: int | None = None,
    progress: bool = False,
    nbytes: Tensor | None = None,
    stream: bool | str = False,
    segment: int = SEGMENT,
    per_document: bool = False,
) -> tuple[list[dict], list[dict]]:
    """The measuring loop of :func:`evaluate` (byte and tokenizer models): every (length, pattern)
    over the :func:`windows` of ``tokens`` ``[D, total + 1]`` (the token before the first scored
    one, then the ``total = max(lengths)`` scored ones).

    ``nbytes`` ``[D, total]``: the bytes of text each scored token covers; None for a byte model
    (one byte each). bpb = summed NLL / (ln 2 x bytes); ppl = e^(mean NLL per token). Returns
    ``(results, by_position)`` rows as :func:`evaluate` documents them; with ``nbytes`` each row
    and bucket also carries ``tokens``. ``stream``/``segment``: as :func:`evaluate` (a model
    without a KV cache never streams under ``auto``). ``per_document``: each row that ran also carries
    ``per_document``, the bpb of each document (row of ``tokens``) in order. ValueError when no
    (length, pattern) can run."""
    total = tokens.shape[1] - 1
    device = device_of(model)
    if batch_tokens is None:
        batch_tokens = BATCH_TOKENS.get(device.type, 32768)
    results: list[dict] = []
    by_position: list[dict] = []
    tok = (lambda n: None) if nbytes is None else int  # rows count tokens only for a tokenizer model
    work = tokens.shape[0] * total * len(lengths) * len(patterns)
    from ...core.progress import bar

    unit = "B" if nbytes is None else "tok"
    with eval_mode(model), torch.inference_mode(), bar(work, "eval", enabled=progress, unit=unit) as meter:
        for length in lengths:
            placed = windows(total, length, stride)
            items = [(d, start, first) for d in range(tokens.shape[0]) for start, first in placed]
            size = batch_size or max(1, batch_tokens // length)
            scored_bytes = None if nbytes is None else _bytes_by_index(nbytes, items, length)  # [length]
            for pat in patterns:
                streams = should_stream(model, stream, pat, length, kernel, segment)
                row = dict(length=length, pattern=pat.spec, stride=min(stride or length, length), streamed=streams)
                try:
                    with record_kernels() as ran:
                        sums, counts, by_doc = _score(model, tokens, items, length, size, pat, kernel, device,
                                                      meter, segment if streams else None)
                except _Unavailable as exc:
                    meter.advance(tokens.shape[0] * total)
                    results.append(EvalRow(**row, bpb=None, ppl=None, tokens=tok(0), unavailable=str(exc)).to_json())
                    continue
                per_index = counts if scored_bytes is None else scored_bytes  # bytes at each window index
                cell, buckets = _cell_rows(row, sums, counts, per_index, train_len, tok, kernel_label(ran))
                if per_document and cell["bpb"] is not None:
                    doc_bytes = torch.full_like(by_doc, total) if nbytes is None else nbytes.sum(1).double()
                    cell["per_document"] = (by_doc / doc_bytes / LN2).tolist()
                results.append(cell)
                by_position += buckets
    return _some_ran(results), by_position


def _some_ran(results: list[dict]) -> list[dict]:
    """``results``, unless no cell has a bpb (non-finite everywhere included): then a ValueError
    with every reason."""
    if all(r["bpb"] is None for r in results):
        raise ValueError("no requested length can run: " + "; ".join(sorted({r["unavailable"] for r in results})))
    return results


def _cell_rows(row: dict, sums: Tensor, counts: Tensor, per_index: Tensor, train_len: int | None,
               tok, ran: str | None = None) -> tuple[dict, list[dict]]:
    """The result row and position buckets of one (length, pattern) from its summed NLL, token
    counts and bytes per window index [length]; a non-finite loss is an unavailable row. ``ran``:
    the attention kernel(s) that ran (:func:`lexkit.attention.kernel_label`)."""
    nll, n_tok, n_bytes = float(sums.sum()), int(counts.sum()), int(per_index.sum())
    if not math.isfinite(nll):
        why = "non-finite loss (the model produced NaN or inf logits)"
        return EvalRow(**row, bpb=None, ppl=None, tokens=tok(n_tok), bytes=n_bytes, unavailable=why,
                       kernel=ran).to_json(), []
    cell = EvalRow(**row, bpb=nll / n_bytes / LN2, ppl=math.exp(min(nll / n_tok, 700.0)), tokens=tok(n_tok),
                   bytes=n_bytes, kernel=ran).to_json()
    buckets = []
    for lo, hi in position_buckets(row["length"], train_len):
        n = int(per_index[lo:hi].sum())
        if n:
            buckets.append(PositionRow(
                length=row["length"], pattern=row["pattern"], from_=lo, to=hi,
                beyond_train=None if train_len is None else lo >= train_len,
                bpb=float(sums[lo:hi].sum()) / n / LN2, tokens=tok(counts[lo:hi].sum()), bytes=n,
            ).to_json())
    return cell, buckets


def _bytes_by_index(nbytes: Tensor, items: list[tuple[int, int, int]], length: int) -> Tensor:
    """Bytes scored at each window index ``[length]`` over the windows ``items`` (d, start,
    first): the target at index p of a window starting at ``start`` is scored token start + p."""
    out = torch.zeros(length, dtype=torch.int64)
    index = torch.arange(length)
    for d, start, first in items:
        out += torch.where(index >= first, nbytes[d, start : start + length], 0)
    return out


class _Unavailable(Exception):
    """The first forward pass at a (length, pattern) raised ValueError: it cannot run."""


def check_stream(model: nn.Module, stream: bool | str, kernel: str, patterns: Sequence[Pattern] = ()) -> None:
    """Refuse a ``stream`` value that is not auto/True/False, or forced streaming the model says
    it cannot run (its ``cache_refusal``, the one answer for every caller)."""
    check_stream_value(stream)
    if stream is True:
        for pattern in patterns or ["causal"]:
            reason = refusal_of(model, pattern, kernel)
            if reason is not None:
                raise ValueError(f"cannot stream (--stream, stream=True): {reason}; evaluate in one pass (--no-stream)")


def check_stream_value(stream: bool | str) -> None:
    if not isinstance(stream, bool) and stream != "auto":
        raise ValueError(f"stream must be 'auto', True or False, got {stream!r}")


def should_stream(
    model: nn.Module, stream: bool | str, pattern: Pattern, length: int, kernel: str, segment: int
) -> bool:
    """Whether a window of ``length`` streams: forced by True/False; under ``auto``, when it saves
    memory (finite reach, longer than one segment) and the model can run it through its cache."""
    if stream == "auto":
        return pattern.reach is not None and length > segment and refusal_of(model, pattern, kernel) is None
    return stream


def stream_nll(
    model: nn.Module, x: Tensor, y: Tensor, pattern: Pattern, segment: int = SEGMENT, *, offset: int = 0
) -> Tensor:
    """Per-token NLL (nats, float64) of targets y [b, n] given inputs x [b, n], fed in segments of
    ``segment`` tokens through the model's KV cache: equal to the one-pass
    ``cross_entropy(model(x, offset=offset))`` up to float rounding, with memory independent of n
    under a local pattern (one segment's activations and logits, the cache's reach of keys)."""
    cache = model.new_cache(pattern, offset=offset)
    nll = torch.empty(x.shape, dtype=torch.float64)  # [b, n] on the CPU
    for start in range(0, x.shape[1], segment):
        stop = min(start + segment, x.shape[1])
        logits = model(x[:, start:stop], pattern=pattern, cache=cache)  # [b, s, vocab]
        nll[:, start:stop] = _nll(logits, y[:, start:stop])
    return nll


def _nll(logits: Tensor, y: Tensor) -> Tensor:
    """[b, n, vocab], [b, n] -> [b, n] float64 on the CPU. The log-softmax runs in float64: the NLL
    of the model's logits without float32 rounding on top."""
    return F.cross_entropy(logits.double().flatten(0, 1), y.flatten(), reduction="none").view(y.shape).cpu()


def _score(model, tokens, items, length, size, pat, kernel, device, meter,
           segment=None) -> tuple[Tensor, Tensor, Tensor]:
    """Summed NLL and counts per window index [length] over every window of ``items``, and the
    summed NLL of each document [D]; with a ``segment``, each batch streams through the KV cache
    (:func:`stream_nll`)."""
    sums = torch.zeros(length, dtype=torch.float64)
    counts = torch.zeros(length, dtype=torch.int64)
    by_doc = torch.zeros(tokens.shape[0], dtype=torch.float64)
    index = torch.arange(length)
    for i in range(0, len(items), size):
        batch = items[i : i + size]
        # [b, L] each; one window is a view (no copy: at long lengths these are the per-byte state)
        x = _rows([tokens[d, s : s + length] for d, s, _ in batch]).to(device)
        y = _rows([tokens[d, s + 1 : s + length + 1] for d, s, _ in batch]).to(device)
        try:
            if segment is None:
                nll = _nll(model(x, pattern=pat, kernel=kernel), y)  # [b, L]
            else:
                nll = stream_nll(model, x, y, pat, segment)
        except ValueError as exc:
            if i == 0:
                raise _Unavailable(str(exc)) from exc
            raise
        scored = index[None, :] >= torch.tensor([first for _, _, first in batch])[:, None]  # [b, L]
        nll = nll.masked_fill_(~scored, 0.0)  # in place: no second [b, L] float64 buffer
        sums += nll.sum(0)
        by_doc.index_add_(0, torch.tensor([d for d, _, _ in batch]), nll.sum(1))
        counts += scored.sum(0)
        bpb = float(sums.sum()) / max(1, int(counts.sum())) / LN2
        meter.advance(int(scored.sum()), L=length, pattern=pat.spec, bpb=bpb)
    return sums, counts, by_doc


def _rows(rows: list[Tensor]) -> Tensor:
    """[len(rows), n]: a view of the one row, or a stacked copy of several."""
    return rows[0][None] if len(rows) == 1 else torch.stack(rows)


def paired_rows(report: dict) -> list[PairedRow]:
    """The :class:`.rows.PairedRow` of every longer length against the shortest, per pattern,
    of a report of :func:`evaluate` run with ``start="text"`` and ``per_document``
    (ValueError for one under another start: its lengths differ in more than the context)."""
    if report.get("start") != "text":
        raise ValueError("a paired comparison holds the start fixed: evaluate with start='text'")
    lengths = report["lengths"]
    by = {(r["pattern"], r["length"]): r for r in report["results"]}
    out = []
    for spec in report["patterns"]:
        short = by[spec, lengths[0]]
        for n in lengths[1:]:
            long = by[spec, n]
            ratio = low = high = why = None
            if short["bpb"] is None or long["bpb"] is None:
                why = long.get("unavailable") or short.get("unavailable")
            else:
                interval = ratio_interval(long["per_document"], short["per_document"])
                ratio, low, high = interval if interval is not None else (long["bpb"] / short["bpb"], None, None)
            out.append(PairedRow(spec, lengths[0], n, report["documents"], short["bpb"], long["bpb"], ratio, low, high,
                                 why))
    return out


# -- a run or an hf: model, end to end ----------------------------------------------------------
def evaluate_run(
    target: str | Path,
    *,
    lengths: Sequence[int] | None = None,
    patterns: str | Sequence[str] = "causal",
    data: str | None = None,
    stride: int | None = None,
    max_docs: int | None = None,
    max_bytes: int | None = None,
    max_tokens: int | None = None,
    batch_size: int | None = None,
    kernel: str = "auto",
    device: str = "cpu",
    progress: bool = False,
    scheme: str | None = None,
    logn: bool | None = None,
    stream: bool | str = "auto",
    rope_scaling: dict | str | None = None,
    dtype: str | None = None,
    start: str = "bos",
    paired: bool = False,
    add: str | None = None,
) -> EvalReport:
    """``lexkit eval TARGET``: load a run directory or an ``hf:PATH`` model
    (:func:`lexkit.instruments.subject.load`) and evaluate it on its default documents (a run: its own
    corpus's validation split; an hf: model: ``stdlib``'s) or ``data``, at its default lengths
    (a run: the training length x 1/2 .. 16; an hf: model: x 1/2 .. 4) or ``lengths``.

    The report, an :class:`~lexkit.instruments.evaluate.rows.EvalReport` (typed, and a mapping of its JSON's
    keys): the header, the subject's (``run``, ``scheme``: the resolved spec
    that ran, ``trained_scheme`` when ``scheme`` overrode it, ``logn``, ``train_len``; an hf:
    model's ``model`` shape), ``data`` (spec, split, fingerprint, counts), ``kernel``,
    ``stream`` and everything :func:`evaluate` returns. ``scheme`` / ``logn`` evaluate a run's
    weights under another scheme or log-n setting; ``rope_scaling`` / ``dtype`` apply to hf:
    models; an option the target cannot honour is a ValueError naming it. ``start``: what a
    window's first token is (:data:`STARTS`); ``paired``: also ``paired``, every longer length's bpb
    against the shortest's on the same bytes with the start held fixed (:mod:`lexkit.instruments.evaluate.paired`; needs
    ``start="text"``, non-overlapping windows and two lengths or more)."""
    from ...core.version import header

    # every option that can be checked without the model, before it loads (lexkit eval's checks)
    check_options(lengths=lengths, patterns=patterns, data=data, stride=stride, max_docs=max_docs, max_bytes=max_bytes,
                  max_tokens=max_tokens, batch_size=batch_size, kernel=kernel, scheme=scheme, logn=logn,
                  stream=stream, rope_scaling=rope_scaling, dtype=dtype, start=start, paired=paired, add=add)
    subject = load(target, device=device, scheme=scheme, logn=logn, rope_scaling=rope_scaling, dtype=dtype, add=add)
    lengths = parse_lengths(lengths) if lengths is not None else subject.default_lengths()
    documents, described = subject.documents(data)
    result = evaluate(
        subject.model, documents, lengths, patterns, stride=stride, max_docs=max_docs, max_bytes=max_bytes,
        max_tokens=max_tokens, batch_size=batch_size, kernel=kernel, train_len=subject.train_len,
        progress=progress, stream=stream, start=start, per_document=paired,
    )
    if paired:
        result["paired"] = [row.to_json() for row in paired_rows(result)]
        for row in result["results"]:
            row.pop("per_document", None)
    for key in ("documents", "bytes_per_document", "tokens_per_document", "bytes_scored"):
        if key in result:
            described[key] = result.pop(key)
    result.pop("train_len")
    return EvalReport(**header(REPORT, REPORT_VERSION), **subject.describe(), data=described, kernel=kernel,
                      stream=stream, **result)
