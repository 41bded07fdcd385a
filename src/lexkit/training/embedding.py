"""What training does to the token tables: the embedding [vocab, d] and, when it is untied
(``ModelConfig.untied_head``), the output head [vocab, d] (tied, the head *is* the embedding).

Why these options exist: "To See the Unseen" (Lazić, Fowl, György and Szepesvári 2026, arXiv
2604.21632) shows that the unembeddings (output rows) of tokens no training example shows collapse
to nearly one vector, which makes unseen tokens hard to tell apart, worst when embedding and
unembedding are shared; freezing or resetting the (un)embeddings is part of what restores
generalization to them (and explains why "active forgetting", Chen et al. 2023, which re-draws the
embedding every K steps, works). Magikarp (Land and Bartolo, EMNLP 2024) finds under-trained tokens
by their rows. A byte LM has such tokens too: the byte values its corpus never holds (57 in the
stdlib corpus's training split; tied, their rows collapse onto one direction and drag rare bytes
such as ``^``, the ``caret`` needle format's marker, toward it: docs/runs.md#embedding-options).
The options are arms to measure, each a :class:`~lexkit.training.settings.TrainConfig` field (and a
``lexkit train`` flag):

* ``embedding_decay`` (``--embedding-decay D``): AdamW's decoupled decay on the embedding,
  ``p <- p·(1 - lr_t·D)`` every step whatever the gradient (so a row no gradient reaches is
  ``row_0·Π_t (1 - lr_t·D)`` after the steps t); 0 keeps such a row as it was. None: the decay of
  every other matrix (``weight_decay``), today's optimizer. An untied head keeps ``weight_decay``.
* ``freeze_embedding`` (``--freeze-embedding``): the embedding stays at its random init, N(0,
  INIT_STD²): no gradient is computed for it and it is in no optimizer group. With the tied head
  that freezes the head too (one tensor); ``--untied-head`` trains a head of its own.
* ``reset_unseen`` (``--reset-unseen N``), the rule: after the optimizer step that completes step
  N, 2N, 3N, ... (the count of steps done, ``done % N == 0``), every token id that no training batch
  so far (steps 0 .. done-1, as an input or as a target) has held gets new rows, drawn from the init
  distribution: ``torch.randn(k, d, generator=g) * INIT_STD`` for the k unseen ids in increasing
  order, first the embedding's rows then, untied, the head's, ``g`` a CPU generator seeded with
  :func:`reset_seed` ``(seed, done)``; the AdamW moments of those rows (``exp_avg``,
  ``exp_avg_sq``) are set to 0, so the new row starts as a new parameter would. So a row that
  training has not reached never carries more than N steps of drift (the collapse), and once its
  byte is seen it trains as every other row. The ids seen so far are part of the checkpoint
  (trainer state ``seen``), so a resumed run resets exactly as an uninterrupted one; under torchrun
  the ranks' sets are joined first. Not under FSDP2 (a sharded table has no rows to write).
"""

from __future__ import annotations

import torch
from torch import nn

from ..model.gpt import INIT_STD
from .distributed import unwrap

__all__ = ["Unseen", "frozen", "reset_seed", "table_of"]

#: keeps the reset generators apart from the batch generators (seeded seed * 1_000_003 + step)
_RESET_SALT = 0x5EED_E3B0


def table_of(model: nn.Module) -> nn.Parameter | None:
    """The embedding weight of a lexkit model (DDP-wrapped or not), None for another module."""
    embed = getattr(unwrap(model), "embed", None)
    return embed.weight if isinstance(embed, nn.Embedding) else None


def frozen(model: nn.Module, freeze: bool) -> None:
    """The embedding's gradient off (``freeze``) or on: what ``freeze_embedding`` means."""
    table = table_of(model)
    if table is not None:
        table.requires_grad_(not freeze)


def reset_seed(seed: int, done: int) -> int:
    """The seed of the generator that draws the rows reset after ``done`` steps of a run seeded ``seed``."""
    return ((seed * 1_000_003 + done) ^ _RESET_SALT) % (1 << 63)


class Unseen:
    """The token ids training batches have held so far, and the reset of the rows of the others
    every ``every`` steps (module docstring: the rule). ``seen``: the ids of a checkpoint's trainer
    state (resume)."""

    def __init__(self, every: int, vocab: int, seen: list[int] | None = None) -> None:
        self.every = int(every)
        self.mask = torch.zeros(vocab, dtype=torch.bool)  # [vocab] True: held by some batch
        if seen:
            self.mask[torch.tensor(seen, dtype=torch.long)] = True

    def __bool__(self) -> bool:
        return self.every > 0

    def observe(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Mark the ids of one (rank's) batch, inputs ``x`` and targets ``y`` [rows, length] (on the CPU)."""
        self.mask[x.reshape(-1)] = True
        self.mask[y.reshape(-1)] = True

    def join(self, world, device: torch.device) -> None:
        """Every rank's ids, on every rank (a collective under torchrun; nothing in one process)."""
        if world.parallel:
            self.mask = (world.mean(self.mask.to(device, torch.float32)) > 0).cpu()

    def seen(self) -> list[int]:
        """The ids seen so far, in increasing order (what the checkpoint keeps)."""
        return self.mask.nonzero().flatten().tolist()

    def due(self, done: int) -> bool:
        return self.every > 0 and done % self.every == 0

    @torch.no_grad()
    def reset(self, tables: list[nn.Parameter], optimizer: torch.optim.Optimizer, seed: int, done: int) -> list[int]:
        """Draw the unseen ids' rows of every table in ``tables`` again and zero their AdamW
        moments; returns those ids (none once every id has been seen)."""
        ids = (~self.mask).nonzero().flatten()
        if not len(ids):
            return []
        gen = torch.Generator().manual_seed(reset_seed(seed, done))
        for table in tables:
            rows = torch.randn(len(ids), table.shape[1], generator=gen) * INIT_STD  # [k, d]
            where = ids.to(table.device)
            table[where] = rows.to(table.device, table.dtype)
            slots = optimizer.state.get(table, {})
            for key in ("exp_avg", "exp_avg_sq"):
                if key in slots:
                    slots[key][where] = 0
        return ids.tolist()
