"""lexkit.core.options: settings declared once as dataclass fields make their flags, read back what the command
line gave and check their bounds and choices under the name a user typed; lexkit train's settings (the fields
of ModelConfig and TrainConfig) and the study's table settings are declared so (no command lists a setting
twice; tests/test_settings_declared_once.py adds one)."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from lexkit.cli import main
from lexkit.core import options


@dataclasses.dataclass
class Toy:
    count: int = dataclasses.field(default=3, metadata={"help": "how many", "maximum": 10})
    level: int = dataclasses.field(default=0, metadata={"help": "from zero", "minimum": 0})
    kind: str = dataclasses.field(default="a", metadata={"choices": ["a", "b"]})
    size: float | None = dataclasses.field(default=None, metadata={"type": float, "metavar": "S"})
    sure: bool | None = dataclasses.field(default=None, metadata={"type": bool})
    on: bool = True
    off: bool = False
    names: list[str] = dataclasses.field(default_factory=list, metadata={"metavar": "NAME"})


def parse(argv):
    p = argparse.ArgumentParser()
    options.add_flags(p, Toy)
    return options.given(p.parse_args(argv), Toy)


def test_flags_from_the_fields_read_back_as_given_or_defaults():
    assert parse([]) == {"count": 3, "level": 0, "kind": "a", "size": None, "sure": None, "on": True, "off": False,
                         "names": []}
    got = parse(["--count", "5", "--size", "0.5", "--no-sure", "--no-on", "--off", "--names", "x", "--names", "y"])
    assert got == {"count": 5, "level": 0, "kind": "a", "size": 0.5, "sure": False, "on": False, "off": True,
                   "names": ["x", "y"]}
    with pytest.raises(SystemExit):
        parse(["--kind", "c"])  # argparse refuses a value outside the choices


def test_bounds_and_choices_are_checked_under_the_name_given():
    options.check(Toy(), lambda field: f"--{field}")
    for bad, line in [(Toy(count=11), "--count must be"), (Toy(count=0), "--count must be"),
                      (Toy(level=-1), "--level must be"), (Toy(kind="c"), "--kind must be one of a, b, got 'c'")]:
        with pytest.raises(ValueError, match=line):
            options.check(bad, lambda field: f"--{field}")
    options.check(Toy(level=0), lambda field: field)  # a minimum is inclusive


@dataclasses.dataclass
class Sizes:
    width: int = options.setting(4, "how wide", flag="--dim")
    rate: float = options.setting(0.5, "a fraction", minimum=0, maximum=1.0)
    on: bool = options.setting(False, "on or off")
    parts: str = options.setting("", "repeatable", join=",", metavar="PART")
    hidden: int = options.setting(7, flag=False)


def test_unset_flags_default_to_none_and_read_back_as_given():
    """``unset``: every flag None when not given (someone else's default), a boolean one --NAME/--no-NAME, a
    field's own flag name (its metavar from it), a ``join`` one repeatable and joined; no flag for flag=False."""
    p = argparse.ArgumentParser()
    options.add_flags(p, Sizes, unset=True)
    assert options.given(p.parse_args([]), Sizes, unset=True) == {"width": None, "rate": None, "on": None,
                                                                 "parts": None}
    got = options.given(p.parse_args(["--dim", "8", "--no-on", "--parts", "a", "--parts", "b"]), Sizes, unset=True)
    assert got == {"width": 8, "rate": None, "on": False, "parts": "a,b"}
    assert "--dim DIM" in p.format_help() and "--parts PART" in p.format_help() and "--hidden" not in p.format_help()
    with pytest.raises(SystemExit):
        p.parse_args(["--width", "8"])
    assert options.flag_of(dataclasses.fields(Sizes)[0]) == "--dim"


def test_a_float_is_checked_where_it_declares_a_bound():
    options.check(Sizes(rate=0.0), str)
    for bad in (1.5, -0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"rate must be a finite number >= 0 \(at most 1\)"):
            options.check(Sizes(rate=bad), str)


def test_lexkit_train_takes_its_settings_from_the_configs_fields():
    """``lexkit train``'s settings are the fields of ModelConfig and TrainConfig with a flag; the preset's
    sizes among them (default None: the preset's), the rest (vocab_size, warmup, log_every, ...) no flag."""
    from lexkit.cli import train
    from lexkit.model.gpt import ModelConfig
    from lexkit.training.settings import TrainConfig, preset_flags

    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    train.add_parser(sub)
    args = p.parse_args(["train", "--out", "x", "--mix", "copy:0.1", "--mix", "passkey:0.05", "--logn",
                         "--curriculum", "0.25", "--layers", "3"])
    overrides = train._overrides(args)
    assert overrides["mix"] == "copy:0.1,passkey:0.05" and overrides["logn"] is True and overrides["n_layers"] == 3
    assert overrides["curriculum"] == 0.25 and overrides["seed"] is None and overrides["steps"] is None
    assert set(overrides) == {f.name for cls in (ModelConfig, TrainConfig) for f in options.flagged(cls)}
    assert not {"scheme", "vocab_size", "max_len", "dropout", "warmup", "log_every", "eval_windows"} & set(overrides)
    assert preset_flags() == {"n_layers": "--layers", "d_model": "--dim", "n_heads": "--heads",
                             "train_len": "--train-len", "steps": "--steps", "batch": "--batch", "lr": "--lr",
                             "eval_every": "--eval-every", "save_every": "--save-every"}


def test_help_shows_the_preset_defaults_and_presets_lists_them(capsys):
    from lexkit.training import presets

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    small = presets.PRESETS["small"]
    for flag, key in (("--steps", "steps"), ("--train-len", "train_len"), ("--batch", "batch")):
        assert re.search(rf"{flag} [A-Z_]+ [^()]*\(default: the preset's, {small[key]} in small\)", text), flag
    assert "default: None" not in text
    assert main(["presets"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    assert rows["setting"][2:] == list(presets.PRESETS)
    assert rows["steps"][2:] == [str(p["steps"]) for p in presets.PRESETS.values()]
