"""Instruments that tell retrieval failures apart (``lexkit inspect``): what training showed each byte and
where its embedding row went, and where a layer's attention goes when the answer is due.

**The byte table** (:func:`embedding_run`), of a run directory. Per token t (the byte values 0..255 and
BOS, 256):

* ``corpus``: its occurrences in the run's training split as the trainer streams it (every training
  document, BOS before each: :func:`lexkit.data.tokens_of`), the corpus's text alone;
* ``trained``: the times it stood in a training window (as input or target: the ``length + 1``
  tokens of each row) over the steps the run trained, replayed batch by batch from the run's seed
  (:meth:`lexkit.data.Stream.batch`; under a ``--mix``, :class:`lexkit.mix.MixedStream`, whose
  task documents replace some windows); ``mix``: how many of those stood in the mix's task
  documents (their haystack included). A fine-tune's (``--init``) parent is not replayed.
* ``norm`` = ||E_t|| and ``cosine`` = cos(E_t, mu_U) = E_t . mu_U / (||E_t|| ||mu_U||), where
  mu_U = (1/|U|) sum_{u in U} E_u is the mean row of the tokens U training never showed
  (``trained == 0``; with ``unseen_by="corpus"``, and for a run that cannot be replayed, the
  tokens the corpus's text never holds, ``corpus == 0``, which a mix may still show: the
  induction mix draws its markers from almost every byte). With tied weights
  (lexkit's default) E is the input and output table at once; with an untied head (a separate
  ``head.weight``) ``out_norm`` and ``out_cosine`` are the same of the output rows, against
  their own unseen mean.

Rare and unseen tokens of a tied, weight-decayed table drift toward one shared direction
("To See the Unseen", arXiv 2604.21632; Magikarp, Land & Bartolo 2024): a seen byte with a high
cosine to mu_U (``^`` at 0.68 on a HWFA run, docs/inspect.md) is read much as the bytes the model
never saw. The summary counts U and lists the seen tokens of highest cosine.

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
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor

from . import retrieval, tasks
from .attention import Pattern, layer_patterns
from .data import Corpus, Stream, absolute_spec, same_corpus, tokens_of
from .device import eval_mode
from .layouts import kind_of
from .model import BOS
from .resolution import entropy
from .rows import Row
from .version import header

#: Version of the JSON documents :func:`embedding_run` and :func:`needle_mass_run` write.
#: the two reports of ``lexkit inspect --json`` and their layout's version (lexkit.version.header)
BYTES_REPORT, MASS_REPORT, REPORT_VERSION = "lexkit.inspect.bytes", "lexkit.inspect.needle_mass", 2
#: the seen tokens of highest cosine the summary lists
COLLAPSED = 10
#: the needle-mass defaults: depths (percent) and documents per (length, depth)
DEPTHS = (0.0, 25.0, 50.0, 75.0, 100.0)
SAMPLES = 4
#: tokens counted per bincount when a corpus's stream is tallied
_TALLY = 1 << 22


# -- the formulas -----------------------------------------------------------------------------------
def cosine_to_mean(rows: Tensor, members: Tensor) -> Tensor | None:
    """cos(r_t, mu) for every row r_t of ``rows`` [V, d], mu the mean of the rows where ``members``
    [V] is True: float64 [V]; None when no row is a member or mu is 0. A zero row has cosine 0."""
    if not bool(members.any()):
        return None
    r = rows.detach().to(torch.float64).cpu()
    mu = r[members.cpu()].mean(0)  # [d]
    if float(mu.norm()) == 0.0:
        return None
    return (r @ mu) / (r.norm(dim=-1) * mu.norm()).clamp_min(torch.finfo(torch.float64).tiny)


def row_norms(rows: Tensor) -> Tensor:
    """||r_t|| of every row: float64 [V]."""
    return rows.detach().to(torch.float64).cpu().norm(dim=-1)


def needle_mass_of(probs: Tensor, needle: Tensor) -> Tensor:
    """M = sum_{k in N} p_k over the last dimension (keys): ``probs`` [..., n_k], ``needle`` a bool
    mask of the needle's keys broadcastable to it -> [...]."""
    return (probs * needle.to(probs.dtype)).sum(-1)


def span_distance(index: Tensor, low: Tensor, high: Tensor) -> Tensor:
    """How far key ``index`` lies outside the span ``low..high`` (inclusive): 0 inside it, else the
    distance to its nearest end (all int64, broadcast)."""
    return (low - index).clamp_min(0) + (index - high).clamp_min(0)


def byte_label(token: int) -> str:
    """A token as a table shows it: ``a``, ``^``, ``\\n``, ``\\x80``, ``space``, ``BOS``."""
    if token == BOS:
        return "BOS"
    if token == 32:
        return "space"
    return repr(bytes([token]))[2:-1]


# -- the byte table ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ByteRow(Row):
    """One token of the byte table (see the module docstring). ``trained``/``mix`` are absent when
    the run cannot be replayed / trained without a mix; ``out_*`` when the head is tied."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("trained", "mix", "out_norm", "out_cosine")

    token: int
    label: str
    corpus: int
    seen: bool
    norm: float
    cosine: float | None
    trained: int | None = None
    mix: int | None = None
    out_norm: float | None = None
    out_cosine: float | None = None


def stream_counts(tokens: Tensor) -> Tensor:
    """int64 [257]: each token's count in a token stream (int16 [total]: the training split as the
    trainer reads it, :func:`lexkit.data.tokens_of`), tallied in pieces."""
    out = np.zeros(BOS + 1, dtype=np.int64)
    flat = tokens.numpy()
    for start in range(0, flat.size, _TALLY):
        out += np.bincount(flat[start : start + _TALLY], minlength=BOS + 1)[: BOS + 1]
    return torch.from_numpy(out)


def training_counts(stream: Stream, steps: int, batch: int, length: int, seed: int,
                    progress=None) -> tuple[Tensor, Tensor | None]:
    """(int64 [257] tokens of every training window of steps 0 .. ``steps`` - 1, int64 [257] of
    those in task documents or None without a mix): the batches replayed exactly as the trainer
    draws them (:meth:`Stream.batch`, one global batch per step). ``progress``: ``advance(n)``."""
    counts = torch.zeros(BOS + 1, dtype=torch.int64)
    task_rows = getattr(stream, "task_rows", None)  # a MixedStream's
    mixed = torch.zeros(BOS + 1, dtype=torch.int64) if task_rows is not None else None
    for step in range(steps):
        x, y = stream.batch(step, batch, length, seed)  # [batch, length] each
        windows = torch.cat((x, y[:, -1:]), dim=1)  # [batch, length + 1]: inputs and the last target
        counts += torch.bincount(windows.flatten(), minlength=BOS + 1)[: BOS + 1]
        if mixed is not None:
            rows = list(task_rows(step, batch, seed))
            if rows:
                mixed += torch.bincount(windows[rows].flatten(), minlength=BOS + 1)[: BOS + 1]
        if progress is not None:
            progress.advance(1)
    return counts, mixed


#: what makes a token "unseen" (the set U whose mean row the cosines are taken to): never in a replayed
#: training window, or never in the corpus's text (a mix may show bytes the corpus never holds)
UNSEEN_BY = ("training", "corpus")


def check_unseen_by(unseen_by: str) -> None:
    """ValueError when ``unseen_by`` is not one of :data:`UNSEEN_BY`."""
    if unseen_by not in UNSEEN_BY:
        raise ValueError(f"--unseen-by {unseen_by!r}: give one of {', '.join(UNSEEN_BY)}")


def byte_rows(embedding: Tensor, head: Tensor | None, corpus: Tensor, trained: Tensor | None = None,
              mix: Tensor | None = None, unseen_by: str = "training") -> list[ByteRow]:
    """The byte table of an embedding [V, d] (V = 257) and, when untied, an output head [V, d]
    (None: tied): a token is seen when ``trained`` > 0 (``unseen_by="training"`` and ``trained``
    given; else when ``corpus`` > 0), and each row's cosine is to the mean row of the unseen ones
    (None: every token seen)."""
    check_unseen_by(unseen_by)
    shown = trained if trained is not None and unseen_by == "training" else corpus
    seen = shown > 0
    cos_in = cosine_to_mean(embedding, ~seen)
    norm_in = row_norms(embedding)
    cos_out = cosine_to_mean(head, ~seen) if head is not None else None
    norm_out = row_norms(head) if head is not None else None
    rows = []
    for t in range(embedding.shape[0]):
        rows.append(ByteRow(
            t, byte_label(t), int(corpus[t]), bool(seen[t]), float(norm_in[t]),
            None if cos_in is None else float(cos_in[t]),
            None if trained is None else int(trained[t]), None if mix is None else int(mix[t]),
            None if norm_out is None else float(norm_out[t]),
            None if cos_out is None else float(cos_out[t])))
    return rows


def summarize(rows: Sequence[ByteRow], top: int = COLLAPSED, unseen_by: str = "training") -> dict:
    """The table at a glance: how many tokens are unseen (``unseen_by``, as :func:`byte_rows` took
    it) and which, how many the corpus holds but the replayed windows never drew (None: not
    replayed), the ``top`` seen tokens shown least often (``rarest``: by ``trained`` when the run
    was replayed), the mean cosine of the unseen rows to their own mean (how tight their cluster
    is) and of the seen rows, and the ``top`` seen tokens of highest cosine (``collapsed``); the
    same of the output rows when the head is untied."""
    unseen = [r for r in rows if not r.seen]
    seen = [r for r in rows if r.seen]
    replayed = bool(rows) and rows[0].trained is not None
    by = "training windows" if replayed and unseen_by == "training" else "corpus"
    count = (lambda r: r.trained) if replayed else (lambda r: r.corpus)
    out = {
        "unseen": len(unseen),
        "unseen_tokens": [r.label for r in unseen],
        "unseen_by": by,
        "in_corpus_never_trained": sum(r.corpus > 0 and not r.trained for r in rows) if replayed else None,
        "rarest": [_brief(r) for r in sorted(seen, key=lambda r: (count(r), r.token))[:top]],
    }
    for prefix, key in (("", "cosine"), ("out_", "out_cosine")):
        if not rows or getattr(rows[0], key) is None:
            continue
        out[f"{prefix}unseen_cohesion"] = _mean([getattr(r, key) for r in unseen])
        out[f"{prefix}seen_cosine"] = _mean([getattr(r, key) for r in seen])
        ranked = sorted(seen, key=lambda r: (-getattr(r, key), r.token))[:top]
        out[f"{prefix}collapsed"] = [{**_brief(r), "cosine": getattr(r, key)} for r in ranked]
    return out


def _brief(row: ByteRow) -> dict:
    return {"token": row.token, "label": row.label, "corpus": row.corpus,
            **({"trained": row.trained} if row.trained is not None else {})}


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def tied(model) -> bool:
    """Whether the model's output head is its embedding table (the same tensor)."""
    return model.head.weight.data_ptr() == model.embed.weight.data_ptr()


def run_corpus(subject, data: str | None = None) -> tuple[Corpus, dict]:
    """A run's training corpus (where its config.json recorded it, or ``data``: the corpus at a new
    place) and a description; a corpus whose fingerprint differs from the recorded one is a warning
    (its counts are not those of the text the run trained on)."""
    from .runs.lifecycle import run_corpus as load_run_corpus

    config = subject.config
    corpus = load_run_corpus(config, Path(subject.source), None if data is None else absolute_spec(data))
    recorded = (config.get("data") or {}).get("fingerprint")
    described = describe_corpus(corpus)
    if recorded and not same_corpus(recorded, corpus.fingerprint):
        described["differs_from_run"] = True
        warnings.warn(f"the corpus {corpus.spec!r} here is not the one {subject.source} trained on (sha256 "
                      f"{recorded.get('sha256')} recorded, {corpus.fingerprint.get('sha256')} here): its counts "
                      "are of other text", RuntimeWarning, stacklevel=2)
    return corpus, described


def describe_corpus(corpus: Corpus) -> dict:
    """What the byte table says of the corpus it counted: its spec, fingerprint, training documents and bytes."""
    return {"spec": corpus.spec, "fingerprint": corpus.fingerprint, "documents": len(corpus.train),
            "bytes": sum(len(d) for d in corpus.train)}


def replayable(subject) -> tuple[dict | None, int]:
    """(the run's training settings, the steps its weights trained) when its batches can be replayed,
    else (None, 0): a run without a ``train`` section or a checkpoint (weights saved by hand)."""
    from .runs import trainer_state

    train = subject.config.get("train")
    state = trainer_state(subject.source) if train else None
    if not train or state is None:
        return None, 0
    return train, int(state.get("step", 0))


def embedding_run(target, *, data: str | None = None, corpus: Corpus | None = None, steps: int | None = None,
                  top: int = COLLAPSED, unseen_by: str = "training", progress: bool = False) -> dict:
    """``lexkit inspect RUN``: the byte table of a run directory (or a loaded run subject) and its
    summary, as one JSON-ready document. ``data``: the run's corpus at a new place; ``corpus``: the
    corpus itself (a run trained on one built in memory); ``steps``: replay only the first ``steps``
    training steps (default: every step its weights trained); ``unseen_by``: what makes a token
    unseen (:data:`UNSEEN_BY`; a run that cannot be replayed: the corpus)."""
    from . import checks
    from .mix import MixedStream
    from .progress import bar
    from .subject import RunSubject, load

    subject = target if hasattr(target, "documents") else load(target)
    if not isinstance(subject, RunSubject):
        raise ValueError(f"{subject.source}: the byte table is of a lexkit run (an hf: model's tokens are not "
                         "bytes); --needle-mass measures attention of either")
    checks.number("--steps", steps)
    checks.number("--top", top)
    check_unseen_by(unseen_by)
    train, trained_steps = replayable(subject)
    if steps is not None and steps > trained_steps:
        raise ValueError(f"--steps {steps}: {subject.source} trained "
                         + (f"{trained_steps} steps" if train else "no replayable steps (no checkpoint)"))
    if corpus is None:
        corpus, described = run_corpus(subject, data)
    else:
        described = describe_corpus(corpus)
    tokens = tokens_of(corpus.train)
    counts = stream_counts(tokens)
    trained = mixed = None
    training = None
    model = subject.model
    if train is not None:
        length = int(subject.config["model"]["train_len"])
        mix = train.get("mix") or ""
        stream = MixedStream(tokens, mix) if mix else Stream(tokens=tokens)
        replay = trained_steps if steps is None else steps
        with bar(replay, "replay", enabled=progress, unit="step") as b:
            trained, mixed = training_counts(stream, replay, int(train["batch"]), length, int(train["seed"]), b)
        training = {"steps": replay, "trained_steps": trained_steps, "batch": int(train["batch"]), "length": length,
                    "seed": int(train["seed"]), "mix": mix or None, "windows": replay * int(train["batch"]),
                    "tokens": int(trained.sum())}
        if "init" in subject.config:
            training["note"] = (f"a fine-tune of {subject.config['init'].get('run')}: its parent's training is "
                                "not replayed")
    rows = byte_rows(model.embed.weight, None if tied(model) else model.head.weight, counts, trained, mixed,
                     unseen_by)
    return {
        **header(BYTES_REPORT, REPORT_VERSION), "run": subject.source,
        "scheme": model.cfg.label, "train_len": subject.train_len, "tied": tied(model), "corpus": described,
        "training": training, "summary": summarize(rows, top, unseen_by), "rows": [r.to_json() for r in rows],
    }


# -- needle mass ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class NeedleMassRow(Row):
    """One (pattern, length, layer) of the needle-mass instrument, averaged over its documents (see
    the module docstring): ``kind`` local or global (the layer's pattern has a finite reach or not);
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
    kind: str
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
    return int(retrieval.answer_tokens(nbytes, start).nonzero()[0])


SOFTMAX, DIFFERENTIAL, STICK_BREAKING = "softmax", "differential", "stick-breaking"


def weight_maps(model) -> list[tuple[str, Callable[[Tensor], Tensor] | None]]:
    """Per layer, what its attention map is and how to read it from the kernel's per-head weights
    ``[b, heads, n_k]``: a differential layer (``+diff``) mixes values with softmax(head 2i) -
    λ·softmax(head 2i+1) per pair (:mod:`lexkit.attention.modifiers.differential`), so its map is
    that difference ``[b, heads / 2, n_k]``, not either component (one can be the subtracted one); a
    stick-breaking layer's weights are the map but sum to at most 1; any other layer's softmax is the
    map as it is. A model without lexkit's layer plan (an hf: model): softmax everywhere."""
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
    vocab = getattr(model.cfg, "vocab_size", None) or retrieval.UNKNOWN_VOCAB
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
        size = retrieval.rows_per_batch(query + 1, vocab)
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


def mass_rows(per_doc: Sequence[Sequence[dict]], pattern: Pattern, length: int, kinds: Sequence[str],
              weights: Sequence[str] | None = None) -> list[NeedleMassRow]:
    """One :class:`NeedleMassRow` per layer from the documents' records (:func:`answer_attention`);
    ``weights``: what each layer's map is (:func:`weight_maps`; None: softmax everywhere)."""
    rows = []
    weights = list(weights) if weights is not None else [SOFTMAX] * len(kinds)
    for layer, kind in enumerate(kinds):
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
            pattern.spec, length, layer, kind, len(recs), float(visible.mean()), float(needle.mean()),
            sum(r["distance"] for r in recs) / len(recs), float((needle / visible).mean()), float(mass.mean()),
            float(per_head[head]), head, float(visible.log().mean()), float(ent.mean()), float(ent[:, head].mean()),
            float((away == 0).to(torch.float64).mean()), float(away.mean()), per_head.tolist(), ent.mean(0).tolist(),
            None if weights[layer] == SOFTMAX else weights[layer]))
    return rows


def layer_kinds(model, pattern: Pattern) -> list[str]:
    """``global`` or ``local`` per layer under ``pattern`` (a finite reach is local)."""
    return [kind_of(p) for p in layer_patterns(pattern, model.cfg.n_layers)]


def needle_mass(subject, task: str, lengths: Sequence[int], *, depths: Sequence[float] = DEPTHS,
                samples: int = SAMPLES, patterns: Sequence[str | Pattern] = ("causal",),
                haystack: tasks.Haystack | None = None, seed: int = 0, size: int | None = None,
                format: str | None = None, progress: bool = False) -> list[NeedleMassRow]:
    """The needle-mass rows of ``subject`` (a loaded run or hf: model, :func:`lexkit.load`) for
    ``task`` on ``samples`` documents per (length, depth), every depth of a length pooled, under each
    pattern: one row per (pattern, length, layer). The documents are ``lexkit retrieval``'s
    (:func:`lexkit.retrieval.cell_documents`, evaluation split; lengths in the subject's unit)."""
    from .progress import bar

    kind = retrieval.style(subject)
    retrieval.check_grid(task, lengths, depths, samples, kind, size, format)
    refusal = getattr(subject.model, "hook_refusal", lambda: None)()
    if refusal is not None:
        raise ValueError(refusal)
    lengths = retrieval.unique("lengths", lengths, lengths)
    depths = retrieval.unique("depths", depths, [float(d) for d in depths])
    if isinstance(patterns, (str, Pattern)):
        raise ValueError(f"patterns must be a list, e.g. ['causal'], not {patterns!r}")
    resolved = [subject.model.pattern(p) for p in patterns]
    pats = retrieval.unique("patterns", resolved, [p.spec for p in resolved])
    rows: list[NeedleMassRow] = []
    with bar(len(lengths) * len(pats), f"needle mass {task}", enabled=progress, unit="cell") as b:
        for length in lengths:
            docs = [d for depth in depths for d in retrieval.cell_documents(
                subject, task, length, depth, samples, haystack=haystack, seed=seed, size=size, format=format)]
            for pat in pats:
                rows += mass_rows(answer_attention(subject, docs, pat), pat, length, layer_kinds(subject.model, pat),
                                  [kind for kind, _ in weight_maps(subject.model)])
                b.advance(1)
    return rows


def needle_mass_run(target, task: str = "copy", *, lengths: Sequence[int] | None = None,
                    depths: Sequence[float] = DEPTHS, samples: int = SAMPLES, size: int | None = None,
                    seed: int = 0, patterns: Sequence[str] = ("causal",), data: str | None = None,
                    format: str | None = None, device: str = "cpu", progress: bool = False,
                    add: str | None = None) -> dict:
    """``lexkit inspect TARGET --needle-mass``: load a run or ``hf:PATH`` (or take a loaded subject),
    measure :func:`needle_mass` (default lengths: the training length x 1-16 that hold the needle)
    with haystacks from its documents (a run's validation split, or ``data``) and return the JSON
    document. ``add``: stateless layer modifiers added to a run's layers (:func:`lexkit.subject.load`).
    Everything checkable without the model is checked before it loads."""
    from .layouts import check_pattern
    from .subject import load

    loaded = hasattr(target, "documents")
    style = retrieval.style(target) if loaded else "standard" if str(target).startswith("hf:") else "bytes"
    retrieval.check_grid(task, lengths or [], depths, samples, style, size, format)
    task = tasks.canonical(task)
    for spec in patterns:
        if isinstance(spec, str):
            check_pattern(spec)
    if loaded and add is not None:
        raise ValueError("--add applies when the run is loaded: give its directory, not a loaded subject")
    subject = target if loaded else load(target, device=device, add=add)
    kind = retrieval.style(subject)
    if lengths is None:
        lengths = retrieval.needle_lengths(subject, task, size, subject.source, format)
    haystack = corpus = None
    if task == "copy" or kind == "bytes":
        docs, described = subject.documents(data)
        haystack, corpus = tasks.Haystack.from_documents(docs), described["spec"]
    rows = needle_mass(subject, task, lengths, depths=depths, samples=samples, patterns=patterns, haystack=haystack,
                       seed=seed, size=size, format=format, progress=progress)
    info = subject.describe()
    return {
        **header(MASS_REPORT, REPORT_VERSION), "target": subject.source,
        "scheme": info["scheme"], "train_len": info["train_len"], "task": task,
        **({"format": format} if format is not None else {}), "style": kind,
        "unit": retrieval.unit(subject), "size": size, "seed": seed, "haystack": corpus, "samples": samples,
        "depths": [float(d) for d in dict.fromkeys(depths)], "lengths": list(dict.fromkeys(r.length for r in rows)),
        "patterns": list(dict.fromkeys(r.pattern for r in rows)), "rows": [r.to_json() for r in rows],
    }
