"""The training mix: retrieval documents (:mod:`lexkit.tasks`) among the training windows.

``lexkit train --mix TASK:FRACTION[,TASK:FRACTION...]`` replaces that fraction of the training
windows by task documents of exactly the training length: byte style, training-split needles
(:func:`lexkit.tasks.held_out`), the haystack drawn from the training stream itself, the needle at
a uniform random depth, the needle size drawn from the task's ``mix_sizes`` (lowered to what fits,
:func:`lexkit.tasks.fitting_size`) and its parameters from its ``mix_choices`` (``kvthread``:
1 or 2 hops, forward or backward). Row i of step t is a task row by a generator seeded from
(seed, t) alone, so a resumed run draws the same batches and each torchrun rank takes its rows of
the same global batch (:class:`MixedStream`).

While the run trains, :func:`mix_probe` holds fixed evaluation-split documents of each mix task
(and, for a copy-like mix, of every held-out needle format), scored by the trainer as
``val_<task>_bits`` and ``val_<task>_exact``.

The mix sits above the corpora (:mod:`lexkit.data`: the stream it replaces windows of) and the
tasks (what it puts there); the settings, the trainer and the study read it.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from .. import tasks
from ..core.specs import split_spec
from ..model.gpt import BOS
from ..tasks import needles
from .corpus import Stream, encode

#: documents per task of a mix's probe (validation of the retrieval skill during training)
PROBE_DOCUMENTS = 32
#: the probe's name for the held-out needle formats (:mod:`lexkit.tasks.needles`), pooled
HELD_OUT = "heldout"
#: the value size of the held-out probe's needles (lowered to what fits the training length)
PROBE_SIZE = 12


def parse_mix(spec: str | None) -> dict[str, float]:
    """``"passkey:0.05,copy:0.1"`` -> ``{"passkey": 0.05, "copy": 0.1}`` (``""``/None: no mix).
    Each fraction in (0, 1] (1: every window a task document, as a labelling task such as ``khop``
    trains alone), a task at most once, the fractions summing to at most 1 (an exact sum,
    :func:`math.fsum`); spaces around a task or a fraction are ignored. A mix draws a task's
    :attr:`~lexkit.tasks.Task.mix_choices` per document (:func:`lexkit.tasks.draw_spec`); its other
    parameters may be fixed in the task's spec, ``kvthread:supervise=every:0.2`` (kept in canonical
    form: the probe's metrics are named by it)."""
    out: dict[str, float] = {}
    for item in _items(spec or ""):
        task, colon, value = (part.strip() for part in item.rpartition(":"))
        if not colon or not task or "=" in value:
            raise ValueError(f"--mix {item!r}: write TASK:FRACTION, e.g. passkey:0.05 or kvthread:supervise=every:0.2")
        kind = tasks.get(task)
        given = {item.partition("=")[0].strip() for item in split_spec(task)[1]}
        drawn = [key for key in kind.mix_choices if key in given]
        if drawn:
            raise ValueError(f"--mix {item!r}: a mix draws {kind.name}'s {', '.join(drawn)} per document "
                             f"(`lexkit tasks`); fix only its other parameters in the spec")
        task = tasks.canonical(task)
        try:
            fraction = float(value)
        except ValueError:
            raise ValueError(f"--mix {item!r}: {value!r} is not a number") from None
        if not 0 < fraction <= 1:
            raise ValueError(f"--mix {item!r}: the fraction must be in (0, 1], got {value}")
        if task in out:
            raise ValueError(f"--mix names {task} twice")
        out[task] = fraction
    total = math.fsum(out.values())
    if total > 1 + 1e-9:
        raise ValueError(f"--mix fractions sum to {total!r}, more than 1")
    return out


def _items(spec: str) -> list[str]:
    """A mix's items: its text split at commas, a piece that starts ``key=value`` joined back to the
    item before it (the parameters of a task spec, ``kvthread:supervise=every,chains=3:0.2``)."""
    out: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if out and "=" in part.partition(":")[0]:
            out[-1] += "," + part
        elif part:
            out.append(part)
    return out


def mix_text(mix: dict[str, float]) -> str:
    """The canonical text of a mix (as config.json records it): each fraction as the shortest
    text that reads back as the same float (``0.75``, ``0.3333335``), so that
    ``parse_mix(mix_text(m)) == m`` for every mix :func:`parse_mix` accepts."""
    return ",".join(f"{task}:{fraction!r}" for task, fraction in mix.items())


def check_mix(spec: str | None, length: int) -> None:
    """A ValueError when a task of the mix cannot fit a training window of ``length`` bytes (with
    its smallest needle, :data:`lexkit.tasks.MIN_FITTING_SIZE`, and the largest parameters its mix
    draws, :func:`lexkit.tasks.mix_specs`)."""
    for task in parse_mix(spec):
        need = max(tasks.minimum_length(spec, "bytes", tasks.MIN_FITTING_SIZE) for spec in tasks.mix_specs(task))
        if need > length:
            raise ValueError(f"--mix {task}: its documents need at least {need} bytes, more than the training "
                             f"length {length}")


def haystack_of(tokens: Tensor) -> tasks.Haystack:
    """A token stream as a :class:`lexkit.tasks.Haystack` (BOS read as a newline)."""
    text = tokens.clamp(max=255).to(torch.uint8)  # BOS (256) -> 255, then a newline
    text[tokens == BOS] = 10
    return tasks.Haystack(text.numpy().tobytes())


def mix_size(task: str, length: int, rng) -> int:
    """A needle size for ``task`` drawn uniformly from its mix range (:func:`lexkit.tasks.mix_sizes`),
    the top lowered to what fits ``length``."""
    low, top = tasks.mix_sizes(task)
    top = tasks.fitting_size(task, length, top)
    return int(rng.integers(min(low, top), top + 1))


def mix_document(task: str, length: int, rng: np.random.Generator, choices: np.random.Generator,
                 depth: float | None = None, early: bool = False, **make) -> tasks.Document:
    """One mix document of ``task``: its parameters drawn from ``choices`` (:func:`lexkit.tasks.draw_spec`:
    nothing drawn for a task without ``mix_choices``), its size from ``rng``, then its depth unless
    given (``early``: in a curriculum's first part); ``make``: :func:`lexkit.tasks.make`'s other arguments."""
    spec = tasks.draw_spec(task, choices, early)
    size = mix_size(spec, length, rng)
    depth = float(rng.uniform(0, 100)) if depth is None else depth
    return tasks.make(spec, length, depth, size=size, **make)


def mix_probe(tokens: Tensor, mix: dict[str, float] | str, length: int,
              count: int = PROBE_DOCUMENTS) -> dict[str, tuple[Tensor, Tensor, Tensor]]:
    """Fixed documents per task of a mix, to see a run learn it: ``count`` documents of ``length``
    bytes whose haystack is ``tokens`` (the validation stream), evaluation-split needles (never
    trained on), depths spread evenly from 0 to 100 %, needle sizes and parameters drawn as the mix
    draws them.
    When the mix has a copy-like task (one that takes needle formats or draws them), also
    :data:`HELD_OUT`: ``count`` documents of each held-out format (copy needles of
    :data:`PROBE_SIZE`), pooled, to see whether what is learnt is the skill or a format. Per entry:
    (inputs [n, length], targets [n, length], answer mask [n, length], True where the target is an
    answer byte)."""
    haystack = haystack_of(tokens)
    out = {}
    mix = parse_mix(mix) if isinstance(mix, str) else mix
    for task in mix:
        docs = [mix_document(task, length, np.random.default_rng([0x315, i]), np.random.default_rng([0x317, i]),
                             100.0 * i / max(1, count - 1), haystack=haystack, seed=0x315, index=i, split="eval")
                for i in range(count)]
        out[task] = _probe_rows(docs, length)
    if any(tasks.get(t).default_format is not None or tasks.get(t).draws_formats for t in mix):
        docs = []
        for name in needles.held_out_formats():
            size = tasks.fitting_size("copy", length, PROBE_SIZE, name)
            docs += [tasks.make("copy", length, 100.0 * i / max(1, count - 1), haystack=haystack, seed=0x315,
                                index=i, split="eval", size=size, format=name) for i in range(count)]
        out[HELD_OUT] = _probe_rows(docs, length)
    return out


def _probe_rows(docs, length: int) -> tuple[Tensor, Tensor, Tensor]:
    """Documents of ``length`` bytes as (inputs, targets, answer mask), each [len(docs), length]."""
    xs, ys, masks = [], [], []
    for doc in docs:
        x, y = document_row(doc)
        mask = torch.zeros(length, dtype=torch.bool)
        mask[doc.answer[0]:doc.answer[1]] = True
        xs.append(x)
        ys.append(y)
        masks.append(mask)
    return torch.stack(xs), torch.stack(ys), torch.stack(masks)


def document_row(doc: tasks.Document) -> tuple[Tensor, Tensor]:
    """A document as one training row (inputs, targets), each [len(doc.text)]: BOS and the text but
    its last byte, and the next bytes (target j is text byte j), or a labelling task's own targets
    (:attr:`lexkit.tasks.Document.targets`, ``khop``)."""
    row = encode(doc.text)  # [length + 1], BOS first
    if not doc.targets:
        return row[:-1], row[1:]
    return row[:-1], torch.frombuffer(bytearray(doc.targets), dtype=torch.uint8).to(torch.int64)


class MixedStream(Stream):
    """The training stream with retrieval documents (:mod:`lexkit.tasks`, byte style, training
    needles) in place of a fraction of its windows: row i of step t is a task document of
    ``length`` bytes (BOS, haystack drawn from the training stream itself, the needle at a random
    depth) with the probability its task's fraction gives, decided by a generator seeded from
    (seed, t) alone. So every rank of a torchrun run sees its own rows of the same global batch,
    and a resumed run draws the batches an uninterrupted one would. Before step ``curriculum`` (0: no
    curriculum) a task document draws its parameters from the task's curriculum values
    (:attr:`lexkit.tasks.Task.curriculum`: kvthread one hop, then one or two)."""

    def __init__(self, tokens: Tensor, mix: dict[str, float] | str, curriculum: int = 0) -> None:
        super().__init__(tokens=tokens)
        self.mix = parse_mix(mix) if isinstance(mix, str) else dict(mix)
        self.haystack = haystack_of(self.tokens)
        self.curriculum = int(curriculum)

    def task_rows(self, step: int, batch: int, seed: int, rows: slice = slice(None)) -> dict[int, tuple[int, str]]:
        """The rows of step ``step``'s batch that hold a task document: {row of ``rows`` (one rank's
        share): (row of the global batch of ``batch``, its task)}. One draw per row of the global
        batch, from a generator seeded from (seed, step) alone (what :meth:`batch` replaces, and what
        ``lexkit inspect`` replays to count the bytes a run was shown)."""
        draws = np.random.default_rng([0x313, seed, step]).random(batch)  # one per row of the global batch
        edges = np.cumsum(list(self.mix.values()))
        names = list(self.mix)
        out = {}
        for local, i in enumerate(range(batch)[rows]):
            slot = int(np.searchsorted(edges, draws[i], side="right"))
            if slot < len(names):
                out[local] = (i, names[slot])
        return out

    def batch(self, step: int, batch: int, length: int, seed: int, rows: slice = slice(None)) -> tuple[Tensor, Tensor]:
        x, y = super().batch(step, batch, length, seed, rows)
        x, y = x.clone(), y.clone()  # views of one window tensor: a labelling task's targets are not its next bytes
        for local, (i, task) in self.task_rows(step, batch, seed, rows).items():
            doc = mix_document(task, length, np.random.default_rng([0x314, seed, step, i]),
                               np.random.default_rng([0x316, seed, step, i]), early=step < self.curriculum,
                               haystack=self.haystack, seed=seed, index=step * batch + i, split="train")
            x[local], y[local] = document_row(doc)
        return x, y
