"""The pieces several tasks build documents from: words, distinct needle values, pieces woven into
filler, Landmark's grass, RULER's sentences, and a copy needle in a format (:mod:`lexkit.needles`)."""

from __future__ import annotations

import numpy as np

from .. import needles
from .base import LETTERS, Document, Haystack, needle_value

# Landmark Attention's filler (llama/run_test.py; YaRN eval/passkey.py; LongLoRA).
GRASS = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
# RULER niah_multikey, over the same noise haystack (multikey; ordinal's standard style too).
RULER_TASK = ("Some special magic numbers are hidden within the following text. Make sure to memorize it. "
              "I will quiz you about the numbers afterwards.")
RULER_NEEDLE = "One of the special magic numbers for {word} is: {value}."
RULER_QUESTION = ("What is the special magic number for {word} mentioned in the provided text? "
                  "The special magic number for {word} mentioned in the provided text is")
RULER_DIGITS = 7


def random_word(rng: np.random.Generator, avoid: set[bytes], letters: int = 6) -> bytes:
    table = np.frombuffer(LETTERS, dtype=np.uint8)
    while True:
        word = table[rng.integers(0, 26, letters)].tobytes()
        if word not in avoid:
            return word


def distinct(rng, alphabet: bytes, size: int, split: str, count: int, task: str) -> list[bytes]:
    """``count`` distinct needle values of ``size`` symbols of ``alphabet``, each of ``split``."""
    if count > len(alphabet) ** size // 4:
        raise ValueError(f"task {task}: {count} distinct values of {size} symbols (an alphabet of {len(alphabet)}) "
                         f"are more than a quarter of those there are; use a larger --size")
    out: list[bytes] = []
    for _ in range(count):
        out.append(needle_value(rng, alphabet, size, split, set(out)))
    return out


def weave(free: int, pieces: list[tuple[int, bytes]], filler) -> tuple[bytes, list[int]]:
    """``free`` bytes of ``filler(start, end)`` with each piece ``(cut, bytes)`` inserted after
    ``cut`` of them (equal cuts keep the pieces' order): the text, and where each piece starts, in
    the pieces' order."""
    order = sorted(range(len(pieces)), key=lambda i: pieces[i][0])
    text, starts, last = b"", [0] * len(pieces), 0
    for i in order:
        cut, piece = pieces[i]
        text += filler(last, cut)
        starts[i], last = len(text), cut
        text += piece
    return text + filler(last, free), starts


def filler(rng, haystack: Haystack | None, style: str, free: int):
    """The filler between a document's pieces: slices of the corpus at random places (byte
    style), or Landmark's grass sliced in characters (standard style)."""
    if style == "standard":
        grass = grass_text(free).encode()
        return lambda start, end: grass[start:end]
    return lambda start, end: haystack.take(rng, end - start)


def grass_text(n: int) -> str:
    """Landmark's filler: the grass sentences joined by spaces, sliced to ``n`` characters."""
    return (" ".join([GRASS] * (n // (len(GRASS) + 1) + 1)))[:n]


def formatted(task: str, form: type[needles.Format], rng, haystack: Haystack, total: int, depth: float, size: int,
               split: str) -> Document:
    """A document of ``total`` bytes: a needle of ``form`` (its extras within what its minimum
    leaves), the haystack around it, the needle's question and value. A trained format's document
    that reads as a held-out one (:func:`lexkit.needles.reads_held_out`) is drawn again."""
    draw = needles.Draw(rng, split, haystack, total - form.minimum(size))
    room = draw.room
    while True:
        draw.room = room
        needle = form.needle(draw, size)
        hay = total - needle.overhead
        before = round(hay * depth / 100)
        head = clean(haystack.take(rng, before), needle.clean) + needle.given
        text = head + clean(haystack.take(rng, hay - before), needle.clean) + needle.asked
        start = len(head) - len(needle.given) + needle.value_at
        doc = Document(task, text + needle.value, (len(text), len(text) + len(needle.value)),
                       (start, start + len(needle.value)), depth, needle.alphabet, format=form.name)
        if not form.trained or needles.reads_held_out(doc.text, doc.needle, doc.answer) is None:
            return doc


def clean(text: bytes, clean: bytes) -> bytes:
    for byte in clean:
        text = text.replace(bytes([byte]), b" ")
    return text
