"""The paper's design principles measured on a model (:mod:`.measure`: order variance, translation
invariance); the study's table A reports them (no command of its own)."""

from .measure import measure_principles  # noqa: F401
