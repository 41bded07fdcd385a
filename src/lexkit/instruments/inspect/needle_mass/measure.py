"""The needle mass of ``lexkit inspect TARGET --needle-mass``: where a layer's attention goes when the
answer is due (one of the two instruments that tell retrieval failures apart; the other is
:mod:`lexkit.instruments.inspect.bytes`).

**Needle mass** (:func:`needle_mass`, :func:`needle_mass_run`), of a run or an ``hf:`` model whose
attention runs through lexkit's kernels. For each retrieval document (:mod:`lexkit.tasks`, the
evaluation split, as ``lexkit retrieval`` builds them) the model reads the prompt up to the query
q* whose logits predict the answer's first token, and a score hook (:class:`AnswerProbe`, on the
chunked kernel) keeps that query's attention p over its visible keys, per layer and head:

* mass M = sum_{k in N} p_k, N the key positions of the needle's value (the tokens covering its
  bytes; a byte model's text byte j is input index j + 1, BOS being 0);
* entropy H = -sum_k p_k ln p_k (nats; ln n for uniform attention over n keys);
* the top key argmax_k p_k and its distance from N (0 inside it).

(With a learned sink logit per head, GPT-OSS's, p sums to less than 1 over the keys: M and H are
then of the keys' share, as the hook sees them.)

Averaged over documents per (pattern, length, layer): M over heads (``mass``) and the best head's
(``mass_max``, the head of largest mean M), H over heads and the best head's, the fraction of
documents whose best head's top key is on the needle, its mean distance, and the references of
uniform attention, |N| / n and ln n. Where retrieval fails at a length, the two failures read
differently: **dilution** (the best head's top key stays on the needle while its mass falls
toward |N| / n and H rises toward ln n) against a **wrong match** (the top key leaves the needle,
at a distance, with H low: the mass concentrates elsewhere).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import ClassVar

import torch
from torch import Tensor

from .... import tasks
from ....attention import Pattern, layer_patterns
from ....core.device import eval_mode
from ....core.version import header
from ....documents.report import key
from ....documents.rows import Row
from ....layouts import scope_of
from ... import identity
from ...resolution.formula import entropy
from ...retrieval import grid, scoring
from ...retrieval.rows import NeedleReport

#: the report of ``lexkit inspect TARGET --needle-mass --json`` and its layout's version (lexkit.core.version.header;
#: 4: a row's local/global is its ``scope``, ``kind`` in 3 and before, which :meth:`NeedleMassRow.from_json` reads)
MASS_REPORT, REPORT_VERSION = "lexkit.inspect.needle_mass", 4
#: the defaults: depths (percent) and documents per (length, depth)
DEPTHS = (0.0, 25.0, 50.0, 75.0, 100.0)
SAMPLES = 4


# -- the formulas -----------------------------------------------------------------------------------
def needle_mass_of(probs: Tensor, needle: Tensor) -> Tensor:
    """M = sum_{k in N} p_k over the last dimension (keys): ``probs`` [..., n_k], ``needle`` a bool
    mask of the needle's keys broadcastable to it -> [...]."""
    return (probs * needle.to(probs.dtype)).sum(-1)


def span_distance(index: Tensor, low: Tensor, high: Tensor) -> Tensor:
    """How far key ``index`` lies outside the span ``low..high`` (inclusive): 0 inside it, else the
    distance to its nearest end (all int64, broadcast)."""
    return (low - index).clamp_min(0) + (index - high).clamp_min(0)


# -- needle mass ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class NeedleMassRow(Row):
    """One (pattern, length, layer) of the needle-mass instrument, averaged over its documents (see
    the module docstring): ``scope`` local or global (the layer's pattern has a finite reach or not:
    :func:`lexkit.layouts.scope_of`; ``kind`` in a report before version 4);
    ``visible`` keys and ``needle`` keys (on the needle, visible) of the answer's query and
    ``distance`` (tokens from the needle's start to it); ``uniform`` = needle / visible and
    ``uniform_entropy`` = ln(visible), what uniform attention gives; ``mass``/``entropy`` over heads,
    ``mass_max``/``head_entropy`` of the best ``head``, whose top key is on the needle in
    ``top_on_needle`` of the documents, ``top_distance`` tokens from it on average. ``weights``: what
    the map is (:func:`weight_maps`): ``softmax``; ``differential``, one map per head *pair*,
    softmax1 - λ·softmax2 (the map the layer mixes values with: mass can be negative, the top key is
    its largest entry, entropy is over |map| / its sum); ``stick-breaking``, weights that sum to at most
    1 (entropy over them as they are, not a distribution's)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("weights",)

    pattern: str
    length: int
    layer: int
    scope: str
    documents: int
    visible: float
    needle: float
    distance: float
    uniform: float
    mass: float
    mass_max: float
    head: int
    uniform_entropy: float
    entropy: float
    head_entropy: float
    top_on_needle: float
    top_distance: float
    mass_per_head: list[float]
    entropy_per_head: list[float]
    weights: str | None = None  # None: softmax (rows written before the field)

    @classmethod
    def from_json(cls, data: dict) -> NeedleMassRow:
        """The row of any version's JSON: a report before version 4 names the scope ``kind``."""
        if "scope" not in data and "kind" in data:
            data = {**data, "scope": data["kind"]}
        return super().from_json(data)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class NeedleMassReport(NeedleReport):
    """``lexkit inspect --needle-mass``'s report (:func:`needle_mass_run`): what ran, the grid, its rows."""

    rows: list[dict] = key("one row per pattern, length and layer, over its documents (NeedleMassRow)")


def report_rows(report: dict) -> list[NeedleMassRow]:
    """The rows of a needle-mass report of any version (the one reader its text, CSV and figure use)."""
    return [NeedleMassRow.from_json(r) for r in report["rows"]]


def needle_keys(nbytes: Tensor, span: tuple[int, int], n: int) -> Tensor:
    """bool [n]: which input indices 0 .. n-1 hold a token covering some byte of ``span`` (start, end)
    of the text, ``nbytes`` [T - 1] the bytes each token after the first (BOS) covers."""
    ends = nbytes.cumsum(0)  # bytes up to and including token i + 1
    starts = ends - nbytes
    member = (starts < span[1]) & (ends > span[0]) & (nbytes > 0)  # tokens 1 .. T-1
    out = torch.zeros(n, dtype=torch.bool)
    out[1:n] = member[: n - 1]
    return out


def answer_query(nbytes: Tensor, start: int) -> int:
    """The input index whose logits predict the first token covering byte ``start`` of the text."""
    return int(scoring.answer_tokens(nbytes, start).nonzero()[0])


SOFTMAX, DIFFERENTIAL, STICK_BREAKING = "softmax", "differential", "stick-breaking"


def weight_maps(model) -> list[tuple[str, Callable[[Tensor], Tensor] | None]]:
    """Per layer, what its attention map is and how to read it from the kernel's per-head weights
    ``[b, heads, n_k]``: a differential layer (``+diff``) mixes values with softmax(head 2i) -
    λ·softmax(head 2i+1) per pair (:mod:`lexkit.attention.modifiers.differential`), so its map is
    that difference ``[b, heads / 2, n_k]``, not either component (one can be the subtracted one); a
    stick-breaking layer's weights are the map but sum to at most 1; any other layer's softmax is the
    map as it is. A model without lexkit's layer stack (an hf: model): softmax everywhere."""
    out: list[tuple[str, Callable[[Tensor], Tensor] | None]] = []
    for block in getattr(model, "layer_blocks", None) or [None] * model.cfg.n_layers:  # a loop's passes: one block
        names = {m.name: m for m in getattr(getattr(block, "layer", None), "modifiers", ())}
        if "diff" in names:
            lam = float(block.state(names["diff"]).lam().detach())
            out.append((DIFFERENTIAL, lambda p, lam=lam: p[:, 0::2] - lam * p[:, 1::2]))
        else:
            out.append((STICK_BREAKING if "stickbreak" in names else SOFTMAX, None))
    return out


def signed_entropy(weights: Tensor) -> Tensor:
    """Entropy (nats) of ``|weights|`` normalised over the last axis: a differential map's spread."""
    mass = weights.abs()
    return entropy(mass / mass.sum(-1, keepdim=True).clamp_min(1e-30))


class AnswerProbe:
    """A score hook (``hook(layer, q_idx, k_idx, scores, probs)``) that keeps, per layer, the
    attention of one query ``query`` of a batch: needle mass, entropy and top key [b, maps], and
    the visible keys and visible needle keys [b]. ``needle``: bool [b, n] over the input indices.
    ``maps``: per layer, the map to read from the kernel's weights (:func:`weight_maps`; None: as they
    are)."""

    def __init__(self, layers: int, query: int, needle: Tensor,
                 maps: Sequence[Callable[[Tensor], Tensor] | None] | None = None) -> None:
        self.query, self.needle = query, needle
        self.maps = list(maps) if maps is not None else [None] * layers
        self.records: list[dict[str, Tensor] | None] = [None] * layers

    def __call__(self, layer: int, q_idx: Tensor, k_idx: Tensor, scores: Tensor, probs: Tensor | None) -> None:
        hit = (q_idx == self.query).nonzero()
        if hit.numel() == 0:
            return
        if probs is None:
            raise ValueError("the needle mass needs the attention probabilities; this kernel's hook gives none")
        row = int(hit[0])
        keys = k_idx.cpu()
        p = probs[:, :, row, :].to(torch.float64).cpu()  # [b, h, n_k]
        signed = self.maps[layer] is not None
        if signed:
            p = self.maps[layer](p)  # [b, h / 2, n_k]: a differential layer's map per head pair
        visible = torch.isfinite(scores[:, 0, row, :]).cpu()  # [b, n_k]
        member = self.needle[:, keys]  # [b, n_k]
        self.records[layer] = {
            "mass": needle_mass_of(p, member[:, None, :]), "entropy": signed_entropy(p) if signed else entropy(p),
            "top": keys[p.argmax(-1)],
            "visible": visible.sum(-1), "needle": (visible & member).sum(-1),
        }


def answer_attention(subject, docs: Sequence[tasks.Document], pattern: Pattern) -> list[list[dict]]:
    """Per document, per layer: the answer query's attention (:class:`AnswerProbe`'s records, one
    document each, with its needle span ``low``/``high`` and ``distance``). Documents whose queries
    share an index run together, in batches within :func:`lexkit.retrieval.rows_per_batch`."""
    model = subject.model
    layers = model.cfg.n_layers
    device = next(model.parameters()).device
    vocab = getattr(model.cfg, "vocab_size", None) or scoring.UNKNOWN_VOCAB
    prepared = []
    for doc in docs:
        ids, nbytes = subject.encode(doc.text)
        query = answer_query(nbytes, doc.answer[0])
        member = needle_keys(nbytes, doc.needle, query + 1)
        if not bool(member.any()):
            raise ValueError(f"a {doc.task} document's needle covers no token before its answer")
        prepared.append((ids[: query + 1], query, member))
    groups: dict[int, list[int]] = {}
    for i, (_, query, _) in enumerate(prepared):
        groups.setdefault(query, []).append(i)
    out: list[list[dict]] = [[] for _ in docs]
    for query, members in groups.items():
        size = scoring.rows_per_batch(query + 1, vocab)
        for start in range(0, len(members), size):
            idx = members[start : start + size]
            ids = torch.stack([prepared[i][0] for i in idx])  # [b, query + 1]
            needle = torch.stack([prepared[i][2] for i in idx])  # [b, query + 1]
            probe = AnswerProbe(layers, query, needle, [read for _, read in weight_maps(model)])
            with eval_mode(model), torch.no_grad():
                model(ids.to(device), pattern=pattern, kernel="chunked", hook=probe)
            if any(r is None for r in probe.records):
                raise ValueError("the score hook did not see the answer's query in every layer")
            for row, i in enumerate(idx):
                at = needle[row].nonzero()[:, 0]
                low, high = int(at[0]), int(at[-1])
                out[i] = [{**{k: v[row] for k, v in record.items()}, "low": low, "high": high,
                           "distance": query - low} for record in probe.records]
    return out


def mass_rows(per_doc: Sequence[Sequence[dict]], pattern: Pattern, length: int, scopes: Sequence[str],
              weights: Sequence[str] | None = None) -> list[NeedleMassRow]:
    """One :class:`NeedleMassRow` per layer from the documents' records (:func:`answer_attention`),
    ``scopes`` each layer's (:func:`layer_scopes`); ``weights``: what each layer's map is
    (:func:`weight_maps`; None: softmax everywhere)."""
    rows = []
    weights = list(weights) if weights is not None else [SOFTMAX] * len(scopes)
    for layer, scope in enumerate(scopes):
        recs = [doc[layer] for doc in per_doc]
        mass = torch.stack([r["mass"] for r in recs])  # [docs, h]
        ent = torch.stack([r["entropy"] for r in recs])  # [docs, h]
        visible = torch.stack([r["visible"] for r in recs]).to(torch.float64)  # [docs]
        needle = torch.stack([r["needle"] for r in recs]).to(torch.float64)
        per_head = mass.mean(0)  # [h]
        head = int(per_head.argmax())
        top = torch.stack([r["top"][head] for r in recs])  # [docs]
        low = torch.tensor([r["low"] for r in recs])
        high = torch.tensor([r["high"] for r in recs])
        away = span_distance(top, low, high).to(torch.float64)
        rows.append(NeedleMassRow(
            pattern.spec, length, layer, scope, len(recs), float(visible.mean()), float(needle.mean()),
            sum(r["distance"] for r in recs) / len(recs), float((needle / visible).mean()), float(mass.mean()),
            float(per_head[head]), head, float(visible.log().mean()), float(ent.mean()), float(ent[:, head].mean()),
            float((away == 0).to(torch.float64).mean()), float(away.mean()), per_head.tolist(), ent.mean(0).tolist(),
            None if weights[layer] == SOFTMAX else weights[layer]))
    return rows


def layer_scopes(model, pattern: Pattern) -> list[str]:
    """``global`` or ``local`` per layer under ``pattern`` (a finite reach is local)."""
    return [scope_of(p) for p in layer_patterns(pattern, model.cfg.n_layers)]


def needle_mass(subject, task: str, lengths: Sequence[int], *, depths: Sequence[float] = DEPTHS,
                samples: int = SAMPLES, patterns: Sequence[str | Pattern] = ("causal",),
                haystack: tasks.Haystack | None = None, seed: int = 0, size: int | None = None,
                format: str | None = None, progress: bool = False) -> list[NeedleMassRow]:
    """The needle-mass rows of ``subject`` (a loaded run or hf: model, :func:`lexkit.load`) for
    ``task`` on ``samples`` documents per (length, depth), every depth of a length pooled, under each
    pattern: one row per (pattern, length, layer). The documents are ``lexkit retrieval``'s
    (:func:`lexkit.retrieval.cell_documents`, evaluation split; lengths in the subject's unit)."""
    from ....core.progress import bar

    style = grid.style(subject)
    grid.check_grid(task, lengths, depths, samples, style, size, format)
    refusal = getattr(subject.model, "hook_refusal", lambda: None)()
    if refusal is not None:
        raise ValueError(refusal)
    lengths = grid.unique("lengths", lengths, lengths)
    depths = grid.unique("depths", depths, [float(d) for d in depths])
    if isinstance(patterns, (str, Pattern)):
        raise ValueError(f"patterns must be a list, e.g. ['causal'], not {patterns!r}")
    resolved = [subject.model.pattern(p) for p in patterns]
    pats = grid.unique("patterns", resolved, [p.spec for p in resolved])
    rows: list[NeedleMassRow] = []
    with bar(len(lengths) * len(pats), f"needle mass {task}", enabled=progress, unit="cell") as b:
        for length in lengths:
            docs = [d for depth in depths for d in grid.cell_documents(
                subject, task, length, depth, samples, haystack=haystack, seed=seed, size=size, format=format)]
            for pat in pats:
                rows += mass_rows(answer_attention(subject, docs, pat), pat, length, layer_scopes(subject.model, pat),
                                  [what for what, _ in weight_maps(subject.model)])
                b.advance(1)
    return rows


def needle_mass_run(target, task: str = "copy", *, lengths: Sequence[int] | None = None,
                    depths: Sequence[float] = DEPTHS, samples: int = SAMPLES, size: int | None = None,
                    seed: int = 0, patterns: Sequence[str] = ("causal",), data: str | None = None,
                    format: str | None = None, device: str = "cpu", progress: bool = False,
                    add: str | None = None) -> NeedleMassReport:
    """``lexkit inspect TARGET --needle-mass``: load a run or ``hf:PATH`` (or take a loaded subject),
    measure :func:`needle_mass` (default lengths: the training length x 1-16 that hold the needle)
    with haystacks from its documents (a run's validation split, or ``data``) and return its report, a
    :class:`NeedleMassReport`. ``add``: stateless layer modifiers added to a run's layers
    (:func:`lexkit.instruments.subject.load`). Everything checkable without the model is checked before it
    loads."""
    from ....layouts import check_pattern
    from ...subject import load

    loaded = hasattr(target, "documents")
    style = grid.style(target) if loaded else "standard" if str(target).startswith("hf:") else "bytes"
    grid.check_grid(task, lengths or [], depths, samples, style, size, format)
    task = tasks.canonical(task)
    for spec in patterns:
        if isinstance(spec, str):
            check_pattern(spec)
    if loaded and add is not None:
        raise ValueError("--add applies when the run is loaded: give its directory, not a loaded subject")
    subject = target if loaded else load(target, device=device, add=add)
    style = grid.style(subject)
    if lengths is None:
        lengths = grid.needle_lengths(subject, task, size, subject.source, format)
    haystack = corpus = None
    if task == "copy" or style == "bytes":
        docs, described = subject.documents(data)
        haystack, corpus = tasks.Haystack.from_documents(docs), described["spec"]
    rows = needle_mass(subject, task, lengths, depths=depths, samples=samples, patterns=patterns, haystack=haystack,
                       seed=seed, size=size, format=format, progress=progress)
    info = subject.describe()
    return NeedleMassReport(
        **header(MASS_REPORT, REPORT_VERSION), target=subject.source,
        **identity(info), train_len=info["train_len"], task=task,
        **({"format": format} if format is not None else {}), style=style,
        unit=grid.unit(subject), size=size, seed=seed, haystack=corpus, samples=samples,
        depths=[float(d) for d in dict.fromkeys(depths)], lengths=list(dict.fromkeys(r.length for r in rows)),
        patterns=list(dict.fromkeys(r.pattern for r in rows)), rows=[r.to_json() for r in rows],
    )
