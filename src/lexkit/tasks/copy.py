"""``copy``: induction / a repeated sequence, in any needle format (:mod:`lexkit.tasks.needles`)."""

from __future__ import annotations

from . import needles
from .base import Document, Task, register
from .text import formatted


@register
class Copy(Task):
    """Induction / repeated sequence: a value asked for after its cue again, in any needle format
    (:mod:`lexkit.tasks.needles`; default ``tilde``: letters after the marker ~, asked after ~)."""

    name = "copy"
    summary = "a segment of letters after the marker ~, asked for after ~ again (induction); --format: another"
    size = 16
    mix_sizes = (8, 30)  # long copy segments make the induction signal strong (docs/retrieval.md)
    default_format = "tilde"

    @classmethod
    def build(cls, rng, haystack, free, before, depth, size, split, style, format="tilde") -> Document:
        form = needles.get(format)
        return formatted(cls.name, form, rng, haystack, free + form.minimum(size), depth, size, split)
