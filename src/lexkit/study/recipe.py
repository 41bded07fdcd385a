"""How table G's runs learn to retrieve: the recipe (preset, batch, learning rate, mix, steps), one
definition for the study, the benchmarks and a user's ``lexkit train`` (:meth:`Recipe.flags`).
docs/retrieval.md has the search that found it and what it costs in bpb."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A training recipe for retrieval: the ``preset`` (model size and training length), ``batch``,
    peak ``lr``, the ``mix`` of task documents among the training windows (``lexkit train
    --mix``) and the ``steps``."""

    preset: str
    batch: int
    lr: float
    mix: str
    steps: int

    def settings(self, steps: int | None = None) -> dict:
        """The training settings beyond the preset (:func:`lexkit.settings.configs` keywords)."""
        return {"batch": self.batch, "lr": self.lr, "mix": self.mix, "steps": steps or self.steps}

    def flags(self, steps: int | None = None) -> list[str]:
        """The same as ``lexkit train`` flags."""
        return ["--preset", self.preset, "--batch", str(self.batch), "--lr", f"{self.lr:g}", "--mix", self.mix,
                "--steps", str(steps or self.steps)]


#: table G's recipe: the general induction mix (lexkit.needles' trained formats, drawn per document)
RECIPE = Recipe(preset="quick", batch=64, lr=3e-3, mix="induction:0.75", steps=4000)
