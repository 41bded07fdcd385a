"""lexkit.core.options: settings declared once as dataclass fields make their flags, read back what the command
line gave and check their bounds and choices under the name a user typed; lexkit train's run settings and
the study's table settings are declared so (no command lists a setting twice)."""

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


def test_lexkit_train_takes_its_run_settings_from_one_declaration():
    from lexkit.cli import train

    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    train.add_parser(sub)
    args = p.parse_args(["train", "--out", "x", "--mix", "copy:0.1", "--mix", "passkey:0.05", "--logn",
                         "--curriculum", "0.25"])
    overrides = train._overrides(args)
    assert overrides["mix"] == "copy:0.1,passkey:0.05" and overrides["logn"] is True
    assert overrides["curriculum"] == 0.25 and overrides["seed"] is None and overrides["steps"] is None
    assert set(overrides) == {f.name for f in dataclasses.fields(train.RunSettings)} | set(
        __import__("lexkit.training.presets").training.presets.FLAGS)


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
