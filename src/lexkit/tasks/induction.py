"""``induction``: a copy needle in a trained format drawn per document (the training mix of the skill)."""

from __future__ import annotations

from .. import needles
from .base import Document, Task, register
from .text import formatted


@register
class Induction(Task):
    """The general skill: a copy document in a trained format drawn per document (never a
    held-out one): the training mix that teaches induction rather than one format."""

    name = "induction"
    summary = "a copy needle in a trained format drawn per document (lexkit.needles; held-out formats never)"
    size = 12
    mix_sizes = (6, 28)
    styles = ("bytes",)
    draws_formats = True

    @classmethod
    def build(cls, rng, haystack, free, before, depth, size, split, style) -> Document:
        names = needles.trained()
        total = free + max(needles.get(n).minimum(size) for n in names)
        form = needles.get(names[int(rng.integers(0, len(names)))])
        return formatted(cls.name, form, rng, haystack, total, depth, size, split)
