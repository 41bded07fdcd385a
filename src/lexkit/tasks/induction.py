"""``induction``: a copy needle in a trained format drawn per document (the training mix of the skill)."""

from __future__ import annotations

from ..core.specs import Param
from . import needles
from .base import MAX_LINKS, Document, Task, register
from .text import formatted, keyed, keyed_minimum


@register
class Induction(Task):
    """The general skill: a copy document in a trained format drawn per document (never a
    held-out one): the training mix that teaches induction rather than one format.

    ``distract=K`` (K > 0): distractors that share the cue (issue 70's round 3, arm C1): the
    needle's question starts with a key, and the same question after K other keys, each with
    another value, is woven into the haystack (:func:`lexkit.tasks.text.keyed`), so that only
    matching the key, not the cue, finds the value: what the held-out ``python`` asks where its
    ``= "`` recurs through source code, taught here in the trained formats alone."""

    name = "induction"
    summary = "a copy needle in a trained format drawn per document (lexkit.tasks.needles; held-out formats never)"
    size = 12
    mix_sizes = (6, 28)
    styles = ("bytes",)
    draws_formats = True
    params = {
        "distract": Param(int, 0, "distractors: the needle's question after other keys in the haystack, each with "
                          "another value (0: none, the needle unkeyed)", lambda k: 0 <= k <= MAX_LINKS,
                          f"0..{MAX_LINKS}"),
    }

    @classmethod
    def build(cls, rng, haystack, free, before, depth, size, split, style, distract=0) -> Document:
        names = needles.trained()
        if distract:
            total = free + max(keyed_minimum(needles.get(n), size, distract) for n in names)
            form = needles.get(names[int(rng.integers(0, len(names)))])
            return keyed(cls.name, form, rng, haystack, total, depth, size, split, distract)
        total = free + max(needles.get(n).minimum(size) for n in names)
        form = needles.get(names[int(rng.integers(0, len(names)))])
        return formatted(cls.name, form, rng, haystack, total, depth, size, split)
