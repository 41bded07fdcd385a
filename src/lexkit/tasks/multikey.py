"""``multikey`` (RULER's niah_multikey): several needles of one form, one asked for."""

from __future__ import annotations

from .base import DIGITS, MARK, Document, Haystack, Task, needle_value, register
from .text import RULER_DIGITS, RULER_NEEDLE, RULER_QUESTION, RULER_TASK, grass_text, random_word

#: needles in a multikey document (one asked for, the others distractors)
MULTIKEY_NEEDLES = 4


@register
class Multikey(Task):
    """RULER's niah_multikey: several needles of one form, one asked for."""

    name = "multikey"
    summary = f"{MULTIKEY_NEEDLES} keyed needles, one asked for (standard style: RULER's niah_multikey)"
    size = 5

    @classmethod
    def default_size(cls, style: str) -> int:
        """5 digits in lexkit's byte needles, RULER's 7 in the standard style."""
        return RULER_DIGITS if style == "standard" else cls.size

    @classmethod
    def build(cls, rng, haystack, free, before, depth, size, split, style) -> Document:
        if style == "standard":
            return _standard_multikey(rng, free, before, depth, size, split)
        return _byte_multikey(rng, haystack, free, before, depth, size, split)


def _byte_multikey(rng, haystack: Haystack, free: int, before: int, depth: float, size: int, split: str) -> Document:
    """Needles ``\\n{word} ~{key}\\n``; the queried one at ``depth``, distractors uniformly."""
    words: set[bytes] = set()
    keys: set[bytes] = set()
    needles = []
    for _ in range(MULTIKEY_NEEDLES):
        word = random_word(rng, words)
        key = needle_value(rng, DIGITS, size, split, keys)
        words.add(word)
        keys.add(key)
        needles.append((word, key))
    cuts = [before] + sorted(int(c) for c in rng.integers(0, free + 1, MULTIKEY_NEEDLES - 1))
    order = sorted(range(MULTIKEY_NEEDLES), key=lambda i: (cuts[i], i))
    text, spans, last = b"", {}, 0
    for i in order:
        text += haystack.take(rng, cuts[i] - last)
        last = cuts[i]
        word, key = needles[i]
        text += b"\n" + word + b" " + MARK
        spans[i] = (len(text), len(text) + size)
        text += key + b"\n"
    text += haystack.take(rng, free - last) + b"\n" + needles[0][0] + b" " + MARK
    answer = (len(text), len(text) + size)
    return Document("multikey", text + needles[0][1], answer, spans[0], float(depth), len(DIGITS),
                    tuple(spans[i] for i in range(1, MULTIKEY_NEEDLES)))


def _standard_multikey(rng, free: int, before: int, depth: float, digits: int, split: str) -> Document:
    words: set[bytes] = set()
    keys: set[bytes] = set()
    needles = []
    for _ in range(MULTIKEY_NEEDLES):
        word = random_word(rng, words)
        key = needle_value(rng, DIGITS[1:], digits, split, keys)
        words.add(word)
        keys.add(key)
        needles.append((word.decode(), key.decode()))
    grass = grass_text(free)
    cuts = [before] + sorted(int(c) for c in rng.integers(0, free + 1, MULTIKEY_NEEDLES - 1))
    order = sorted(range(MULTIKEY_NEEDLES), key=lambda i: (cuts[i], i))
    text, spans, last = RULER_TASK + "\n", {}, 0
    for i in order:
        text += grass[last : cuts[i]]
        last = cuts[i]
        word, key = needles[i]
        needle = RULER_NEEDLE.format(word=word, value=key)
        start = len(text) + 1 + needle.index(key)
        spans[i] = (start, start + digits)
        text += " " + needle
    text += grass[last:] + "\n" + RULER_QUESTION.format(word=needles[0][0])
    answer = (len(text), len(text) + 1 + digits)  # with its leading space
    text += " " + needles[0][1]
    return Document("multikey", text.encode(), answer, spans[0], float(depth), len(DIGITS) - 1,
                    tuple(spans[i] for i in range(1, MULTIKEY_NEEDLES)))
