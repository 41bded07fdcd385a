"""The byte table of ``lexkit inspect RUN``: what training showed each byte and where its embedding
row went (one of the two instruments that tell retrieval failures apart; the other is
:mod:`lexkit.instruments.inspect.needle_mass`).


**The byte table** (:func:`embedding_run`), of a run directory. Per token t (the byte values 0..255 and
BOS, 256):

* ``corpus``: its occurrences in the run's training split as the trainer streams it (every training
  document, BOS before each: :func:`lexkit.data.corpus.tokens_of`), the corpus's text alone;
* ``trained``: the times it stood in a training window (as input or target: the ``length + 1``
  tokens of each row) over the steps the run trained, replayed batch by batch from the run's seed
  (:meth:`lexkit.data.corpus.Stream.batch`; under a ``--mix``, :class:`lexkit.data.mix.MixedStream`, whose
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

"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor

from ....core.version import header
from ....data.corpus import Corpus, Stream, absolute_spec, same_corpus, tokens_of
from ....documents.report import key
from ....documents.rows import Row
from ....model.gpt import BOS
from ... import IdentityReport, identity

#: the report of ``lexkit inspect RUN --json`` and its layout's version (lexkit.core.version.header)
BYTES_REPORT, REPORT_VERSION = "lexkit.inspect.bytes", 3
#: the seen tokens of highest cosine the summary lists
COLLAPSED = 10
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


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class BytesReport(IdentityReport):
    """``lexkit inspect RUN``'s report, the byte table (:func:`embedding_run`): what ran, the corpus counted,
    the training replayed, the summary and a row per token."""

    run: str = key("the run directory")
    train_len: int = key("the training length")
    tied: bool = key("whether the output head is the embedding table")
    corpus: dict = key("the corpus counted: spec, fingerprint, training documents and bytes")
    training: dict | None = key("the training windows replayed: steps, batch, length, seed, mix, tokens "
                                "(null: the run cannot be replayed)")
    summary: dict = key("the table at a glance: the unseen tokens, the rarest seen, the collapsed (summarize)")
    rows: list[dict] = key("one row per token, the byte values and BOS (ByteRow)")


def stream_counts(tokens: Tensor) -> Tensor:
    """int64 [257]: each token's count in a token stream (int16 [total]: the training split as the
    trainer reads it, :func:`lexkit.data.corpus.tokens_of`), tallied in pieces."""
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
    for prefix, cosine in (("", "cosine"), ("out_", "out_cosine")):
        if not rows or getattr(rows[0], cosine) is None:
            continue
        out[f"{prefix}unseen_cohesion"] = _mean([getattr(r, cosine) for r in unseen])
        out[f"{prefix}seen_cosine"] = _mean([getattr(r, cosine) for r in seen])
        ranked = sorted(seen, key=lambda r: (-getattr(r, cosine), r.token))[:top]
        out[f"{prefix}collapsed"] = [{**_brief(r), "cosine": getattr(r, cosine)} for r in ranked]
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
    from ....training.runs.lifecycle import run_corpus as load_run_corpus

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
    from ....training.runs import trainer_state

    train = subject.config.get("train")
    state = trainer_state(subject.source) if train else None
    if not train or state is None:
        return None, 0
    return train, int(state.get("step", 0))


def embedding_run(target, *, data: str | None = None, corpus: Corpus | None = None, steps: int | None = None,
                  top: int = COLLAPSED, unseen_by: str = "training", progress: bool = False) -> BytesReport:
    """``lexkit inspect RUN``: the byte table of a run directory (or a loaded run subject) and its
    summary, as one report (a :class:`BytesReport`). ``data``: the run's corpus at a new place; ``corpus``: the
    corpus itself (a run trained on one built in memory); ``steps``: replay only the first ``steps``
    training steps (default: every step its weights trained); ``unseen_by``: what makes a token
    unseen (:data:`UNSEEN_BY`; a run that cannot be replayed: the corpus)."""
    from ....core import checks
    from ....core.progress import bar
    from ....data.mix import MixedStream
    from ...subject import RunSubject, load

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
    return BytesReport(
        **header(BYTES_REPORT, REPORT_VERSION), run=subject.source,
        **identity(subject.describe()), train_len=subject.train_len, tied=tied(model), corpus=described,
        training=training, summary=summarize(rows, top, unseen_by), rows=[r.to_json() for r in rows],
    )
