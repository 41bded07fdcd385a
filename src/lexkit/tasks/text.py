"""The pieces several tasks build documents from: words, distinct needle values, pieces woven into
filler, Landmark's grass, RULER's sentences, and a copy needle in a format (:mod:`lexkit.tasks.needles`)."""

from __future__ import annotations

import functools

import numpy as np

from . import needles
from .base import LETTERS, Document, Haystack, needle_value

#: symbols of the key a keyed needle's question starts with (``induction:distract=K``)
KEY_SYMBOLS = LETTERS + needles.CAPITALS
#: symbols of that key
KEY_SIZE = 3

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
    that reads as a held-out one (:func:`lexkit.tasks.needles.reads_held_out`) is drawn again."""
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


@functools.lru_cache(maxsize=1024)
def question_minimum(form: type[needles.Format], version: int, size: int) -> int:
    """Bytes of ``form``'s question with no room for extras (a marker of 1 byte, a prefix of 3)."""
    draw = needles.Draw(np.random.default_rng(0), "eval", Haystack(b"x"), 0)
    return len(form.needle(draw, size).asked)


def keyed_minimum(form: type[needles.Format], size: int, distract: int) -> int:
    """Bytes of a keyed needle of ``form`` with ``distract`` distractors and no haystack (:func:`keyed`)."""
    return form.minimum(size) + 2 * KEY_SIZE + distract * (KEY_SIZE + question_minimum(form, form.version, size) + size)


def keyed(task: str, form: type[needles.Format], rng, haystack: Haystack, total: int, depth: float, size: int,
          split: str, distract: int) -> Document:
    """A document of ``total`` bytes whose needle's cue recurs in the haystack with other keys: the
    needle of ``form`` with a key of :data:`KEY_SIZE` symbols a-z, A-Z before its question's bytes
    (``KEY~value``, asked as ``KEY~``), and ``distract`` distractors ``OTHER~value2`` woven anywhere
    in the haystack: the format's whole question after another key, then another value of the
    same size drawn from the needle value's own symbols (of the document's split). Only the key
    tells the needle from the distractors, as ``NAME`` does in the held-out ``python``'s
    ``NAME = "`` where ``= "`` recurs through source code; the held-out formats' cues stay out (the
    key and the trained question hold no ``^``, ``=`` or quote, and a document that reads as held
    out is drawn again). Extras of the format take at most a ``distract + 2``-th of the spare
    bytes (an extra byte of the question is written that many times)."""
    spare = total - keyed_minimum(form, size, distract)
    draw = needles.Draw(rng, split, haystack, spare // (distract + 2))
    room = draw.room
    while True:
        draw.room = room
        needle = form.needle(draw, size)
        asked, value = needle.asked, needle.value
        at = needle.value_at - len(asked)  # every format gives its question's bytes right before the value
        keys: list[bytes] = []
        while len(keys) < distract + 1:
            key = draw.symbols(KEY_SYMBOLS, KEY_SIZE)
            keys += [] if key in keys else [key]
        pool = bytes(sorted(set(value))) if len(set(value)) > 1 else bytes(sorted(set(value + LETTERS)))
        others: list[bytes] = []
        for _ in range(distract):
            others.append(needle_value(draw.rng, pool, size, split, {value, *others}))
        given = needle.given[:at] + keys[0] + needle.given[at:]
        pieces = [key + asked + other for key, other in zip(keys[1:], others)]
        hay = total - needle.overhead - 2 * KEY_SIZE - sum(map(len, pieces))
        before = round(hay * depth / 100)
        cuts = [before] + [int(c) for c in rng.integers(0, hay + 1, distract)]
        removed = needle.clean
        body, starts = weave(hay, list(zip(cuts, [given, *pieces])),
                             lambda a, b, removed=removed: clean(haystack.take(rng, b - a), removed))
        question = keys[0] + asked
        text = body + question
        start = starts[0] + needle.value_at + KEY_SIZE
        spans = tuple((s + KEY_SIZE + len(asked), s + KEY_SIZE + len(asked) + size) for s in starts[1:])
        doc = Document(task, text + value, (len(text), len(text) + len(value)), (start, start + len(value)), depth,
                       needle.alphabet, spans, format=form.name)
        if text.count(question) == 2 and needles.reads_held_out(doc.text, doc.needle, doc.answer) is None:
            return doc
