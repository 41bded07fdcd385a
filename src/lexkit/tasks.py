"""Retrieval tasks: documents that hide a needle in a haystack and ask for it back.

Every document is ``text`` = haystack before + needle + haystack after + question + answer, and
knows where its answer is: ``answer`` is the byte span the model must produce (the prompt is
everything before it) and ``needle`` the span where the same bytes were given earlier. The
tasks, each in two styles but ``induction``:

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
* ``induction``: a copy needle in a trained format drawn per document (the training mix of the skill).
* ``kvthread`` (Needle Threading, Roberts et al., ICLR 2025; HashHop, magicproduct/hash-hop):
  ``chains`` chains of ``hops`` + 1 random hashes of ``size`` symbols a-z, A-Z, each link an
  assignment scattered through the haystack; asked for the hash ``hops`` links forward from a
  chain's first hash, or backward from its last. Byte style: links ``~A=B``, the question
  ``~A>>`` (one arrow a hop; ``<`` backward); standard style: links "A = B." in the grass filler,
  the question in words. The needle is the link that holds the answer.
* ``ordinal`` (the structure of MRCR): one cue given ``count`` times with distinct values, asked
  for the value of its ``which``-th occurrence. Byte style ``~cue=value`` asked as ``~cue#2=``;
  standard style RULER's needle, one word throughout, "What is the second special magic number
  for {word} ...".

Neither of the last two can be answered by copying what follows the question's cue: a copier
gives the 1-hop value (kvthread forward), nothing (backward: the asked hash is never a key) or
the latest occurrence's value (ordinal). Their parameters are set in the task's spec,
``kvthread:hops=3,direction=backward`` (:func:`parse`, as a scheme's or a pattern's).

Depth (percent, the needle-in-a-haystack convention): the share of the haystack placed before
the needle; 0 puts the needle first, 100 right before the question (the other pieces of a
kvthread or ordinal document may stand anywhere, ordinal's later occurrences after it). The
haystack of the byte style is text of a corpus (``Haystack``); the marker byte never occurs in it.

No leaks between training and evaluation: a needle value (segment, key, each hash of a kvthread
chain, each value of an ordinal cue) belongs to the evaluation split or the training split by a
hash of its bytes (:func:`held_out`), generators draw from seeds salted by split, and the
training mix takes its haystack from the training documents, evaluation from validation documents.

**The registry.** Tasks are kept by name (:data:`TASKS`), like position schemes and attention
patterns: a task is a :class:`Task` subclass registered with :func:`register`, and a module that
registers its own is loaded with ``--import MODULE`` (``lexkit tasks --import MODULE`` lists it;
``lexkit retrieval --task``, ``lexkit train --mix`` and the study take its name)::

    @tasks.register
    class Reverse(tasks.Task):
        name = "reverse"  # the registry key and the salt of its documents' seeds
        size = 8  # default needle size; mix_sizes: the range a training mix draws from
        summary = "a segment of letters, asked for backwards"
        params = {}  # name -> specs.Param, set in a spec ``reverse:key=value``; mix_choices: what a mix draws

        @classmethod
        def build(cls, rng, haystack, free, before, depth, size, split, style, **params):
            ...  # a Document of exactly free + minimum_length bytes (tests/fixtures/my_task.py)

A document's generator is seeded by (split, seed, the task's *name*, length, depth, index)
(:func:`rng_for`; with the parameters given other than their defaults, :func:`seed_name`), so
adding or removing a task changes no other task's documents. Whatever changes a task's documents
(its builder: bump its ``version``; the seeding rule: :data:`SEEDING`; its parameters: part of
its canonical spec) changes its :func:`identity`, which caches of scored documents are keyed by.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import math
from typing import Any, ClassVar

import numpy as np

from . import checks, needles, registry
from .needles import held_out, needle_value  # noqa: F401 (the needle values of every task; re-exported)
from .registry import Registry
from .specs import Param, describe_params, format_spec, parse_params, split_spec

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
# kvthread: Needle Threading (Roberts et al., ICLR 2025) and HashHop (magicproduct/hash-hop).
#: the symbols of a kvthread hash (HashHop's: a-z and A-Z)
HASH = LETTERS + needles.CAPITALS
DIRECTIONS = ("forward", "backward")
#: kvthread's supervision: the asked hop count's answer alone, or an answer at every hop count
#: (Sanford, Hsu and Telgarsky 2024 supervise every position of k-hop induction; in a language
#: model's terms, the shorter questions of the same chain follow the asked one, answered)
SUPERVISION = ("answer", "every")
#: the byte style's question: the hash it starts from, then one arrow per hop
ARROWS = {"forward": b">", "backward": b"<"}
KVTHREAD_STANDARD_SIZE = 8
KVTHREAD_TASK = ("Some assignments of random hashes, each written A = B, are hidden within the following text. "
                 "Make sure to memorize them. I will quiz you about chains of them afterwards.")
KVTHREAD_PAIR = "{key} = {value}."
KVTHREAD_QUESTION = {
    "forward": "Start at {hash} and follow the assignments {hops} forward (A = B leads from A to B). Which hash do "
               "you reach? The hash {hops} after {hash} is",
    "backward": "Start at {hash} and follow the assignments {hops} backward (A = B leads back from B to A). Which "
                "hash do you reach? The hash {hops} before {hash} is",
}
# ordinal: the structure of MRCR (multi-round co-reference), in RULER's words for the standard style.
#: letters of the byte style's cue
ORDINAL_CUE = 3
ORDINAL_TASK = ("The special magic number of one word is given several times within the following text, a "
                "different number each time. Make sure to memorize them in order. I will quiz you about them "
                "afterwards.")
ORDINAL_QUESTION = ("What is the {nth} special magic number for {word} mentioned in the provided text? "
                    "The {nth} special magic number for {word} mentioned in the provided text is")
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
    #: the needle format (:mod:`lexkit.needles`) of a task that takes ``format=``; None: it takes none
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
    kind, values = _parsed(str(task), registry.generation())
    return kind, dict(values)


@functools.lru_cache(maxsize=1024)
def _parsed(task: str, generation: int) -> tuple[type[Task], tuple[tuple[str, Any], ...]]:
    name, colon, _ = task.partition(":")
    kind = TASKS.get(name.strip())
    values = parse_params(f"task {kind.name}", kind.params, split_spec(task)[1] if colon else [])
    kind.check_params(values)
    return kind, tuple(values.items())


def get(task: str) -> type[Task]:
    """The task a spec names (ValueError naming the valid ones otherwise; :func:`parse`)."""
    return parse(task)[0]


def check_task(task: str) -> None:
    parse(task)


def canonical(task: str) -> str:
    """A task spec in canonical form: its name, and the parameters that differ from their defaults
    in declaration order (``kvthread:hops=2`` is ``kvthread``)."""
    kind, values = parse(task)
    return format_spec(kind.name, kind.params, values)


def _choices(kind: type[Task], fixed: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every combination of parameter values a training mix of ``kind`` may draw, the others at
    ``fixed`` (a spec's values; default: the defaults)."""
    fixed = {key: param.default for key, param in kind.params.items()} if fixed is None else fixed
    keys = list(kind.mix_choices)
    return [fixed | dict(zip(keys, combo)) for combo in itertools.product(*(kind.mix_choices[k] for k in keys))]


def mix_specs(task: str) -> list[str]:
    """The specs a training mix of ``task`` draws its documents from (:attr:`Task.mix_choices`;
    the task alone when it has none)."""
    kind, fixed = parse(task)
    return [format_spec(kind.name, kind.params, values) for values in _choices(kind, fixed)]


def draw_spec(task: str, rng: np.random.Generator, early: bool = False) -> str:
    """A spec for one training-mix document of ``task``: each parameter of its ``mix_choices``
    drawn uniformly from ``rng`` (nothing drawn, ``task`` returned, for a task without them);
    ``early``: in a curriculum's first part, from its :attr:`Task.curriculum` values where it has
    some (one draw per parameter either way, so the documents after it are the ones without it)."""
    kind = get(task)
    if not kind.mix_choices:
        return task
    pools = kind.mix_choices | (kind.curriculum if early else {})
    values = parse(task)[1] | {key: choices[int(rng.integers(0, len(kind.mix_choices[key])))
                                            % len(choices)]
                                for key, choices in pools.items()}
    return format_spec(kind.name, kind.params, values)


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
    kind = get(task)
    if format is None:
        return
    if kind.default_format is None:
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


def describe() -> list[tuple[str, str, str, str, str, str]]:
    """(name, default size, styles, parameters with their defaults, what a training mix draws (and
    first, under ``--curriculum``), summary) of every task: ``lexkit tasks``."""
    return [(t.name, str(t.size), ", ".join(t.styles), describe_params(t.params), _draws(t), t.summary) for t in TASKS]


def _draws(kind: type[Task]) -> str:
    """``hops 1|2, direction forward|backward; first hops 1``: a mix's choices, then its curriculum's."""
    if not kind.mix_choices:
        return "-"
    out = ", ".join(f"{key} {'|'.join(map(str, values))}" for key, values in kind.mix_choices.items())
    if kind.curriculum:
        out += "; first " + ", ".join(f"{key} {'|'.join(map(str, v))}" for key, v in kind.curriculum.items())
    return out


def check_depth(depth: float) -> None:
    if not (isinstance(depth, (int, float)) and 0 <= depth <= 100):
        raise ValueError(f"depth {depth!r} is outside [0, 100] (percent of the haystack before the needle)")


def rng_for(task: str, split: str, seed: int, *key: int) -> np.random.Generator:
    """The generator of one document: a function of (split, seed, the task's name, key) alone."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return np.random.default_rng([_SALT[split], int(seed), task_seed(task), *(int(k) for k in key)])


def _word(rng: np.random.Generator, avoid: set[bytes], letters: int = 6) -> bytes:
    table = np.frombuffer(LETTERS, dtype=np.uint8)
    while True:
        word = table[rng.integers(0, 26, letters)].tobytes()
        if word not in avoid:
            return word


def minimum_length(task: str, style: str = "bytes", size: int | None = None, format: str | None = None) -> int:
    """The bytes of a document of ``task`` (a spec: its parameters count) with no haystack at all
    (the shortest valid length)."""
    kind, values = parse(task)
    size = kind.default_size(style) if size is None else size
    form = None if kind.default_format is None else needles.get(format or kind.default_format)
    trained = tuple(needles.get(n) for n in needles.trained()) if kind.draws_formats else ()
    return _minimum(kind, kind.version, style, size, form, form and form.version, trained, tuple(values.items()))


@functools.lru_cache(maxsize=4096)
def _minimum(kind: type[Task], version: int, style: str, size: int, form: type[needles.Format] | None,
             form_version: int | None, trained: tuple, values: tuple) -> int:
    """:func:`minimum_length`, built once per task class, version, style, size, format and
    parameter values (the training mix asks for it with every document)."""
    return len(kind.build(np.random.default_rng(0), Haystack(b"x"), 0, 0, 0.0, size, "eval", style,
                          **({} if form is None else {"format": form.name}), **dict(values)).text)


def _format_argument(kind: type[Task], format: str | None) -> dict:
    return {} if kind.default_format is None else {"format": format or kind.default_format}


_PASSKEY_NEEDLE_BYTES = b"\nthe pass key is " + MARK


def make(task: str, length: int, depth: float, *, haystack: Haystack | None, seed: int = 0, index: int = 0,
         style: str = "bytes", split: str = "eval", size: int | None = None, format: str | None = None) -> Document:
    """Document ``index`` of a cell (task, length, depth): ``length`` bytes of text in all, the
    needle at ``depth`` percent of the haystack. Deterministic in (split, seed, task, format,
    length, depth, index). ``task``: a task spec, its parameters after a colon
    (``kvthread:hops=3``, :func:`parse`); ``size``: letters of a copy segment / digits of a key /
    symbols of a hash (default: the task's); ``format``: the needle format of a task that takes
    one (``copy``: :mod:`lexkit.needles`, default ``tilde``). ValueError for an unknown task,
    parameter, format or style, a depth outside [0, 100] or a length too short for the needle."""
    kind, values = parse(task)
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
                      **_format_argument(kind, format), **values)


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


@register
class KVThread(Task):
    """Needle Threading (Roberts et al., "Needle Threading: Can LLMs Follow Threads through
    Near-Million-Scale Haystacks?", ICLR 2025) and HashHop (magicproduct/hash-hop): ``chains``
    chains of ``hops`` + 1 random hashes, each link an assignment ``A = B``; the links of every
    chain are scattered through the haystack in random order and the question asks for the hash
    ``hops`` links forward from the first hash of one chain, or backward from its last. The link
    that holds the answer is the needle (at ``depth``); the other chains are distractors of the
    same shape, so the answer is no chain's end by position alone."""

    name = "kvthread"
    summary = ("hash links ~A=B scattered in the haystack; asked for the hash `hops` links forward or backward "
               "(Needle Threading, HashHop)")
    size = 4
    params = {
        "hops": Param(int, 2, "links from the asked hash to the answer", lambda k: 1 <= k <= MAX_LINKS,
                      f"1..{MAX_LINKS}"),
        "direction": Param(str, "forward", "forward: from a chain's first hash; backward: from its last",
                           lambda d: d in DIRECTIONS, " or ".join(DIRECTIONS)),
        "chains": Param(int, 2, "chains in the document: one asked, the others distractors",
                        lambda c: 1 <= c <= MAX_LINKS, f"1..{MAX_LINKS}"),
        "supervise": Param(str, "answer", "answer: the question's hash alone; every: after it, the asked chain "
                           "also asked 1..hops-1 hops from the same start, each answered (a hop answer at every link)",
                           lambda v: v in SUPERVISION, " or ".join(SUPERVISION)),
    }
    mix_choices = {"hops": (1, 2), "direction": DIRECTIONS}
    curriculum = {"hops": (1,)}  # one hop first (Guo et al. 2025's phase before two; Sanford et al. 2024)

    @classmethod
    def default_size(cls, style: str) -> int:
        """4 symbols in lexkit's byte needles (a 2-hop document fits 64 bytes), 8 in the standard style."""
        return KVTHREAD_STANDARD_SIZE if style == "standard" else cls.size

    @classmethod
    def build(cls, rng, haystack, free, before, depth, size, split, style, hops=2, direction="forward",
              chains=2, supervise="answer") -> Document:
        hashes = _distinct(rng, HASH, size, split, (hops + 1) * chains, cls.name)  # chain c: [c * (hops + 1):]
        links = [(hashes[c * (hops + 1) + j], hashes[c * (hops + 1) + j + 1]) for c in range(chains)
                 for j in range(hops)]
        forward = direction == "forward"
        asked = hops - 1 if forward else 0  # the link that holds the answer: the asked chain's last or first
        start = hashes[0] if forward else hashes[hops]
        reached = [hashes[k] if forward else hashes[hops - k] for k in range(hops + 1)]  # k hops from start
        answer = reached[hops]
        standard = style == "standard"
        if standard:  # " A = B." in the grass; the answer after a space, as the passkey's
            head, lead = (KVTHREAD_TASK + "\n").encode(), b" "
            pieces = [b" " + KVTHREAD_PAIR.format(key=k.decode(), value=v.decode()).encode() for k, v in links]
            key_at, value_at = 1, 1 + size + len(" = ")

            def ask(k: int) -> bytes:
                hop_text = f"{k} hop" + ("s" if k > 1 else "")
                return ("\n" + KVTHREAD_QUESTION[direction].format(hash=start.decode(), hops=hop_text)).encode()
        else:  # ~A=B, asked as ~A>> (one arrow a hop)
            head, lead = b"", b""
            pieces = [MARK + k + b"=" + v for k, v in links]
            key_at, value_at = len(MARK), len(MARK) + size + 1

            def ask(k: int) -> bytes:
                return MARK + start + ARROWS[direction] * k
        question = ask(hops)
        # supervise=every: the shorter questions after the answer (never in its prompt), each answered
        tail = b"".join(ask(k) + lead + reached[k] for k in range(1, hops)) if supervise == "every" else b""
        cuts = [before] + [int(c) for c in rng.integers(0, free + 1, len(links) - 1)]  # the others: anywhere
        order = [asked] + [i for i in range(len(links)) if i != asked]
        body, starts = _weave(free, [(cut, pieces[i]) for cut, i in zip(cuts, order)],
                              _filler(rng, haystack, style, free))
        text = head + body + question
        at = [len(head) + s for s in starts]  # where each link starts, the asked one first
        needle = at[0] + (value_at if forward else key_at)
        other = value_at if forward else key_at  # the other links' values (forward) or keys (backward)
        return Document(cls.name, text + lead + answer + tail, (len(text), len(text) + len(lead) + size),
                        (needle, needle + size), float(depth), len(HASH),
                        tuple((a + other, a + other + size) for a in at[1:]))


@register
class Ordinal(Task):
    """The structure of MRCR (multi-round co-reference: Vodrahalli et al., "Michelangelo", 2024;
    OpenAI's openai/mrcr): one cue given ``count`` times, each time with another value, and the
    question asks for the value of its ``which``-th occurrence (1 = the first; ``any``: drawn per
    document). The asked occurrence is the needle (at ``depth``), the earlier ones before it and
    the later ones after, so neither recency nor primacy answers but for one position."""

    name = "ordinal"
    summary = "one cue ~key=value given `count` times with different values; asked for the i-th (MRCR)"
    size = 4
    params = {
        "count": Param(int, 4, "times the cue is given", lambda n: 2 <= n <= MAX_LINKS, f"2..{MAX_LINKS}"),
        "which": Param(str, "any", "the occurrence asked for, 1..count, or any (drawn per document)",
                       lambda w: w == "any" or (w.isascii() and w.isdigit() and w[0] != "0"), "any or 1..count"),
    }

    @classmethod
    def check_params(cls, values):
        if values["which"] != "any" and int(values["which"]) > values["count"]:
            raise ValueError(f"task ordinal: parameter which={values['which']} is out of range (must be any or "
                             f"1..count, count={values['count']})")

    @classmethod
    def default_size(cls, style: str) -> int:
        """4 letters in lexkit's byte needles, RULER's 7 digits in the standard style."""
        return RULER_DIGITS if style == "standard" else cls.size

    @classmethod
    def build(cls, rng, haystack, free, before, depth, size, split, style, count=4, which="any") -> Document:
        standard = style == "standard"
        alphabet = DIGITS[1:] if standard else LETTERS  # RULER's numbers of nonzero digits; letters
        values = _distinct(rng, alphabet, size, split, count, cls.name)
        i = int(rng.integers(1, count + 1)) if which == "any" else int(which)
        if standard:  # RULER's needle, one word throughout; the answer after a space, as the passkey's
            cue = _word(rng, set()).decode()
            head, lead, tail = (ORDINAL_TASK + "\n").encode(), b" ", b"."
            given = b" " + RULER_NEEDLE.split("{value}")[0].format(word=cue).encode()

            def question(j: int) -> bytes:
                return ("\n" + ORDINAL_QUESTION.format(nth=_nth(j), word=cue)).encode()
        else:  # ~cue=value, asked as ~cue#2=
            cue = _word(rng, set(), ORDINAL_CUE).decode()
            head, lead, tail = b"", b"", b""
            given = MARK + cue.encode() + b"="

            def question(j: int) -> bytes:
                return MARK + cue.encode() + b"#" + str(j).encode() + b"="
        # a question shorter than the longest (fewer digits, a shorter ordinal word) leaves the rest to
        # the filler, before and after the needle in the depth's proportion: every document has one length
        spare = max(len(question(j)) for j in range(1, count + 1)) - len(question(i))
        free, before = free + spare, before + round(spare * depth / 100)
        cuts = sorted(int(c) for c in rng.integers(0, before + 1, i - 1)) + [before] + sorted(
            int(c) for c in rng.integers(before, free + 1, count - i))  # occurrence order, the asked at `before`
        body, starts = _weave(free, [(cut, given + v + tail) for cut, v in zip(cuts, values)],
                              _filler(rng, haystack, style, free))
        text = head + body + question(i)
        at = [len(head) + s + len(given) for s in starts]  # where each occurrence's value starts
        return Document(cls.name, text + lead + values[i - 1], (len(text), len(text) + len(lead) + size),
                        (at[i - 1], at[i - 1] + size), float(depth), len(alphabet),
                        tuple((a, a + size) for j, a in enumerate(at) if j != i - 1))


def _nth(i: int) -> str:
    """``first``, ``second``, ... ``tenth``, then ``11th``, ``21st``, ``22nd``, ``23rd``, ..."""
    words = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
    if i <= len(words):
        return words[i - 1]
    suffix = "th" if i % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(i % 10, "th")
    return f"{i}{suffix}"


def _distinct(rng, alphabet: bytes, size: int, split: str, count: int, task: str) -> list[bytes]:
    """``count`` distinct needle values of ``size`` symbols of ``alphabet``, each of ``split``."""
    if count > len(alphabet) ** size // 4:
        raise ValueError(f"task {task}: {count} distinct values of {size} symbols (an alphabet of {len(alphabet)}) "
                         f"are more than a quarter of those there are; use a larger --size")
    out: list[bytes] = []
    for _ in range(count):
        out.append(needle_value(rng, alphabet, size, split, set(out)))
    return out


def _weave(free: int, pieces: list[tuple[int, bytes]], filler) -> tuple[bytes, list[int]]:
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


def _filler(rng, haystack: Haystack | None, style: str, free: int):
    """The filler between a document's pieces: slices of the corpus at random places (byte
    style), or Landmark's grass sliced in characters (standard style)."""
    if style == "standard":
        grass = _grass(free).encode()
        return lambda start, end: grass[start:end]
    return lambda start, end: haystack.take(rng, end - start)


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


def guess_rate(doc: Document) -> float:
    """The exact match of guessing uniformly among a document's candidates (:meth:`Document.candidates`):
    1 / their number where it has distractors (a kvthread document of 2 chains of 2 hops: 1/4); else
    a uniform guess over the alphabet, one in alphabet^(answer's length)."""
    if doc.distractors:
        return 1.0 / len(doc.candidates())
    return float(doc.alphabet) ** -(doc.needle[1] - doc.needle[0])
