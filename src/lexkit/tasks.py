"""Retrieval tasks: documents that hide a needle in a haystack and ask for it back.

Every document is ``text`` = haystack before + needle + haystack after + question + answer, and
knows where its answer is: ``answer`` is the byte span the model must produce (the prompt is
everything before it) and ``needle`` the span where the same bytes were given earlier. Three
tasks, each in two styles:

* ``copy`` (induction / repeated sequence, Olsson et al.; TransformerLens' ``induction_loss``): a
  random segment of ``size`` letters a-z after a marker, the haystack, the marker again, the
  segment again.
* ``passkey``: ``size`` random digits to remember. Byte style (lexkit's byte models): the needle
  ``\\nthe pass key is ~{key}.\\n`` and the question ``\\nthe pass key is ~``: the marker byte
  ``~`` (rare in source code, and removed from every haystack) is the unique prefix a byte-level
  induction head can match. Standard style (tokenizer models): exactly the prompt of Landmark
  Attention's ``run_test.py``, copied by YaRN's ``eval/passkey.py`` and LongLoRA (task sentence,
  the grass-is-green filler sliced in characters before and after the needle, "The pass key is
  {k}. Remember it. {k} is the pass key.", "What is the pass key? The pass key is"; k uniform in
  1..50000), so numbers for a pretrained model compare with the published ones; another ``size``
  than the default 5 draws keys of exactly that many digits.
* ``multikey`` (RULER's ``niah_multikey``): ``MULTIKEY_NEEDLES`` needles of the same form with
  distinct words and keys; one is asked for, so recall is separated from recency. Byte style
  ``\\n{word} ~{key}\\n`` asked as ``\\n{word} ~``; standard style RULER's needle "One of the
  special magic numbers for {word} is: {value}." in the grass filler, values of 7 digits as
  RULER's (or ``size``).

Depth (percent, the needle-in-a-haystack convention): the share of the haystack placed before
the needle; 0 puts the needle first, 100 right before the question. The haystack of the byte
style is text of a corpus (``Haystack``); the marker byte never occurs in it.

No leaks between training and evaluation: a needle value (segment or key) belongs to the
evaluation split or the training split by a hash of its bytes (:func:`held_out`), generators
draw from seeds salted by split, and the training mix takes its haystack from the training
documents, evaluation from validation documents.

**The registry.** Tasks are kept by name (:data:`TASKS`), like position schemes and attention
patterns: a task is a :class:`Task` subclass registered with :func:`register`, and a module that
registers its own is loaded with ``--import MODULE`` (``lexkit tasks --import MODULE`` lists it;
``lexkit retrieval --task``, ``lexkit train --mix`` and the study take its name)::

    @tasks.register
    class Reverse(tasks.Task):
        name = "reverse"  # the registry key and the salt of its documents' seeds
        size = 8  # default needle size; mix_sizes: the range a training mix draws from
        summary = "a segment of letters, asked for backwards"

        @classmethod
        def build(cls, rng, haystack, free, before, depth, size, split, style):
            ...  # a Document of exactly free + minimum_length bytes (tests/fixtures/my_task.py)

A document's generator is seeded by (split, seed, the task's *name*, length, depth, index)
(:func:`rng_for`), so adding or removing a task changes no other task's documents. Whatever
changes a task's documents (its builder: bump its ``version``; the seeding rule:
:data:`SEEDING`) changes its :func:`identity`, which caches of scored documents are keyed by.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from typing import ClassVar

import numpy as np

from . import checks, needles
from .needles import held_out, needle_value  # noqa: F401 (the needle values of every task; re-exported)
from .registry import Registry

#: the marker byte of the byte-style needles (never in a haystack)
MARK = needles.TILDE
STYLES = ("bytes", "standard")
SPLITS = ("eval", "train")
#: needles in a multikey document (one asked for, the others distractors)
MULTIKEY_NEEDLES = 4
LETTERS = needles.LETTERS
DIGITS = needles.DIGITS

# The standard passkey prompt (Landmark Attention llama/run_test.py; YaRN eval/passkey.py; LongLoRA).
PASSKEY_TASK = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
                "I will quiz you about the important information there.")
GRASS = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
PASSKEY_NEEDLE = "The pass key is {k}. Remember it. {k} is the pass key."
PASSKEY_QUESTION = "What is the pass key? The pass key is"
# RULER niah_multikey, over the same noise haystack.
RULER_TASK = ("Some special magic numbers are hidden within the following text. Make sure to memorize it. "
              "I will quiz you about the numbers afterwards.")
RULER_NEEDLE = "One of the special magic numbers for {word} is: {value}."
RULER_QUESTION = ("What is the special magic number for {word} mentioned in the provided text? "
                  "The special magic number for {word} mentioned in the provided text is")
RULER_DIGITS = 7

_SALT = {"eval": 0x5E1EC7, "train": 0x7A1A}
#: how a document's generator is seeded: 2, by its task's name (1: by the task's place in a list,
#: so that inserting a task changed the documents of every task after it)
SEEDING = 2


@dataclasses.dataclass(frozen=True)
class Document:
    """One retrieval document. Spans are ``(start, end)`` byte offsets into ``text``."""

    task: str
    text: bytes
    answer: tuple[int, int]  # what the model must produce; the prompt is text[:answer[0]]
    needle: tuple[int, int]  # where the same value was given (the queried needle's value)
    depth: float  # percent of the haystack before the needle
    alphabet: int  # symbols an answer byte is drawn from (chance: log2(alphabet) bits per byte)
    distractors: tuple[tuple[int, int], ...] = ()  # values of the other needles (multikey)
    format: str = ""  # the needle format of a copy or induction document (lexkit.needles)

    @property
    def prompt(self) -> bytes:
        return self.text[: self.answer[0]]

    @property
    def expected(self) -> bytes:
        return self.text[self.answer[0] : self.answer[1]]

    @property
    def distance(self) -> int:
        """Bytes from the needle's value to the answer."""
        return self.answer[0] - self.needle[0]

    def without_needle(self, filler: bytes | None = None) -> bytes:
        """The text with the needle's value replaced by ``filler`` (default: as many ``x`` bytes):
        what a model that cannot see the needle is left with."""
        start, end = self.needle
        filler = b"x" * (end - start) if filler is None else filler
        if len(filler) != end - start:
            raise ValueError(f"the filler must have the needle's {end - start} bytes, got {len(filler)}")
        return self.text[:start] + filler + self.text[end:]


class Haystack:
    """Filler text, drawn as contiguous slices at random offsets (wrapping around)."""

    def __init__(self, text: bytes) -> None:
        text = bytes(text).replace(MARK, b" ")
        if not text:
            raise ValueError("a haystack needs some text")
        self.text = text
        self._twice = text + text

    @classmethod
    def from_documents(cls, docs: list[bytes]) -> Haystack:
        return cls(b"\n".join(docs))

    def take(self, rng: np.random.Generator, n: int) -> bytes:
        if n <= 0:
            return b""
        if n > len(self.text):
            return (self.text * (n // len(self.text) + 1))[:n]
        start = int(rng.integers(0, len(self.text)))
        return self._twice[start : start + n]


class Task:
    """A retrieval task: how its documents are built (subclass it and :func:`register` the class).

    ``name`` is its registry key and salts its documents' seeds; ``size`` the default needle size
    (letters, digits), ``mix_sizes`` the (low, high) range a training mix draws sizes from (high
    lowered to what fits the window); ``styles`` the document styles it builds (``bytes`` for
    lexkit's byte models, ``standard`` for tokenizer models); ``version`` is bumped whenever the
    documents it builds change. :meth:`build` makes one document from its generator."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    size: ClassVar[int] = 1
    mix_sizes: ClassVar[tuple[int, int] | None] = None  # None: (size, size)
    styles: ClassVar[tuple[str, ...]] = STYLES
    version: ClassVar[int] = 1
    #: the needle format (:mod:`lexkit.needles`) of a task that takes ``format=``; None: it takes none
    default_format: ClassVar[str | None] = None
    #: whether its documents draw among the trained formats (their versions are part of its identity)
    draws_formats: ClassVar[bool] = False

    @classmethod
    def default_size(cls, style: str) -> int:
        """The needle size when none is given (``size``; a task may choose by style)."""
        return cls.size

    @classmethod
    def build(cls, rng: np.random.Generator, haystack: Haystack | None, free: int, before: int, depth: float,
              size: int, split: str, style: str) -> Document:
        """A document with ``free`` bytes of haystack, ``before`` of them ahead of the needle (a
        needle value of ``size`` symbols that belongs to ``split``, :func:`held_out`)."""
        raise NotImplementedError


def _check_task(cls: type[Task]) -> None:
    checks.number(f"task {cls.name!r}: size", cls.size)
    if set(cls.styles) - set(STYLES) or not cls.styles:
        raise ValueError(f"task {cls.name!r}: styles {cls.styles!r} must be among {STYLES}")


#: Every retrieval task by name; ``@lexkit.tasks.register`` adds a user's own.
TASKS: Registry[type[Task]] = Registry("task", Task, _check_task)
register = TASKS.register


def names() -> list[str]:
    """The registered tasks' names, built-in first."""
    return TASKS.names()


def get(task: str) -> type[Task]:
    """The task registered as ``task`` (ValueError naming the valid ones otherwise)."""
    return TASKS.get(task)


def check_task(task: str) -> None:
    get(task)


def task_seed(task: str) -> int:
    """The entropy a task adds to its documents' seeds: 64 bits of a hash of its name alone."""
    return int.from_bytes(hashlib.sha256(b"lexkit-task:" + task.encode()).digest()[:8], "big")


def identity(task: str, format: str | None = None) -> dict:
    """What defines a task's documents besides their arguments: its name, its builder's
    version and the seeding rule (a cache of scored documents is keyed by it); and the version of
    the needle ``format`` it is scored in, or, for a task that draws trained formats
    (``induction``), of every trained format."""
    out = {"task": task, "version": get(task).version, "seeding": SEEDING}
    if format is not None and format != get(task).default_format:
        out["format"] = {format: needles.get(format).version}
    if get(task).draws_formats:
        out["formats"] = {name: needles.get(name).version for name in needles.trained()}
    return out


def check_format(task: str, format: str | None) -> None:
    """ValueError for a format that is not registered, or given to a task that takes none."""
    kind = get(task)
    if format is None:
        return
    if kind.default_format is None:
        takes = [t.name for t in TASKS if t.default_format is not None]
        raise ValueError(f"task {task!r} takes no --format; formats are for {', '.join(takes)}"
                         + (" (induction draws a trained format per document)" if task == "induction" else ""))
    needles.get(format)


def seed_name(task: str, format: str | None = None) -> str:
    """What salts a document's seed: the task's name, with ``@format`` for a format other than
    the task's default (so the default's documents stay what they were)."""
    return task if format is None or format == get(task).default_format else f"{task}@{format}"


def mix_sizes(task: str) -> tuple[int, int]:
    """The (low, high) needle sizes a training mix draws ``task``'s documents with."""
    kind = get(task)
    return kind.mix_sizes or (kind.size, kind.size)


#: the smallest needle :func:`fitting_size` lowers a size to (a training mix's floor, the study's)
MIN_FITTING_SIZE = 4


def fitting_size(task: str, length: int, size: int, format: str | None = None) -> int:
    """``size``, lowered (down to :data:`MIN_FITTING_SIZE`) until a ``task`` document in ``format``
    fits ``length`` bytes."""
    while size > MIN_FITTING_SIZE and minimum_length(task, "bytes", size, format) > length:
        size -= 1
    return size


def describe() -> list[tuple[str, str, str, str]]:
    """(name, default size, styles, summary) of every task: ``lexkit tasks``."""
    return [(t.name, str(t.size), ", ".join(t.styles), t.summary) for t in TASKS]


def check_depth(depth: float) -> None:
    if not (isinstance(depth, (int, float)) and 0 <= depth <= 100):
        raise ValueError(f"depth {depth!r} is outside [0, 100] (percent of the haystack before the needle)")


def rng_for(task: str, split: str, seed: int, *key: int) -> np.random.Generator:
    """The generator of one document: a function of (split, seed, the task's name, key) alone."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return np.random.default_rng([_SALT[split], int(seed), task_seed(task), *(int(k) for k in key)])


def _word(rng: np.random.Generator, avoid: set[bytes]) -> bytes:
    table = np.frombuffer(LETTERS, dtype=np.uint8)
    while True:
        word = table[rng.integers(0, 26, 6)].tobytes()
        if word not in avoid:
            return word


def minimum_length(task: str, style: str = "bytes", size: int | None = None, format: str | None = None) -> int:
    """The bytes of a document of ``task`` with no haystack at all (the shortest valid length)."""
    kind = get(task)
    size = kind.default_size(style) if size is None else size
    form = None if kind.default_format is None else needles.get(format or kind.default_format)
    trained = tuple(needles.get(n) for n in needles.trained()) if kind.draws_formats else ()
    return _minimum(kind, kind.version, style, size, form, form and form.version, trained)


@functools.lru_cache(maxsize=4096)
def _minimum(kind: type[Task], version: int, style: str, size: int, form: type[needles.Format] | None,
             form_version: int | None, trained: tuple) -> int:
    """:func:`minimum_length`, built once per task class, version, style, size and format (the
    training mix asks for it with every document)."""
    return len(kind.build(np.random.default_rng(0), Haystack(b"x"), 0, 0, 0.0, size, "eval", style,
                          **({} if form is None else {"format": form.name})).text)


def _format_argument(kind: type[Task], format: str | None) -> dict:
    return {} if kind.default_format is None else {"format": format or kind.default_format}


_PASSKEY_NEEDLE_BYTES = b"\nthe pass key is " + MARK


def make(task: str, length: int, depth: float, *, haystack: Haystack | None, seed: int = 0, index: int = 0,
         style: str = "bytes", split: str = "eval", size: int | None = None, format: str | None = None) -> Document:
    """Document ``index`` of a cell (task, length, depth): ``length`` bytes of text in all, the
    needle at ``depth`` percent of the haystack. Deterministic in (split, seed, task, format,
    length, depth, index). ``size``: letters of a copy segment / digits of a key (default: the
    task's); ``format``: the needle format of a task that takes one (``copy``:
    :mod:`lexkit.needles`, default ``tilde``). ValueError for an unknown task, format or style, a
    depth outside [0, 100] or a length too short for the needle."""
    kind = get(task)
    check_format(task, format)
    check_depth(depth)
    if style not in kind.styles:
        raise ValueError(f"unknown style {style!r} for task {task!r}; valid: {', '.join(kind.styles)}")
    size = kind.default_size(style) if size is None else size
    checks.number("size", size)
    need = minimum_length(task, style, size, format)
    if length < need:
        raise ValueError(f"length {length} is shorter than the {task} needle and question ({need} bytes); "
                         f"use lengths of at least {need}")
    if style == "bytes" and haystack is None:
        raise ValueError("the byte style draws its haystack from text: give a Haystack")
    rng = rng_for(seed_name(task, format), split, seed, length, round(depth * 1000), index)
    free = length - need
    return kind.build(rng, haystack, free, round(free * depth / 100), float(depth), size, split, style,
                      **_format_argument(kind, format))


def _byte_needle(task: str, rng, haystack: Haystack, free: int, before: int, depth: float, size: int, split: str,
                 alphabet: bytes, needle: bytes, tail: bytes) -> Document:
    """``needle`` + a value of ``alphabet`` + ``tail`` at ``before``, the haystack, then ``needle``
    again: the question, answered by the value."""
    value = needle_value(rng, alphabet, size, split)
    head = haystack.take(rng, before) + needle
    text = head + value + tail + haystack.take(rng, free - before) + needle
    return Document(task, text + value, (len(text), len(text) + size), (len(head), len(head) + size), depth,
                    len(alphabet))


def _formatted(task: str, form: type[needles.Format], rng, haystack: Haystack, total: int, depth: float, size: int,
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
        head = _clean(haystack.take(rng, before), needle.clean) + needle.given
        text = head + _clean(haystack.take(rng, hay - before), needle.clean) + needle.asked
        start = len(head) - len(needle.given) + needle.value_at
        doc = Document(task, text + needle.value, (len(text), len(text) + len(needle.value)),
                       (start, start + len(needle.value)), depth, needle.alphabet, format=form.name)
        if not form.trained or needles.reads_held_out(doc.text, doc.needle, doc.answer) is None:
            return doc


def _clean(text: bytes, clean: bytes) -> bytes:
    for byte in clean:
        text = text.replace(bytes([byte]), b" ")
    return text


@register
class Copy(Task):
    """Induction / repeated sequence: a value asked for after its cue again, in any needle format
    (:mod:`lexkit.needles`; default ``tilde``: letters after the marker ~, asked after ~)."""

    name = "copy"
    summary = "a segment of letters after the marker ~, asked for after ~ again (induction); --format: another"
    size = 16
    mix_sizes = (8, 30)  # long copy segments make the induction signal strong (docs/retrieval.md)
    default_format = "tilde"

    @classmethod
    def build(cls, rng, haystack, free, before, depth, size, split, style, format="tilde") -> Document:
        form = needles.get(format)
        return _formatted(cls.name, form, rng, haystack, free + form.minimum(size), depth, size, split)


@register
class Passkey(Task):
    """A key of digits to remember: lexkit's byte needle, or Landmark Attention's standard prompt."""

    name = "passkey"
    summary = "digits to remember (standard style: the Landmark Attention / YaRN / LongLoRA prompt)"
    size = 5

    @classmethod
    def build(cls, rng, haystack, free, before, depth, size, split, style) -> Document:
        if style == "standard":
            return _standard_passkey(rng, free, before, depth, size, split)
        return _byte_needle(cls.name, rng, haystack, free, before, depth, size, split, DIGITS,
                            _PASSKEY_NEEDLE_BYTES, b".\n")


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
        return _formatted(cls.name, form, rng, haystack, total, depth, size, split)


def _byte_multikey(rng, haystack: Haystack, free: int, before: int, depth: float, size: int, split: str) -> Document:
    """Needles ``\\n{word} ~{key}\\n``; the queried one at ``depth``, distractors uniformly."""
    words: set[bytes] = set()
    keys: set[bytes] = set()
    needles = []
    for _ in range(MULTIKEY_NEEDLES):
        word = _word(rng, words)
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


def _grass(n: int) -> str:
    """Landmark's filler: the grass sentences joined by spaces, sliced to ``n`` characters."""
    return (" ".join([GRASS] * (n // (len(GRASS) + 1) + 1)))[:n]


def _passkey_text(prefix: str, suffix: str, key: str) -> tuple[str, int]:
    """The standard prompt (lines joined by newlines) and where the key of the needle starts."""
    lines = [PASSKEY_TASK, prefix]
    start = len("\n".join(lines)) + 1 + len("The pass key is ")
    lines += [PASSKEY_NEEDLE.format(k=key), suffix, PASSKEY_QUESTION]
    return "\n".join(lines), start


def passkey_range(digits: int) -> tuple[int, int]:
    """The keys of a standard passkey of ``digits`` digits: Landmark's 1..50000 for the default
    5 (so numbers compare with the papers'), else every number of exactly ``digits`` digits."""
    if digits == Passkey.size:
        return 1, 50000
    return (1 if digits == 1 else 10 ** (digits - 1)), 10**digits - 1


def _standard_passkey(rng, free: int, before: int, depth: float, size: int, split: str) -> Document:
    digits = max(1, size)
    low, top = passkey_range(digits)
    while True:
        key = str(int(rng.integers(low, top + 1)))
        if held_out(key.encode()) == (split == "eval"):
            break
    free += 3 * (digits - len(key))  # the key is written three times: a shorter one leaves more filler
    before = min(before, free)
    prompt, start = _passkey_text(_grass(before), _grass(free - before), key)
    text = (prompt + " " + key).encode()
    answer = (len(prompt), len(text))  # with its leading space: the model continues "...is"
    return Document("passkey", text, answer, (start, start + len(key)), float(depth), len(DIGITS))


def _standard_multikey(rng, free: int, before: int, depth: float, digits: int, split: str) -> Document:
    words: set[bytes] = set()
    keys: set[bytes] = set()
    needles = []
    for _ in range(MULTIKEY_NEEDLES):
        word = _word(rng, words)
        key = needle_value(rng, DIGITS[1:], digits, split, keys)
        words.add(word)
        keys.add(key)
        needles.append((word.decode(), key.decode()))
    grass = _grass(free)
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


def documents(task: str, length: int, depth: float, count: int, *, haystack: Haystack | None, seed: int = 0,
              style: str = "bytes", split: str = "eval", size: int | None = None,
              format: str | None = None) -> list[Document]:
    """``count`` documents of one cell (see :func:`make`)."""
    return [make(task, length, depth, haystack=haystack, seed=seed, index=i, style=style, split=split, size=size,
                 format=format) for i in range(count)]


def chance_bits(doc: Document) -> float:
    """Bits per answer byte of a uniform guess over the task's alphabet."""
    return math.log2(doc.alphabet)
