"""How table G's runs learn to retrieve: the recipe (preset, batch, learning rate, mix, steps, and
the model settings it needs beyond the preset), one definition for the study, the benchmarks and a
user's ``lexkit train`` (:meth:`Recipe.flags`). docs/retrieval.md has the search that found it and
what it costs in bpb."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A training recipe for retrieval: the ``preset`` (model size and training length), ``batch``,
    peak ``lr``, the ``mix`` of task documents among the training windows (``lexkit train
    --mix``), the ``steps``, and model settings beyond the preset: ``token_shift`` (the fraction
    of each position's features shifted from the position before) and ``layers`` (None: the
    preset's)."""

    preset: str
    batch: int
    lr: float
    mix: str
    steps: int
    token_shift: float = 0.0
    layers: int | None = None

    def settings(self, steps: int | None = None) -> dict:
        """The settings beyond the preset (:func:`lexkit.settings.configs` keywords)."""
        out = {"batch": self.batch, "lr": self.lr, "mix": self.mix, "steps": steps or self.steps,
               "token_shift": self.token_shift}
        return out | ({"n_layers": self.layers} if self.layers is not None else {})

    def flags(self, steps: int | None = None) -> list[str]:
        """The same as ``lexkit train`` flags."""
        out = ["--preset", self.preset, "--batch", str(self.batch), "--lr", f"{self.lr:g}", "--mix", self.mix,
               "--steps", str(steps or self.steps)]
        out += ["--token-shift", f"{self.token_shift:g}"] if self.token_shift else []
        return out + (["--layers", str(self.layers)] if self.layers is not None else [])


#: table G's recipe: the general induction mix (lexkit.needles' trained formats, drawn per document)
#: and a token shift (the previous position's features at every block's input; x-transformers'
#: shift_tokens), the search in docs/retrieval.md
RECIPE = Recipe(preset="quick", batch=64, lr=3e-3, mix="induction:0.75", steps=4000, token_shift=0.5)
