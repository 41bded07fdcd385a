"""A sweep's configuration file (``lexkit sweep CONFIG.json``): the arms, each a row of table G with
its own training, and the recipe, seeds and scoring they share. docs/hunt.md has the format;
benchmarks/sweeps/hunt.json is an example.

::

    {"name": "hunt", "seeds": 3,
     "arms": [{"label": "hwfa16", "layout": "hwfa:W=16,shift=0.5"},
              {"label": "alibi-shift", "scheme": "alibi", "train": {"token_shift": 0.5}},
              {"label": "hwfa16-4l", "layout": "hwfa:W=16,shift=0.5", "train": {"n_layers": 4}, "steps": 6000}]}

Every other key has the default of :class:`SweepConfig`: the measured recipe of table G
(:data:`lexkit.study.recipe.RECIPE`: ``quick``, batch 64, lr 3e-3, ``induction:0.75``, token shift
0.5, 4,000 steps, no stop rule), copy needles in the trained and held-out formats and the tasks
``kvthread`` and ``ordinal``, 20 needles per cell, under ``causal`` attention (the arm's own layout).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ... import tasks
from ...core import checks
from ...core.errors import LexkitError
from ...data.mix import mix_text, parse_mix
from ...instruments.evaluate import paired
from ...instruments.retrieval.grid import DEFAULT_MULTIPLES
from ...layouts import check_pattern
from ...model.gpt import check_token_shift
from ...training import presets, stopping
from ..recipe import RECIPE, Recipe

#: the most arms and seeds a sweep takes
MAX_ARMS, MAX_SEEDS = 1000, 100
#: the settings an arm's ``train`` may not set: the sweep's own keys (``steps``) and what a run is
#: scored and named by (its seed, its data)
NOT_TRAIN = {"steps", "seed", "data", "mix", "stop", "layout", "scheme"}


#: how a message names the type a key takes
KINDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


class SweepConfigError(LexkitError, ValueError):
    """A sweep configuration that cannot run: the file, the key and what would be valid."""


@dataclasses.dataclass(frozen=True)
class Arm:
    """One arm: its ``label`` (a row of the sweep's table), the ``scheme`` (with a ``layout``, the
    scheme of the layers that name none; modifiers go in the layout string), extra ``lexkit train``
    settings (``train``: :func:`lexkit.training.settings.configs` keywords, e.g. ``token_shift``,
    ``n_layers``, ``d_model``, ``lr``, ``random_positions``, ``untied_head``), its own ``steps``,
    ``patterns`` and training ``mix`` (None: the sweep's)."""

    label: str
    scheme: str = "rope"
    layout: str | None = None
    train: dict[str, Any] = dataclasses.field(default_factory=dict)
    steps: int | None = None
    patterns: tuple[str, ...] | None = None
    mix: str | None = None


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """A sweep: its ``arms`` on ``seeds`` seeds each (from ``first_seed``: 0, 1, 2 by default), trained with
    one recipe (``preset``, ``batch``, ``lr``, ``mix``, ``token_shift``, ``steps``, ``stop``), scored on
    ``samples`` needles per length and depth in every copy format and each of ``tasks``, under ``patterns``,
    with the paired bpb on at most ``eval_docs`` validation documents of ``data`` (table G's ``docs``);
    ``name`` heads its table."""

    arms: tuple[Arm, ...]
    name: str = "sweep"
    preset: str = RECIPE.preset
    batch: int = RECIPE.batch
    lr: float = RECIPE.lr
    mix: str = RECIPE.mix
    token_shift: float = RECIPE.token_shift
    steps: int = RECIPE.steps
    stop: str = ""
    seeds: int = 3
    first_seed: int = 0
    samples: int = 20
    patterns: tuple[str, ...] = ("causal",)
    tasks: tuple[str, ...] = ("kvthread", "ordinal")
    data: str = "stdlib"
    eval_docs: int = paired.DOCUMENTS
    #: every run's training step compiled (true/false; null or absent: the device's default, lexkit.training.compiled);
    #: how the arms train, not what: ``lexkit sweep --compile/--no-compile`` overrides it
    compile: bool | None = None

    def recipe(self) -> Recipe:
        return Recipe(self.preset, self.batch, self.lr, self.mix, self.steps, self.token_shift, stop=self.stop)

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        if not out["first_seed"]:  # a sweep from seed 0 writes the config it wrote before the key
            del out["first_seed"]
        if out["compile"] is None:  # likewise a sweep that does not say
            del out["compile"]
        out["arms"] = [{k: v for k, v in arm.items() if v not in (None, {}) or k == "label"} for arm in out["arms"]]
        return out


def load(path: str | Path) -> SweepConfig:
    """The sweep configuration in the JSON file ``path``, checked (:func:`parse`)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SweepConfigError(f"sweep config {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SweepConfigError(f"sweep config {path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    return parse(data, f"sweep config {path}")


def parse(data: Any, where: str = "sweep config") -> SweepConfig:
    """A :class:`SweepConfig` from its JSON object; a :class:`SweepConfigError` naming ``where``, the
    key (``arms[2].train.n_layers``) and what is valid for anything that could not train or score."""
    def bad(key: str, why: str) -> SweepConfigError:
        return SweepConfigError(f"{where}: {key}: {why}")

    if not isinstance(data, dict):
        raise bad("the file", f"a JSON object is expected (with \"arms\"), got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(SweepConfig)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise bad(unknown[0], f"unknown key; keys: {', '.join(fields)}")
    if not isinstance(data.get("arms"), list) or not data["arms"]:
        raise bad("arms", "a non-empty list of arms is required, e.g. [{\"label\": \"hwfa\", \"layout\": \"hwfa\"}]")
    values: dict[str, Any] = {}
    for name, field in fields.items():
        if name == "arms" or name not in data:
            continue
        value, kind = data[name], bool if name == "compile" else type(field.default)
        if name == "compile" and value is None:  # null: the device's default, as when absent
            continue
        if kind is tuple:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise bad(name, f"a list of strings is expected, got {value!r}")
            value = tuple(value)
        elif kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
            raise bad(name, f"{KINDS[kind]} is expected, got {value!r}")
        values[name] = value
    try:
        values = _checked(values)
    except ValueError as exc:
        raise bad(_key_of(exc), str(exc)) from None
    cfg = SweepConfig(arms=(), **values)
    arms = tuple(_arm(item, i, cfg, bad) for i, item in enumerate(data["arms"]))
    labels = [arm.label for arm in arms]
    twice = next((label for label in labels if labels.count(label) > 1), None)
    if twice is not None:
        raise bad("arms", f"two arms are labelled {twice!r}: labels name the rows of the table")
    if len(arms) > MAX_ARMS:
        raise bad("arms", f"at most {MAX_ARMS} arms, got {len(arms)}")
    return dataclasses.replace(cfg, arms=arms)


def _key_of(exc: ValueError) -> str:
    return getattr(exc, "key", "the recipe")


def _checked(values: dict[str, Any]) -> dict[str, Any]:
    """The sweep-wide values checked and written canonically (a ValueError carrying the ``key``)."""
    def fail(key: str, why: str) -> ValueError:
        exc = ValueError(why)
        exc.key = key
        return exc

    out = dict(values)
    if out.get("preset", RECIPE.preset) not in presets.PRESETS:
        raise fail("preset", f"unknown preset {out['preset']!r}; valid: {', '.join(presets.PRESETS)}")
    for key, top in (("seeds", MAX_SEEDS), ("samples", checks.MAX_COUNT), ("eval_docs", checks.MAX_COUNT),
                     ("steps", checks.MAX_COUNT), ("batch", checks.MAX_COUNT)):
        try:
            checks.number(key, out.get(key), maximum=top)
        except ValueError as exc:
            raise fail(key, str(exc)) from None
    try:  # the goal's flatness is decided on the paired ratio's interval over documents (docs/evaluation.md)
        checks.number("eval_docs", out.get("eval_docs"), minimum=2, strict=False)
    except ValueError as exc:
        raise fail("eval_docs", f"{exc}: the paired bpb's interval over documents needs at least 2 documents, "
                                "and the goal's flatness is decided on it") from None
    try:
        checks.number("first_seed", out.get("first_seed", 0), maximum=MAX_SEEDS, minimum=0, strict=False)
    except ValueError as exc:
        raise fail("first_seed", str(exc)) from None
    for key, run in (("stop", lambda v: stopping.canonical(v)), ("mix", lambda v: mix_text(parse_mix(v))),
                     ("tasks", lambda v: tuple(tasks.canonical(t) for t in v))):
        if key in out:
            try:
                out[key] = run(out[key])
            except ValueError as exc:
                raise fail(key, str(exc)) from None
    if "token_shift" in out:  # checked even where every arm shifts itself: a sweep-wide value is the recipe's
        try:
            check_token_shift(out["token_shift"])
        except ValueError as exc:
            raise fail("token_shift", str(exc)) from None
    longest = max(DEFAULT_MULTIPLES) * presets.PRESETS[out.get("preset", RECIPE.preset)]["train_len"]
    for task in out.get("tasks", ()):
        need = tasks.minimum_length(task, "bytes")
        if need > longest:
            raise fail("tasks", f"{task}'s documents need at least {need} bytes, more than the longest length the "
                                f"sweep scores ({max(DEFAULT_MULTIPLES)}x the training length = {longest}): it would "
                                "score nothing; give fewer hops, chains or repeats")
    for pattern in out.get("patterns", ()):
        try:
            check_pattern(pattern)
        except ValueError as exc:
            raise fail("patterns", str(exc)) from None
    if "patterns" in out and not out["patterns"]:
        raise fail("patterns", "at least one pattern, e.g. [\"causal\"]")
    return out


def _arm(item: Any, index: int, cfg: SweepConfig, bad) -> Arm:
    """One arm, its keys and types checked."""
    where = f"arms[{index}]"
    if not isinstance(item, dict):
        raise bad(where, f"an object is expected (with \"label\"), got {item!r}")
    fields = {f.name for f in dataclasses.fields(Arm)}
    unknown = sorted(set(item) - fields)
    if unknown:
        raise bad(f"{where}.{unknown[0]}", f"unknown key; keys of an arm: {', '.join(sorted(fields))}")
    label = item.get("label")
    if not isinstance(label, str) or not label.strip():
        raise bad(f"{where}.label", "every arm needs a label (a non-empty string)")
    where = f"arms[{index}] ({label})"
    train = item.get("train", {})
    if not isinstance(train, dict):
        raise bad(f"{where}.train", f"an object of lexkit train settings is expected, got {train!r}")
    taken = sorted(set(train) & NOT_TRAIN)
    if taken:
        raise bad(f"{where}.train.{taken[0]}", "set by the sweep (or the arm's own key), not in train")
    patterns = item.get("patterns")
    if patterns is not None and (not isinstance(patterns, list) or not patterns
                                 or not all(isinstance(p, str) for p in patterns)):
        raise bad(f"{where}.patterns", f"a non-empty list of patterns is expected, got {patterns!r}")
    steps, mix = item.get("steps"), item.get("mix")
    try:
        mix = None if mix is None else mix_text(parse_mix(mix))
    except (TypeError, ValueError) as exc:
        raise bad(f"{where}.mix", str(exc)) from None
    arm = Arm(label.strip(), item.get("scheme", "rope"), item.get("layout"), dict(train), steps,
              tuple(patterns) if patterns else None, mix)
    try:
        checks.number("steps", steps)
        for pattern in arm.patterns or ():
            check_pattern(pattern)
        if not isinstance(arm.scheme, str) or (arm.layout is not None and not isinstance(arm.layout, str)):
            raise ValueError("scheme and layout are spec strings")
    except (TypeError, ValueError) as exc:
        raise bad(where, str(exc).strip()) from None
    return arm  # what it trains is checked by the sweep, which builds its runs (lexkit.study.sweep.work)
