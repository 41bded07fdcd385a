"""How table G's runs learn to retrieve: the recipe (preset, batch, learning rate, mix, steps, the stop
rule, and the model settings it needs beyond the preset), one definition for the study, the benchmarks
and a user's ``lexkit train`` (:meth:`Recipe.flags`), and which recipe a study of each preset runs
(:func:`for_preset`). docs/retrieval.md has the search that found it and what it costs in bpb."""

from __future__ import annotations

import dataclasses

from ..training import presets


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A training recipe for retrieval: the ``preset`` (model size and training length), ``batch``,
    peak ``lr``, the ``mix`` of task documents among the training windows (``lexkit train
    --mix``), the ``steps``, the ``stop`` rule (:mod:`lexkit.training.stopping`; ``""``: every step), and
    model settings beyond the preset: ``token_shift`` (the fraction of each position's features
    shifted from the position before) and ``layers`` (None: the preset's)."""

    preset: str
    batch: int
    lr: float
    mix: str
    steps: int
    token_shift: float = 0.0
    layers: int | None = None
    stop: str = ""

    def settings(self, steps: int | None = None) -> dict:
        """The settings beyond the preset (:func:`lexkit.training.settings.configs` keywords)."""
        out = {"batch": self.batch, "lr": self.lr, "mix": self.mix, "steps": steps or self.steps,
               "token_shift": self.token_shift}
        out |= {"stop": self.stop} if self.stop else {}
        return out | ({"n_layers": self.layers} if self.layers is not None else {})

    def flags(self, steps: int | None = None) -> list[str]:
        """The same as ``lexkit train`` flags."""
        out = ["--preset", self.preset, "--batch", str(self.batch), "--lr", f"{self.lr:g}", "--mix", self.mix,
               "--steps", str(steps or self.steps)]
        out += ["--token-shift", f"{self.token_shift:g}"] if self.token_shift else []
        out += ["--stop", self.stop] if self.stop else []
        return out + (["--layers", str(self.layers)] if self.layers is not None else [])


#: table G's recipe as measured: the general induction mix (lexkit.tasks.needles' trained formats, drawn per
#: document) and a token shift (the previous position's features at every block's input;
#: x-transformers' shift_tokens), 4,000 steps, the search in docs/retrieval.md
RECIPE = Recipe(preset="quick", batch=64, lr=3e-3, mix="induction:0.75", steps=4000, token_shift=0.5)

#: the recipe of a study at each preset (:func:`for_preset`): the default study's (``small``) is
#: :data:`RECIPE` ended once the trained-format probe has held 90 % for five validations (500 steps)
#: from step 2,000 on (lexkit.training.stopping; ``make study-full``: every step); a first look's (``quick``)
#: 1,000 steps and no stop rule (the ALiBi and HWFA rows change phase at 500-700 steps; at batch 32,
#: half the step's cost, ALiBi had not changed phase by 1,500: docs/study.md); the test size's
#: (``tiny``) its preset's 40 steps, in seconds (nothing is learnt)
RECIPES = {
    "tiny": dataclasses.replace(RECIPE, preset="tiny", steps=presets.PRESETS["tiny"]["steps"]),
    "quick": dataclasses.replace(RECIPE, steps=1000),
    "small": dataclasses.replace(RECIPE, stop="probe:exact=0.9,probes=5,after=2000"),
}


def for_preset(preset: str) -> Recipe:
    """The recipe table G trains with in a study at ``preset``: :data:`RECIPES`' (``small``, the
    default study, keeps the runs at ``quick`` size, where the recipe was measured: a ``small`` step
    costs about 16 times as much); a larger preset its own size, steps and learning rate."""
    if preset in RECIPES:
        return RECIPES[preset]
    values = presets.get(preset)
    return dataclasses.replace(RECIPE, preset=preset, steps=values["steps"], lr=values["lr"])
