"""Scoring a model on retrieval documents, each under an attention pattern, two measures per document:

* **exact match**: greedy decoding from the prompt (everything before the answer) reproduces the
  answer's bytes (a tokenizer model: its decoded text starts with them, LongLoRA's rule). A
  byte model decodes through its KV cache where the pattern allows it
  (:func:`lexkit.attention.cache.use_cache`), token for token what the uncached decoding gives
  (:func:`exact_match`); or, for a byte model, the teacher-forced argmax right at every answer token
  (:func:`answer_scores`; :func:`other_candidates` for the answer's other candidates).
* **answer bits**: teacher-forced bits per answer byte, the negative log2-likelihood of the
  tokens that cover the answer divided by its bytes (:func:`answer_bits`). Chance for a uniform guess
  is log2(alphabet) per byte (``tasks.chance_bits``); a model that copies scores near 0.

Teacher-forced documents of one token count run together, in batches whose logits and attention
scores fit a budget (:func:`rows_per_batch`). Scoring uses the subject's model (logits under a
pattern and a kernel), ``encode`` (text -> tokens and the bytes each covers) and ``continue_text``
(greedy decoding, through the KV cache where the pattern allows it).

Invariant (what a pattern can see): a needle whose value ends more than ``n_layers x (reach-1)``
tokens before the answer's first predicting position cannot change the answer's logits under
``window``/``bca`` (each layer moves information back by less than the pattern's reach), except
through the first K keys under ``sinks:W,K``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from ... import tasks
from ...attention import Pattern
from ..subject import Subject


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
