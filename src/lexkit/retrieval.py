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

Models come through a small interface, :class:`Subject` (logits of a token sequence under a
pattern, text <-> tokens, greedy decoding), with two adapters: :class:`ByteSubject` (a lexkit
run) and :class:`HFSubject` (``hf:PATH``); :func:`open_target` is the one place that turns a
command-line target into a subject.

Invariant (what a pattern can see): a needle whose value ends more than ``n_layers x (reach-1)``
tokens before the answer's first predicting position cannot change the answer's logits under
``window``/``bca`` (each layer moves information back by less than the pattern's reach), except
through the first K keys under ``sinks:W,K``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Protocol

import torch
from torch import Tensor

from . import tasks
from .attention import Pattern
from .device import eval_mode

#: the needle-in-a-haystack depth grid: 0, 10, ..., 100 percent
DEFAULT_DEPTHS = tuple(float(d) for d in range(0, 101, 10))
Z95 = 1.959963984540054


class Subject(Protocol):
    """What retrieval scoring needs from a model."""

    name: str
    style: str  # "bytes" (lexkit's byte models) or "standard" (tokenizer models)
    train_len: int | None
    n_layers: int

    def pattern(self, spec: str | Pattern) -> Pattern: ...

    def encode(self, text: bytes) -> tuple[Tensor, Tensor]:
        """(ids [T] with the start token first, bytes of text each of tokens 1.. covers [T-1])."""

    def logits(self, ids: Tensor, pattern: Pattern) -> Tensor:
        """ids [b, n] -> logits [b, n, vocab]."""

    def greedy(self, prompt: bytes, n_bytes: int, pattern: Pattern, cache: bool | None) -> bytes:
        """Greedy continuation of ``prompt`` covering at least ``n_bytes`` bytes."""


class ByteSubject:
    """A lexkit byte model (:class:`lexkit.model.GPT`): tokens are BOS then bytes."""

    style = "bytes"

    def __init__(self, model, name: str = "model", kernel: str = "auto") -> None:
        self.model, self.name, self.kernel = model, name, kernel
        self.train_len = model.cfg.train_len
        self.n_layers = model.cfg.n_layers

    def pattern(self, spec: str | Pattern) -> Pattern:
        return self.model.pattern(spec)

    def encode(self, text: bytes) -> tuple[Tensor, Tensor]:
        from .data import encode

        ids = encode(text)
        return ids, torch.ones(ids.numel() - 1, dtype=torch.int64)

    def logits(self, ids: Tensor, pattern: Pattern) -> Tensor:
        return self.model(ids, pattern=pattern, kernel=self.kernel)

    def greedy(self, prompt: bytes, n_bytes: int, pattern: Pattern, cache: bool | None) -> bytes:
        from .sample import generate

        return generate(self.model, prompt, n_bytes, pattern=pattern, temperature=0.0, kernel=self.kernel,
                        cache=cache)


class HFSubject:
    """A Hugging Face causal LM (:class:`lexkit.hf.HFModel`): its tokenizer's tokens, decoded
    greedily without a cache (one forward pass of the whole context per token)."""

    style = "standard"

    def __init__(self, model, kernel: str = "auto") -> None:
        self.model, self.name, self.kernel = model, model.source, kernel
        self.train_len = model.cfg.train_len
        self.n_layers = model.cfg.n_layers

    def pattern(self, spec: str | Pattern) -> Pattern:
        return self.model.pattern(spec)

    def encode(self, text: bytes) -> tuple[Tensor, Tensor]:
        return self.model.encode(text)

    def logits(self, ids: Tensor, pattern: Pattern) -> Tensor:
        return self.model(ids, pattern=pattern, kernel=self.kernel)

    def greedy(self, prompt: bytes, n_bytes: int, pattern: Pattern, cache: bool | None) -> bytes:
        if cache:
            raise ValueError("a hf: model decodes without lexkit's KV cache")
        ids, _ = self.encode(prompt)
        ids = ids.to(next(self.model.parameters()).device)[None]
        start = ids.shape[1]
        out = b""
        for _ in range(n_bytes):  # every token covers at least one byte
            nxt = self.logits(ids, pattern)[0, -1].argmax()
            ids = torch.cat((ids, nxt.view(1, 1)), dim=1)
            out = self.model.tokenizer.decode(ids[0, start:].tolist()).encode("utf-8")
            if len(out) >= n_bytes:
                break
        return out


def open_target(target: str, *, device: str = "cpu", scheme: str | None = None, logn: bool | None = None,
                rope_scaling: str | None = None, kernel: str = "auto") -> tuple[Subject, dict]:
    """A run directory or ``hf:PATH`` as a :class:`Subject`, and what it is (``scheme``,
    ``train_len``, the run's ``data`` spec)."""
    if target.startswith("hf:"):
        from . import hf

        model = hf.load(target, rope_scaling=rope_scaling, device=device)
        return HFSubject(model, kernel), {"scheme": model.cfg.scheme, "train_len": model.cfg.train_len, "data": None}
    from .runs import load

    model, config = load(target, device=device, scheme=scheme, logn=logn)
    info = {"scheme": config["model"]["scheme"], "train_len": int(config["model"]["train_len"]),
            "logn": bool(config["model"].get("logn", False)),
            "data": (config.get("data") or {}).get("spec", "stdlib")}
    if "scheme" in config.get("overrides", {}):
        info["trained_scheme"] = config["trained"]["scheme"]
    return ByteSubject(model, str(target), kernel), info


# -- measures -------------------------------------------------------------------------------------
def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (Wilson 1927)."""
    if n <= 0:
        raise ValueError("a confidence interval needs at least one sample")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact bounds, not a rounding residue
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def answer_tokens(nbytes: Tensor, start: int) -> Tensor:
    """Bool [T-1]: which of tokens 1.. cover some byte at or after byte ``start`` of the text."""
    ends = nbytes.cumsum(0)  # bytes of text covered up to and including each token
    return ends > start


@torch.no_grad()
def answer_bits(subject: Subject, docs: Sequence[tasks.Document], pattern: Pattern) -> list[float]:
    """Teacher-forced bits per answer byte of each document (documents of one token count run
    in one batch)."""
    encoded = [subject.encode(d.text) for d in docs]
    out: list[float] = [0.0] * len(docs)
    groups: dict[int, list[int]] = {}
    for i, (ids, _) in enumerate(encoded):
        groups.setdefault(ids.numel(), []).append(i)
    for idx in groups.values():
        ids = torch.stack([encoded[i][0] for i in idx])  # [b, T]
        device = _device(subject)
        logp = torch.log_softmax(subject.logits(ids[:, :-1].to(device), pattern).double(), dim=-1)  # [b, T-1, V]
        nll = -logp.gather(-1, ids[:, 1:, None].to(device))[..., 0].cpu()  # [b, T-1]
        for row, i in enumerate(idx):
            doc = docs[i]
            take = answer_tokens(encoded[i][1], doc.answer[0])
            out[i] = float(nll[row][take].sum()) / math.log(2) / (doc.answer[1] - doc.answer[0])
    return out


def _device(subject: Subject) -> torch.device:
    model = getattr(subject, "model", None)
    try:
        return next(model.parameters()).device
    except (AttributeError, StopIteration):
        return torch.device("cpu")


def exact_match(subject: Subject, doc: tasks.Document, pattern: Pattern,
                cache: bool | None = None) -> tuple[bool, bytes]:
    """Whether greedy decoding reproduces the answer, and the bytes it produced."""
    with torch.inference_mode():
        out = subject.greedy(doc.prompt, len(doc.expected), pattern, cache)
    return out[: len(doc.expected)] == doc.expected, out


@dataclasses.dataclass
class Cell:
    """One cell of the grid: ``samples`` documents of a task at one length and depth, under one pattern."""

    task: str
    pattern: str
    length: int
    depth: float
    samples: int
    correct: int
    accuracy: float
    low: float  # 95 % Wilson interval of the accuracy
    high: float
    answer_bits: float  # mean teacher-forced bits per answer byte
    chance_bits: float  # log2(alphabet): a uniform guess
    distance: float  # mean bytes from the needle to the answer
    tokens: float  # mean tokens per document
    cached: bool  # greedy decoding ran through the KV cache

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def check_grid(task: str, lengths: Sequence[int], depths: Sequence[float], samples: int, style: str,
               size: int | None = None) -> None:
    """ValueError for an unknown task, a depth outside [0, 100], a length too short for the
    needle or a sample count that is not positive: before any model loads."""
    tasks.check_task(task)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples <= 0:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    for depth in depths:
        tasks.check_depth(depth)
    need = tasks.minimum_length(task, style, size)
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
    progress: bool = False,
) -> list[Cell]:
    """The grid length x depth x pattern for ``task`` (evaluation split of the needles)."""
    from .progress import bar
    from .sample import use_cache

    check_grid(task, lengths, depths, samples, subject.style, size)
    pats = [subject.pattern(p) for p in patterns]
    rows: list[Cell] = []
    model = getattr(subject, "model", None)
    with eval_mode(model) if model is not None else nullcontext(), \
            bar(len(lengths) * len(depths) * len(pats), f"retrieval {task}", enabled=progress, unit="cell") as b:
        for length in lengths:
            for depth in depths:
                docs = tasks.documents(task, length, depth, samples, haystack=haystack, seed=seed,
                                       style=subject.style, size=size)
                tokens = sum(subject.encode(d.text)[0].numel() for d in docs) / len(docs)
                for pat in pats:
                    bits = answer_bits(subject, docs, pat)
                    cached = subject.style == "bytes" and use_cache(subject.model, subject.kernel, cache, pat)
                    hits = sum(exact_match(subject, d, pat, cached)[0] for d in docs)
                    low, high = wilson(hits, len(docs))
                    rows.append(Cell(task, pat.spec, length, float(depth), len(docs), hits, hits / len(docs), low,
                                     high, sum(bits) / len(bits), tasks.chance_bits(docs[0]),
                                     sum(d.distance for d in docs) / len(docs), tokens, cached))
                    b.advance(1, acc=hits / len(docs))
    return rows


def summary(rows: Sequence[Cell]) -> list[dict]:
    """Accuracy per (pattern, length) over all depths: the lines of the accuracy-vs-length plot."""
    out: dict[tuple[str, int], list[Cell]] = {}
    for r in rows:
        out.setdefault((r.pattern, r.length), []).append(r)
    result = []
    for (pattern, length), cells in out.items():
        n = sum(c.samples for c in cells)
        k = sum(c.correct for c in cells)
        low, high = wilson(k, n)
        result.append({"pattern": pattern, "length": length, "samples": n, "correct": k, "accuracy": k / n,
                       "low": low, "high": high,
                       "answer_bits": sum(c.answer_bits * c.samples for c in cells) / n})
    return result


# -- the study's "use of context" table ----------------------------------------------------------------
@dataclasses.dataclass
class ContextRow:
    """One configuration at one multiple of its training length: retrieval beside bpb."""

    config: str  # the run's label (scheme, method)
    pattern: str
    multiple: int  # length / training length
    length: int
    accuracy: float  # exact match over all depths
    low: float  # 95 % Wilson interval
    high: float
    answer_bits: float
    bpb: float | None  # bits per byte of the run's validation documents at this length and pattern

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def use_of_context(
    targets: dict[str, str],
    *,
    task: str = "copy",
    multiples: Sequence[int] = (1, 2, 4, 8, 16),
    patterns: Sequence[str] = ("causal", "window", "bca"),
    depths: Sequence[float] = DEFAULT_DEPTHS,
    samples: int = 10,
    seed: int = 0,
    bpb: bool = True,
    max_docs: int | None = 4,
    progress: bool = False,
) -> list[ContextRow]:
    """For each labelled run (``{"rope+mix": "runs/rope-mix", ...}``; a run may be scored under
    another scheme with ``"runs/rope-mix@rope:scaling=yarn,factor=16"``): exact match and answer
    bits at every multiple of its training length under every pattern, and beside each its bpb at
    that length (``lexkit.evaluate``, the run's validation documents, ``max_docs`` of them)."""
    from .evaluate import eval_documents, evaluate

    rows: list[ContextRow] = []
    for label, target in targets.items():
        path, _, scheme = target.partition("@")
        subject, info = open_target(path, scheme=scheme or None)
        lengths = [info["train_len"] * m for m in multiples]
        docs, _ = eval_documents(info["data"] or "stdlib", own=True)
        cells = score(subject, task, lengths, depths=depths, samples=samples, patterns=patterns,
                      haystack=tasks.Haystack.from_documents(docs), seed=seed, progress=progress)
        bits = {}
        if bpb:
            report = evaluate(subject.model, docs, lengths, list(patterns), max_docs=max_docs,
                              train_len=info["train_len"])
            bits = {(r["pattern"], r["length"]): r["bpb"] for r in report["results"]}
        for line in summary(cells):
            rows.append(ContextRow(label, line["pattern"], line["length"] // info["train_len"], line["length"],
                                   line["accuracy"], line["low"], line["high"], line["answer_bits"],
                                   bits.get((line["pattern"], line["length"]))))
    return rows
