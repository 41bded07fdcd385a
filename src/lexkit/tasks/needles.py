"""The formats a copy needle comes in: the skill of induction (copy whatever followed the earlier
occurrence of the current context) in many clothes, a *trained* family and a *held-out* one.

A format makes one :class:`Needle`: the bytes ``given`` somewhere in the haystack (they hold the
value), the question ``asked`` after the haystack, and the ``value`` that answers it. The
document is ``haystack + given + haystack + asked + value`` (:func:`lexkit.tasks.make`), and its
*cue*, the context an induction head must match, is what precedes the value both times (the
longest common suffix of the text before the needle and before the answer, :func:`cue`).

Trained formats (the training mix ``induction`` draws one per document, :mod:`lexkit.tasks`):

========== ==================================================================================
``tilde``  ``~`` + letters a-z, asked after ``~`` (the classic ``copy`` task, bit for bit)
``marker`` a marker of 1-4 random bytes (any byte but ``= " ' ^`` and a newline), a value over a random
           alphabet, 0-2 tail bytes; asked after the marker
``bare``   no marker: a random segment; asked by its first 3-8 symbols, answered by the rest
``ngram``  a span of the corpus itself; asked by its first 3-8 bytes, answered by the rest
``recall`` associative recall: 2-6 pairs ``key sep value`` (keys of 1-4 symbols, separators of
           0-2 bytes), one key asked as ``key sep``
========== ==================================================================================

Value alphabets of the trained formats (:data:`ALPHABETS`): letters, capitals, digits, letters
and digits, punctuation, bytes of the corpus itself (a random subset of the bytes around a random
place of the haystack), a random subset of printable ASCII.

Held-out formats (never in training; :func:`lexkit.tasks.make` with ``format=NAME`` scores them):

========== ==================================================================================
``python`` ``\\nNAME = "value"\\n`` asked as ``\\nNAME = "`` (NAME: 2-6 capitals, ``_``, a digit;
           letters a-z): a syntax no training needle has
``hex``    ``~`` + hex digits (at least one digit and one letter a-f): an alphabet no training
           value has
``caret``  ``^`` + letters a-z: a marker byte no training needle has (``^`` is removed from
           that document's haystack, as ``~`` is from every haystack)
========== ==================================================================================

**The held-out rule** (:func:`reads_held_out`): a document reads as a held-out format when its cue
ends in ``=``, spaces and a quote (``python``), its value is all lowercase hex with a digit and a
letter a-f (``hex``), or its cue holds ``^`` (``caret``). Trained formats never use ``^``, ``=`` or
quotes as marker bytes and never draw ``^`` into an alphabet, and a trained document that reads as
held out anyway (a corpus span ``x = "``, a value ``a1b2``) is drawn again: so no training document
reads as a held-out one, by construction and by test. Every held-out format's own documents read
as that format and no other (tested).

A format's minimum (``room`` = 0) is a function of the value's ``size`` alone
(:meth:`Format.minimum`); given ``room`` spare bytes, it may spend some on extras (a longer marker,
more pairs), the haystack gets the rest. Values are drawn with :func:`needle_value`, so an asked
value belongs to evaluation or training by one bit of its hash (:func:`held_out`), as every needle.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import ClassVar

import numpy as np

from ..core.registry import Registry

LETTERS = b"abcdefghijklmnopqrstuvwxyz"
CAPITALS = LETTERS.upper()
DIGITS = b"0123456789"
HEX = b"0123456789abcdef"
#: the marker of the classic copy needle (removed from every haystack)
TILDE = b"~"
#: the held-out marker byte: never a marker, never in an alphabet of a trained format
CARET = b"^"
#: bytes a trained marker, separator or tail never holds: the held-out syntax and marker
FORBIDDEN = b"=\"'^"
PUNCTUATION = bytes(b for b in b"!#$%&()*+,-./:;<>?@[\\]_`{|}~" if b not in FORBIDDEN)
#: what trained markers, separators and tails are made of: any byte but the forbidden ones and a newline
MARKER_BYTES = bytes(b for b in range(256) if b not in FORBIDDEN + b"\n")
PRINTABLE = bytes(b for b in range(32, 127) if b not in CARET)
#: the longest cue :func:`cue` reports
CUE_MAX = 32
#: symbols of a drawn alphabet subset (corpus bytes, printable ASCII)
SUBSET = (8, 40)


def held_out(value: bytes) -> bool:
    """Whether a needle value belongs to evaluation (else to training): one bit of its SHA-256,
    which no model can read off the value, so the two sets never meet."""
    return hashlib.sha256(b"lexkit-needle:" + value).digest()[0] & 1 == 1


def needle_value(rng: np.random.Generator, alphabet: bytes, size: int, split: str,
                 avoid: set[bytes] = frozenset()) -> bytes:
    """A random value of ``size`` symbols of ``alphabet`` that belongs to ``split`` (and is not in
    ``avoid``): what every needle holds."""
    table = np.frombuffer(alphabet, dtype=np.uint8)
    while True:
        value = table[rng.integers(0, len(table), size)].tobytes()
        if held_out(value) == (split == "eval") and value not in avoid:
            return value


@dataclasses.dataclass(frozen=True)
class Needle:
    """What a format puts in a document: ``given`` (in the haystack; the value at ``value_at``),
    the question ``asked`` after the haystack, the ``value`` that answers it, the ``alphabet`` size
    the value was drawn from (chance: log2 of it) and bytes ``clean`` removed from the haystack."""

    given: bytes
    value_at: int
    asked: bytes
    value: bytes
    alphabet: int
    clean: bytes = b""

    @property
    def overhead(self) -> int:
        """Bytes of the document that are not haystack."""
        return len(self.given) + len(self.asked) + len(self.value)


class Draw:
    """The random choices of one needle: its generator, the split its values belong to, the
    haystack (corpus text) and ``room``, the spare bytes extras may still take."""

    def __init__(self, rng: np.random.Generator, split: str, haystack, room: int) -> None:
        self.rng, self.split, self.haystack, self.room = rng, split, haystack, max(0, room)

    def extra(self, most: int, cost: int = 1) -> int:
        """A number of extras in [0, most], each taking ``cost`` bytes of the room left."""
        k = int(self.rng.integers(0, max(0, min(most, self.room // cost)) + 1))
        self.room -= k * cost
        return k

    def value(self, alphabet: bytes, size: int, avoid: set[bytes] = frozenset()) -> bytes:
        return needle_value(self.rng, alphabet, size, self.split, avoid)

    def symbols(self, alphabet: bytes, n: int) -> bytes:
        """``n`` symbols of ``alphabet`` (not a needle value: no split)."""
        table = np.frombuffer(alphabet, dtype=np.uint8)
        return table[self.rng.integers(0, len(table), n)].tobytes()

    def alphabet(self) -> bytes:
        """A trained value alphabet, drawn from :data:`ALPHABETS`."""
        return ALPHABETS[int(self.rng.integers(0, len(ALPHABETS)))](self)

    def subset(self, pool: bytes) -> bytes:
        """A random subset of :data:`SUBSET` symbols of ``pool`` (in pool order)."""
        pool = bytes(sorted(set(pool)))
        n = min(len(pool), int(self.rng.integers(SUBSET[0], SUBSET[1] + 1)))
        return bytes(sorted(self.rng.choice(np.frombuffer(pool, dtype=np.uint8), n, replace=False).tolist()))

    def corpus_bytes(self) -> bytes:
        """Bytes of the corpus itself: those around a random place of the haystack (printable,
        not ``^``), letters added when there are too few."""
        seen = bytes(set(self.haystack.take(self.rng, 256)) & set(PRINTABLE)) if self.haystack is not None else b""
        return self.subset(seen if len(seen) >= SUBSET[0] else seen + LETTERS)


#: the value alphabets of trained formats
ALPHABETS = (
    lambda d: LETTERS,
    lambda d: CAPITALS,
    lambda d: DIGITS,
    lambda d: LETTERS + DIGITS,
    lambda d: PUNCTUATION,
    Draw.corpus_bytes,
    lambda d: d.subset(PRINTABLE),
)


class Format:
    """A needle format (subclass it and register it with :data:`FORMATS`): ``name``, a one-line
    ``summary``, whether it is ``trained`` (the training mix draws it) or held out, and a
    ``version`` bumped whenever the needles it makes change."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    trained: ClassVar[bool] = True
    version: ClassVar[int] = 1

    @classmethod
    def minimum(cls, size: int) -> int:
        """Bytes of its smallest needle (given, asked and value) for a value of ``size``."""
        raise NotImplementedError

    @classmethod
    def needle(cls, draw: Draw, size: int) -> Needle:
        """One needle whose value has ``size`` symbols (extras within ``draw.room``)."""
        raise NotImplementedError

    @classmethod
    def recognizes(cls, cue: bytes, value: bytes) -> bool:
        """A held-out format: whether a document with this cue and value reads as this format."""
        return False


def _check_format(cls: type[Format]) -> None:
    for size in (1, 12):
        if cls.minimum(size) < size:
            raise ValueError(f"format {cls.name!r}: its minimum must hold the value")


#: every needle format by name, trained and held out
FORMATS: Registry[type[Format]] = Registry("format", Format, _check_format)
register = FORMATS.register


def get(name: str) -> type[Format]:
    """The format registered as ``name`` (ValueError naming the valid ones otherwise)."""
    return FORMATS.get(name)


def trained() -> list[str]:
    return [f.name for f in FORMATS if f.trained]


def held_out_formats() -> list[str]:
    return [f.name for f in FORMATS if not f.trained]


def describe() -> list[tuple[str, str, str]]:
    """(name, trained or held out, summary) of every format: ``lexkit tasks``."""
    return [(f.name, "trained" if f.trained else "held out", f.summary) for f in FORMATS]


def cue(text: bytes, needle: tuple[int, int], answer: tuple[int, int]) -> bytes:
    """The context an induction head matches: the longest common suffix (up to :data:`CUE_MAX`
    bytes) of the text before the needle's value and before the answer."""
    a, b = text[: needle[0]], text[: answer[0]]
    n = 0
    while n < min(len(a), len(b), CUE_MAX) and a[-1 - n] == b[-1 - n]:
        n += 1
    return b[len(b) - n :]


def reads_held_out(text: bytes, needle: tuple[int, int], answer: tuple[int, int]) -> str | None:
    """The held-out format a document reads as (the held-out rule), or None."""
    c, value = cue(text, needle, answer), text[answer[0] : answer[1]]
    return next((f.name for f in FORMATS if not f.trained and f.recognizes(c, value)), None)


# -- trained ------------------------------------------------------------------------------------------
class _Marked(Format):
    """A value of ``ALPHABET`` after the one marker ``MARK``, asked after ``MARK`` (the haystack
    cleaned of ``CLEAN``)."""

    MARK: ClassVar[bytes] = TILDE
    ALPHABET: ClassVar[bytes] = LETTERS
    CLEAN: ClassVar[bytes] = b""

    @classmethod
    def minimum(cls, size):
        return 2 * len(cls.MARK) + 2 * size

    @classmethod
    def needle(cls, draw, size):
        value = cls.value(draw, size)
        return Needle(cls.MARK + value, len(cls.MARK), cls.MARK, value, len(cls.ALPHABET), clean=cls.CLEAN)

    @classmethod
    def value(cls, draw: Draw, size: int) -> bytes:
        return draw.value(cls.ALPHABET, size)


@register
class Tilde(_Marked):
    name = "tilde"
    summary = "~ + letters a-z, asked after ~ (the classic copy task)"


@register
class Marker(Format):
    name = "marker"
    summary = "a marker of 1-4 random bytes, a value over a random alphabet, 0-2 tail bytes; asked after the marker"

    @classmethod
    def minimum(cls, size):
        return 2 + 2 * size

    @classmethod
    def needle(cls, draw, size):
        alphabet = draw.alphabet()
        value = draw.value(alphabet, size)
        marker = draw.symbols(MARKER_BYTES, 1 + draw.extra(3, cost=2))  # given once, asked once
        tail = draw.symbols(MARKER_BYTES + b"\n ", draw.extra(2))
        return Needle(marker + value + tail, len(marker), marker, value, len(alphabet))


class _Prefixed(Format):
    """A segment asked by its own first symbols (3 to 8): no marker at all."""

    CUE = 3
    TRIES = 64  # spans drawn before a haystack too uniform for one gives way to letters

    @classmethod
    def minimum(cls, size):
        return 2 * cls.CUE + 2 * size

    @classmethod
    def split(cls, draw: Draw, segment: bytes, size: int, alphabet: int) -> Needle | None:
        """``segment`` asked by all but its last ``size`` symbols; None when its value belongs to
        the other split or its cue recurs inside it."""
        head = len(segment) - size
        value = segment[head:]
        if held_out(value) != (draw.split == "eval") or segment[:head] in segment[1:]:
            return None
        return Needle(segment, head, segment[:head], value, alphabet)

    @classmethod
    def cue_length(cls, draw: Draw) -> int:
        """3 to 8 symbols (each extra one asked and given: two bytes of room)."""
        return cls.CUE + draw.extra(5, cost=2)

    @classmethod
    def segment(cls, draw: Draw, alphabet: bytes, size: int, cue_len: int) -> Needle:
        while True:
            found = cls.split(draw, draw.symbols(alphabet, cue_len + size), size, len(alphabet))
            if found is not None:
                return found


@register
class Bare(_Prefixed):
    name = "bare"
    summary = "no marker: a random segment over a random alphabet, asked by its first 3-8 symbols"

    @classmethod
    def needle(cls, draw, size):
        cue_len = cls.cue_length(draw)
        return cls.segment(draw, draw.alphabet(), size, cue_len)


@register
class Ngram(_Prefixed):
    name = "ngram"
    summary = "a span of the corpus itself, repeated: asked by its first 3-8 bytes, answered by the rest"

    @classmethod
    def needle(cls, draw, size):
        cue_len = cls.cue_length(draw)
        for _ in range(cls.TRIES):
            span = draw.haystack.take(draw.rng, cue_len + size)
            found = None if CARET in span else cls.split(draw, span, size, 256)
            if found is not None:
                return found
        return cls.segment(draw, LETTERS, size, cue_len)


@register
class Recall(Format):
    name = "recall"
    summary = "associative recall: 2-6 pairs key sep value, one key asked as key sep"

    PAIRS = 2

    @classmethod
    def minimum(cls, size):  # delimiter, asked pair (key 1, value), one more (key 1, value 2), question
        return 1 + (1 + size + 1) + (1 + 2 + 1) + (1 + 1) + size

    @classmethod
    def needle(cls, draw, size):
        room = draw.room
        while True:
            draw.room = room
            found = cls.pairs(draw, size)
            if found is not None:
                return found

    @classmethod
    def pairs(cls, draw: Draw, size: int) -> Needle | None:
        """``delim (key sep value delim)*`` and ``delim key sep`` for one of the keys; None when
        that question occurs more than once in the pairs."""
        keys_from, values_from = draw.alphabet(), draw.alphabet()
        delim = draw.symbols(MARKER_BYTES + b"\n ,;", 1)
        sep = draw.symbols(MARKER_BYTES + b" :", draw.extra(2, cost=3))  # in both pairs and the question
        key_len = 1 + draw.extra(3, cost=3)
        count = cls.PAIRS + draw.extra(4, cost=key_len + len(sep) + 3)  # a pair of the shortest value
        keys: list[bytes] = []
        while len(keys) < count:
            key = draw.symbols(keys_from, key_len)
            keys += [] if key in keys else [key]
        asked = int(draw.rng.integers(0, count))
        value = draw.value(values_from, size)
        given, at = delim, 0
        for i, key in enumerate(keys):
            given += key + sep
            at = len(given) if i == asked else at
            given += (value if i == asked else draw.symbols(values_from, 2 + draw.extra(max(0, size - 2)))) + delim
        question = delim + keys[asked] + sep
        if given.count(question) != 1:
            return None
        return Needle(given, at, question, value, len(values_from))


# -- held out -----------------------------------------------------------------------------------------
@register
class Python(Format):
    name = "python"
    summary = '\\nNAME = "value"\\n, asked as \\nNAME = " (letters a-z)'
    trained = False

    @classmethod
    def minimum(cls, size):
        return 2 * len(b'\nAB_1 = "') + len(b'"\n') + 2 * size

    @classmethod
    def needle(cls, draw, size):
        name = draw.symbols(CAPITALS, 2 + draw.extra(4, cost=2)) + b"_" + draw.symbols(DIGITS, 1)
        head = b"\n" + name + b' = "'
        value = draw.value(LETTERS, size)
        return Needle(head + value + b'"\n', len(head), head, value, len(LETTERS))

    @classmethod
    def recognizes(cls, cue, value):
        return re.search(rb"= *[\"']\Z", cue) is not None


@register
class Hex(_Marked):
    name = "hex"
    summary = "~ + hex digits (a digit and a letter a-f at least), asked after ~"
    trained = False
    ALPHABET = HEX

    @classmethod
    def value(cls, draw, size):
        while True:
            value = draw.value(HEX, size)
            if cls.recognizes(TILDE, value) or size < 2:
                return value

    @classmethod
    def recognizes(cls, cue, value):
        return (re.fullmatch(rb"[0-9a-f]+", value) is not None and re.search(rb"[0-9]", value) is not None
                and re.search(rb"[a-f]", value) is not None)


@register
class Caret(_Marked):
    name = "caret"
    summary = "^ + letters a-z, asked after ^ (a marker byte never trained)"
    trained = False
    MARK = CLEAN = CARET

    @classmethod
    def recognizes(cls, cue, value):
        return CARET in cue
