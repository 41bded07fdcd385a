"""The grid of documents retrieval scores: its default depths and multiples of the training length, what a
length counts for a subject (:func:`unit`: bytes, or tokens for a tokenizer model) and the style its
documents take (:func:`style`), the checks of a grid before any model loads (:func:`check_grid`, a value
given twice scored once: :func:`unique`), and the documents of one cell (:func:`cell_documents`: a
tokenizer model's found by bisection so its length counts tokens). The documents themselves are
:mod:`lexkit.tasks`'."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence

from ... import tasks
from ...attention import Pattern
from ...core import checks
from ..subject import Subject

#: the needle-in-a-haystack depth grid: 0, 10, ..., 100 percent
DEFAULT_DEPTHS = tuple(float(d) for d in range(0, 101, 10))
#: the lengths retrieval is scored at by default, as multiples of the training length
DEFAULT_MULTIPLES = (1, 2, 4, 8, 16)


def unit(subject: Subject) -> str:
    """What a length counts for this subject: ``"bytes"`` (byte models) or ``"tokens"``."""
    return getattr(subject.model, "unit", "bytes")


def style(subject: Subject) -> str:
    """The document style a subject reads: ``"bytes"`` (lexkit's byte models) or ``"standard"``
    (tokenizer models: the standard passkey prompt)."""
    return "bytes" if unit(subject) == "bytes" else "standard"


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
    for depth in listed("depths", depths, "[0, 50, 100]"):
        tasks.check_depth(depth)
    for length in listed("lengths", lengths, "[64, 128]"):
        checks.number("lengths", length, maximum=checks.MAX_EVAL_LENGTH)
    need = tasks.minimum_length(task, style, size, format)
    for length in lengths if style == "bytes" else ():
        if length < need:
            raise ValueError(f"length {length} is shorter than the {task} needle and question ({need} bytes); "
                             f"use lengths of at least {need}")


def listed(name: str, values, example: str) -> list:
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
