"""The needle flags of `lexkit retrieval` (RetrievalOptions' fields) and `lexkit inspect --needle-mass`
(lexkit.cli.needle_options, sharing their help), each command with its own defaults, checked the same way."""

import argparse
import dataclasses

import pytest

from lexkit.cli import inspect as inspect_cli
from lexkit.cli import main
from lexkit.cli import retrieval as retrieval_cli
from lexkit.cli.needle_options import FLAGS, NeedleDefaults, add_needle_options, needle_values, parse_depths
from lexkit.core import options as declared
from lexkit.instruments.retrieval import RetrievalOptions


def parser_of(module) -> argparse.ArgumentParser:
    top = argparse.ArgumentParser()
    return module.add_parser(top.add_subparsers())


def flags_of(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def test_both_commands_declare_every_needle_flag():
    for module in (retrieval_cli, inspect_cli):
        assert set(FLAGS) <= flags_of(parser_of(module))


def test_left_out_flags_take_the_commands_own_defaults():
    defaults = inspect_cli.NEEDLE_DEFAULTS
    values = needle_values(parser_of(inspect_cli).parse_args(["run"]), defaults)
    assert values == {"task": defaults.task, "lengths": None, "depths": list(defaults.depths),
                      "samples": defaults.samples, "size": None, "seed": 0, "patterns": ["causal"], "format": None}
    given = declared.given(parser_of(retrieval_cli).parse_args(["run"]), RetrievalOptions)
    assert RetrievalOptions(**given) == RetrievalOptions()  # retrieval's defaults are its Options' own
    assert (RetrievalOptions.task, inspect_cli.NEEDLE_DEFAULTS.task) == ("passkey", "copy")


def test_inspect_shares_retrievals_help_where_it_names_no_default():
    helps = {a.option_strings[0]: a.help for a in parser_of(inspect_cli)._actions if a.option_strings}
    fields = {f.name: f.metadata["help"] for f in dataclasses.fields(RetrievalOptions)}
    assert helps["--lengths"] == fields["lengths"] and helps["--size"] == fields["size"]
    assert helps["--format"] == fields["format"]() and "tilde" in helps["--format"]  # read when the parser is made


def test_given_flags_are_parsed_and_help_names_the_defaults():
    parser = argparse.ArgumentParser()
    add_needle_options(parser, NeedleDefaults(task="copy", depths=(0.0, 50.0), samples=7, seed=3))
    text = parser.format_help()
    assert "(default: copy)" in text and "(default: 0,50)" in text and "(default: 7)" in text
    args = parser.parse_args(["--depths", "10, 90", "--lengths", "64,128", "--samples", "2", "--pattern", "window:8",
                              "--pattern", "causal", "--seed", "0"])
    values = needle_values(args, NeedleDefaults(task="copy", depths=(0.0,), samples=7, seed=3))
    assert values["depths"] == [10.0, 90.0] and values["lengths"] == [64, 128]
    assert values["samples"] == 2 and values["seed"] == 0 and values["patterns"] == ["window:8", "causal"]


@pytest.mark.parametrize("extra, message", [
    (["--samples", "0"], "--samples must be a positive integer"),
    (["--size", "-1"], "--size must be a positive integer"),
    (["--seed", "-2"], "--seed must be"),
    (["--depths", "0,half"], "--depths: 'half' is not a number"),
])
@pytest.mark.parametrize("command", [["retrieval"], ["inspect", "--needle-mass"]])
def test_bad_needle_flags_are_one_line_in_both_commands(tmp_path, capsys, command, extra, message):
    target = tmp_path / "no-run"
    code = main([command[0], str(target), *command[1:], *extra, "--json", str(tmp_path / "r.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and message in err[0]
    assert not (tmp_path / "r.json").exists()


def test_parse_depths():
    assert parse_depths("0,12.5 ,100") == [0.0, 12.5, 100.0]
