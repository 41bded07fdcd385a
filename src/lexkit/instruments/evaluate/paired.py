"""Use of context, paired: bpb on the same bytes at L and at K x L with the window's start held fixed.

The paper's protocol (:mod:`lexkit.evaluate`, ``start="bos"``) scores every length on the same
bytes, but not under the same start condition: a document's first window opens on its BOS, so at
the longest length every window holds BOS at key 0 while at the shortest one in K does. A model
for which key 0 means something (a global layer that sinks there; a retrieval mix that puts BOS
first in every task document, :class:`lexkit.data.mix.MixedStream`) is then measured on how it takes a
BOS at key 0, not on how it uses context (the hunt's A3, seed 0: 2.539 bpb at 16x with BOS at key
0, 1.858 on the same bytes without, 2.190 at 1x).

This measure holds everything but the context fixed:

* **the same bytes**: bytes 1..M of every document of at least M + 1 bytes, M the longest length,
  scored once at each length (non-overlapping windows, :func:`lexkit.evaluate.windows`);
* **the same start**: every window at every length opens on a byte of the document
  (``start="text"``), as a plain training window (:class:`lexkit.data.corpus.Stream`) does;
* **the same documents** on both sides of the ratio, so the sample is the documents: ``ratio`` =
  mean bpb at K x L / mean bpb at L over the documents (every document scores M bytes at each
  length, so it is also the ratio of the pooled bpb), with the 95 % interval of a ratio of paired
  means (:func:`lexkit.core.stats.ratio_interval`) over the documents, not the bytes.

A ratio below 1 is a model that predicts the same bytes better with more context (the paper's "the
ideal situation"); about 1 is one that survives (a window of L keeps it at 1 by never looking
further); above 1 is one that is hurt by the longer context.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from ...attention import Pattern
from .measure import evaluate, paired_rows
from .rows import PairedRow

#: documents at most (each of at least M + 1 bytes): the stdlib's validation split has 74 at M = 1,024, over which
#: the interval on make study's runs is +-0.01 to 0.03 (docs/evaluation.md, the measured widths)
DOCUMENTS = 96


def paired_context(model: nn.Module, documents: Sequence[bytes], length: int, longer: Sequence[int],
                   pattern: str | Pattern | Sequence[str | Pattern] = "causal", *,
                   max_docs: int | None = DOCUMENTS, kernel: str = "auto", train_len: int | None = None,
                   progress: bool = False) -> list[PairedRow]:
    """One :class:`~lexkit.instruments.evaluate.rows.PairedRow` per (longer length, pattern): bpb of the same bytes at
    ``length`` and at each of ``longer``, every window opening on a byte of its document (module
    docstring), with the ratio's interval over documents. ``max_docs`` caps the documents (None: every
    one long enough); the rest as :func:`lexkit.evaluate.evaluate`."""
    lengths = sorted({length, *longer})
    if lengths[0] != length:
        raise ValueError(f"a paired comparison measures longer lengths against {length}, got {min(longer)}")
    report = evaluate(model, documents, lengths, pattern, max_docs=max_docs, kernel=kernel, train_len=train_len,
                      progress=progress, start="text", per_document=True)
    return paired_rows(report)
