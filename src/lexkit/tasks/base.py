"""What every retrieval task shares: the :class:`Document` it builds, the :class:`Haystack` it draws
filler from, the :class:`Task` base class and its registry (:data:`TASKS`), task specs (:func:`parse`,
:func:`canonical`, what a training mix draws: :func:`draw_spec`), and :func:`make`, which seeds and
sizes one document and hands it to its task's builder. The tasks themselves are the package's other
rooms, one each (:mod:`lexkit.tasks`)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import math
from typing import Any, ClassVar

import numpy as np

from ..core import checks, registry
from ..core.registry import Registry
from ..core.specs import Param, describe_params, parse_params, spec_text, split_spec
from . import needles
from .needles import held_out, needle_value  # noqa: F401 (the needle values of every task; re-exported)

#: the marker byte of the byte-style needles (never in a haystack)
MARK = needles.TILDE
STYLES = ("bytes", "standard")
SPLITS = ("eval", "train")
LETTERS = needles.LETTERS
DIGITS = needles.DIGITS
#: the most hops, chains and repeats of a cue a spec may ask for
MAX_LINKS = 1000

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
    #: spans of the other candidates, values of the needle's kind that are not the answer: multikey's
    #: other keys, kvthread's other links' values (forward) or keys (backward), ordinal's other occurrences
    distractors: tuple[tuple[int, int], ...] = ()
    format: str = ""  # the needle format of a copy or induction document (lexkit.tasks.needles)
    #: a labelling task's (``khop``): the byte each position must produce, position p reading BOS (p 0) or
    #: ``text[p-1]``, in place of the next byte ``text[p]``; the answer span indexes it. b"": the next bytes
    targets: bytes = b""

    @property
    def prompt(self) -> bytes:
        return self.text[: self.answer[0]]

    @property
    def expected(self) -> bytes:
        return (self.targets or self.text)[self.answer[0] : self.answer[1]]

    @property
    def distance(self) -> int:
        """Bytes from the needle's value to the answer."""
        return self.answer[0] - self.needle[0]

    def candidates(self) -> list[bytes]:
        """What a model that found the right kind of value but not the right one may answer: the
        answer (as :attr:`expected`, with its lead) and each distractor value in its place, distinct;
        only the answer for a document without distractors."""
        lead = self.expected[: len(self.expected) - (self.needle[1] - self.needle[0])]
        out = [self.expected] + [lead + self.text[a:b] for a, b in self.distractors]
        return list(dict.fromkeys(c for c in out if len(c) == len(self.expected)))

    def with_answer(self, answer: bytes) -> Document:
        """The document with ``answer`` (as long as :attr:`expected`) in the answer's place: its
        teacher-forced argmax says whether greedy decoding would produce ``answer``."""
        if len(answer) != len(self.expected):
            raise ValueError(f"an answer of {len(answer)} bytes in place of one of {len(self.expected)}")
        text = self.prompt + answer + self.text[self.answer[1]:]
        return dataclasses.replace(self, text=text)

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
    #: the needle format (:mod:`lexkit.tasks.needles`) of a task that takes ``format=``; None: it takes none
    default_format: ClassVar[str | None] = None
    #: whether its documents draw among the trained formats (their versions are part of its identity)
    draws_formats: ClassVar[bool] = False
    #: its parameters, set by a task spec ``name:key=value,...`` (:func:`parse`) and handed to :meth:`build`
    params: ClassVar[dict[str, Param]] = {}
    #: the values a training mix draws each of these parameters from, uniformly per document (the
    #: others keep their defaults; :func:`draw_spec`)
    mix_choices: ClassVar[dict[str, tuple]] = {}
    #: what a mix draws instead during a curriculum's first part (``lexkit train --curriculum F``):
    #: the easier values of some of :attr:`mix_choices` (kvthread: one hop); {}: no curriculum
    curriculum: ClassVar[dict[str, tuple]] = {}
    #: a labelling task (``khop``): its documents carry :attr:`Document.targets`, every position
    #: supervised; trained and probed in a mix, never scored as a needle (``lexkit retrieval``)
    labels: ClassVar[bool] = False

    @classmethod
    def check_params(cls, values: dict[str, Any]) -> None:
        """A ValueError for parameter values each valid alone but not together (none here)."""

    @classmethod
    def default_size(cls, style: str) -> int:
        """The needle size when none is given (``size``; a task may choose by style)."""
        return cls.size

    @classmethod
    def build(cls, rng: np.random.Generator, haystack: Haystack | None, free: int, before: int, depth: float,
              size: int, split: str, style: str, **params) -> Document:
        """A document with ``free`` bytes of haystack, ``before`` of them ahead of the needle (a
        needle value of ``size`` symbols that belongs to ``split``, :func:`held_out`); ``params``:
        the values of the task's :attr:`params`, defaults filled in."""
        raise NotImplementedError


def _check_task(cls: type[Task]) -> None:
    checks.number(f"task {cls.name!r}: size", cls.size)
    if set(cls.styles) - set(STYLES) or not cls.styles:
        raise ValueError(f"task {cls.name!r}: styles {cls.styles!r} must be among {STYLES}")
    if set(cls.mix_choices) - set(cls.params) or not all(cls.mix_choices.values()):
        raise ValueError(f"task {cls.name!r}: mix_choices {cls.mix_choices!r} must give values of its params "
                         f"({', '.join(cls.params) or 'none'})")
    for values in _choices(cls):
        for key in cls.mix_choices:
            cls.params[key].parse(f"task {cls.name}", key, values[key])
        cls.check_params(values)


#: Every retrieval task by name; ``@lexkit.tasks.register`` adds a user's own.
TASKS: Registry[type[Task]] = Registry("task", Task, _check_task)
register = TASKS.register


def names() -> list[str]:
    """The registered tasks' names, built-in first."""
    return TASKS.names()


def parse(task: str) -> tuple[type[Task], dict[str, Any]]:
    """A task spec ``name[:key=value,...]`` (``kvthread:hops=3,direction=backward``): the task
    registered under its name and the values of its parameters, defaults filled in. ValueError
    naming the bad part and what is valid: an unknown task, parameter or value. Parsed once per
    spec (the training mix asks with every document; a registration anywhere starts afresh)."""
    cls, values = _parsed(str(task), registry.generation())
    return cls, dict(values)


@functools.lru_cache(maxsize=1024)
def _parsed(task: str, generation: int) -> tuple[type[Task], tuple[tuple[str, Any], ...]]:
    name, colon, _ = task.partition(":")
    cls = TASKS.get(name.strip())
    values = parse_params(f"task {cls.name}", cls.params, split_spec(task)[1] if colon else [])
    cls.check_params(values)
    return cls, tuple(values.items())


def get(task: str) -> type[Task]:
    """The task a spec names (ValueError naming the valid ones otherwise; :func:`parse`)."""
    return parse(task)[0]


def check_task(task: str) -> None:
    parse(task)


def check_scored(task: str) -> None:
    """ValueError for a labelling task (:attr:`Task.labels`), which has no needle to score at length."""
    if get(task).labels:
        raise ValueError(f"task {get(task).name} labels every position (its documents carry targets, not a "
                         f"needle asked after a haystack): train and probe it in a mix, --mix {get(task).name}:F")


def canonical(task: str) -> str:
    """A task spec in canonical form: its name, and the parameters that differ from their defaults
    in declaration order (``kvthread:hops=2`` is ``kvthread``)."""
    cls, values = parse(task)
    return spec_text(cls.name, cls.params, values)


def _choices(cls: type[Task], fixed: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every combination of parameter values a training mix of ``cls`` may draw, the others at
    ``fixed`` (a spec's values; default: the defaults)."""
    fixed = {key: param.default for key, param in cls.params.items()} if fixed is None else fixed
    keys = list(cls.mix_choices)
    return [fixed | dict(zip(keys, combo)) for combo in itertools.product(*(cls.mix_choices[k] for k in keys))]


def mix_specs(task: str) -> list[str]:
    """The specs a training mix of ``task`` draws its documents from (:attr:`Task.mix_choices`;
    the task alone when it has none)."""
    cls, fixed = parse(task)
    return [spec_text(cls.name, cls.params, values) for values in _choices(cls, fixed)]


def draw_spec(task: str, rng: np.random.Generator, early: bool = False) -> str:
    """A spec for one training-mix document of ``task``: each parameter of its ``mix_choices``
    drawn uniformly from ``rng`` (nothing drawn, ``task`` returned, for a task without them);
    ``early``: in a curriculum's first part, from its :attr:`Task.curriculum` values where it has
    some (one draw per parameter either way, so the documents after it are the ones without it)."""
    cls = get(task)
    if not cls.mix_choices:
        return task
    pools = cls.mix_choices | (cls.curriculum if early else {})
    values = parse(task)[1] | {key: choices[int(rng.integers(0, len(cls.mix_choices[key])))
                                            % len(choices)]
                                for key, choices in pools.items()}
    return spec_text(cls.name, cls.params, values)


def has_curriculum(task: str) -> bool:
    """Whether a mix of ``task`` draws differently during a curriculum (:attr:`Task.curriculum`)."""
    return bool(get(task).curriculum)


def task_seed(task: str) -> int:
    """The entropy a task adds to its documents' seeds: 64 bits of a hash of its name alone."""
    return int.from_bytes(hashlib.sha256(b"lexkit-task:" + task.encode()).digest()[:8], "big")


def identity(task: str, format: str | None = None) -> dict:
    """What defines a task's documents besides their arguments: its name, its builder's
    version and the seeding rule (a cache of scored documents is keyed by it); and the version of
    the needle ``format`` it is scored in, or, for a task that draws trained formats
    (``induction``), of every trained format."""
    out = {"task": canonical(task), "version": get(task).version, "seeding": SEEDING}
    if format is not None and format != get(task).default_format:
        out["format"] = {format: needles.get(format).version}
    if get(task).draws_formats:
        out["formats"] = {name: needles.get(name).version for name in needles.trained()}
    return out


def check_format(task: str, format: str | None) -> None:
    """ValueError for a format that is not registered, or given to a task that takes none."""
    cls = get(task)
    if format is None:
        return
    if cls.default_format is None:
        takes = [t.name for t in TASKS if t.default_format is not None]
        raise ValueError(f"task {task!r} takes no --format; formats are for {', '.join(takes)}"
                         + (" (induction draws a trained format per document)" if task == "induction" else ""))
    needles.get(format)


def seed_name(task: str, format: str | None = None) -> str:
    """What salts a document's seed: the task's canonical spec (its name, and the parameters
    given other than their defaults), with ``@format`` for a format other than the task's default
    (so the default's documents stay what they were)."""
    spec = canonical(task)
    return spec if format is None or format == get(task).default_format else f"{spec}@{format}"


def mix_sizes(task: str) -> tuple[int, int]:
    """The (low, high) needle sizes a training mix draws ``task``'s documents with."""
    cls = get(task)
    return cls.mix_sizes or (cls.size, cls.size)


#: the smallest needle :func:`fitting_size` lowers a size to (a training mix's floor, the study's)
MIN_FITTING_SIZE = 4


def fitting_size(task: str, length: int, size: int, format: str | None = None) -> int:
    """``size``, lowered (down to :data:`MIN_FITTING_SIZE`) until a ``task`` document in ``format``
    fits ``length`` bytes."""
    while size > MIN_FITTING_SIZE and minimum_length(task, "bytes", size, format) > length:
        size -= 1
    return size


def describe() -> list[tuple[str, str, str, str, str, str]]:
    """(name, default size, styles, parameters with their defaults, what a training mix draws (and
    first, under ``--curriculum``), summary) of every task: ``lexkit tasks``."""
    return [(t.name, str(t.size), ", ".join(t.styles), describe_params(t.params), _draws(t), t.summary) for t in TASKS]


def _draws(cls: type[Task]) -> str:
    """``hops 1|2, direction forward|backward; first hops 1``: a mix's choices, then its curriculum's."""
    if not cls.mix_choices:
        return "-"
    out = ", ".join(f"{key} {'|'.join(map(str, values))}" for key, values in cls.mix_choices.items())
    if cls.curriculum:
        out += "; first " + ", ".join(f"{key} {'|'.join(map(str, v))}" for key, v in cls.curriculum.items())
    return out


def check_depth(depth: float) -> None:
    if not (isinstance(depth, (int, float)) and 0 <= depth <= 100):
        raise ValueError(f"depth {depth!r} is outside [0, 100] (percent of the haystack before the needle)")


def rng_for(task: str, split: str, seed: int, *key: int) -> np.random.Generator:
    """The generator of one document: a function of (split, seed, the task's name, key) alone."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return np.random.default_rng([_SALT[split], int(seed), task_seed(task), *(int(k) for k in key)])


def minimum_length(task: str, style: str = "bytes", size: int | None = None, format: str | None = None) -> int:
    """The bytes of a document of ``task`` (a spec: its parameters count) with no haystack at all
    (the shortest valid length)."""
    cls, values = parse(task)
    size = cls.default_size(style) if size is None else size
    form = None if cls.default_format is None else needles.get(format or cls.default_format)
    trained = tuple(needles.get(n) for n in needles.trained()) if cls.draws_formats else ()
    return _minimum(cls, cls.version, style, size, form, form and form.version, trained, tuple(values.items()))


@functools.lru_cache(maxsize=4096)
def _minimum(cls: type[Task], version: int, style: str, size: int, form: type[needles.Format] | None,
             form_version: int | None, trained: tuple, values: tuple) -> int:
    """:func:`minimum_length`, built once per task class, version, style, size, format and
    parameter values (the training mix asks for it with every document)."""
    return len(cls.build(np.random.default_rng(0), Haystack(b"x"), 0, 0, 0.0, size, "eval", style,
                          **({} if form is None else {"format": form.name}), **dict(values)).text)


def _format_argument(cls: type[Task], format: str | None) -> dict:
    return {} if cls.default_format is None else {"format": format or cls.default_format}


def make(task: str, length: int, depth: float, *, haystack: Haystack | None, seed: int = 0, index: int = 0,
         style: str = "bytes", split: str = "eval", size: int | None = None, format: str | None = None) -> Document:
    """Document ``index`` of a cell (task, length, depth): ``length`` bytes of text in all, the
    needle at ``depth`` percent of the haystack. Deterministic in (split, seed, task, format,
    length, depth, index). ``task``: a task spec, its parameters after a colon
    (``kvthread:hops=3``, :func:`parse`); ``size``: letters of a copy segment / digits of a key /
    symbols of a hash (default: the task's); ``format``: the needle format of a task that takes
    one (``copy``: :mod:`lexkit.tasks.needles`, default ``tilde``). ValueError for an unknown task,
    parameter, format or style, a depth outside [0, 100] or a length too short for the needle."""
    cls, values = parse(task)
    check_format(task, format)
    check_depth(depth)
    if style not in cls.styles:
        raise ValueError(f"unknown style {style!r} for task {task!r}; valid: {', '.join(cls.styles)}")
    size = cls.default_size(style) if size is None else size
    checks.number("size", size)
    need = minimum_length(task, style, size, format)
    if length < need:
        raise ValueError(f"length {length} is shorter than the {task} needle and question ({need} bytes); "
                         f"use lengths of at least {need}")
    if style == "bytes" and haystack is None:
        raise ValueError("the byte style draws its haystack from text: give a Haystack")
    rng = rng_for(seed_name(task, format), split, seed, length, round(depth * 1000), index)
    free = length - need
    return cls.build(rng, haystack, free, round(free * depth / 100), float(depth), size, split, style,
                      **_format_argument(cls, format), **values)


def documents(task: str, length: int, depth: float, count: int, *, haystack: Haystack | None, seed: int = 0,
              style: str = "bytes", split: str = "eval", size: int | None = None,
              format: str | None = None) -> list[Document]:
    """``count`` documents of one cell (see :func:`make`)."""
    return [make(task, length, depth, haystack=haystack, seed=seed, index=i, style=style, split=split, size=size,
                 format=format) for i in range(count)]


def chance_bits(doc: Document) -> float:
    """Bits per answer byte of a uniform guess over the task's alphabet."""
    return math.log2(doc.alphabet)


def guess_rate(doc: Document) -> float:
    """The exact match of guessing uniformly among a document's candidates (:meth:`Document.candidates`):
    1 / their number where it has distractors (a kvthread document of 2 chains of 2 hops: 1/4); else
    a uniform guess over the alphabet, one in alphabet^(answer's length)."""
    if doc.distractors:
        return 1.0 / len(doc.candidates())
    return float(doc.alphabet) ** -(doc.needle[1] - doc.needle[0])
