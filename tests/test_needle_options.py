"""The needle flags of `lexkit retrieval` (RetrievalOptions' fields) and `lexkit inspect --needle-mass`
(NeedleMassOptions' fields, sharing retrieval's metadata where its help names no default): each command made
from its Options with its own defaults, checked the same way in the command and in the library."""

import argparse
import dataclasses

import pytest

from lexkit.cli import inspect as inspect_cli
from lexkit.cli import main
from lexkit.cli import retrieval as retrieval_cli
from lexkit.core import options as declared
from lexkit.instruments.inspect.needle_mass import NeedleMassOptions
from lexkit.instruments.retrieval import RetrievalOptions, parse_depths

NEEDLE_FLAGS = {"--task", "--format", "--lengths", "--depths", "--samples", "--size", "--seed", "--pattern"}


def parser_of(module) -> argparse.ArgumentParser:
    top = argparse.ArgumentParser()
    return module.add_parser(top.add_subparsers())


def flags_of(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def test_both_commands_declare_every_needle_flag_from_their_options():
    for module, options in ((retrieval_cli, RetrievalOptions), (inspect_cli, NeedleMassOptions)):
        assert NEEDLE_FLAGS <= flags_of(parser_of(module))
        assert {declared.flag_of(f) for f in declared.flagged(options)} <= flags_of(parser_of(module))


def test_left_out_flags_take_the_commands_own_defaults():
    given = declared.given(parser_of(inspect_cli).parse_args(["run"]), NeedleMassOptions, unset=True)
    assert set(given.values()) == {None}  # nothing given: the Options' own defaults apply
    assert NeedleMassOptions(**{k: v for k, v in given.items() if v is not None}) == NeedleMassOptions()
    given = declared.given(parser_of(retrieval_cli).parse_args(["run"]), RetrievalOptions)
    assert RetrievalOptions(**given) == RetrievalOptions()  # retrieval's defaults are its Options' own
    assert (RetrievalOptions.task, NeedleMassOptions.task) == ("passkey", "copy")
    assert (RetrievalOptions.samples, NeedleMassOptions.samples) == (10, 4)


def test_inspect_shares_retrievals_help_where_it_names_no_default():
    helps = {a.option_strings[0]: a.help for a in parser_of(inspect_cli)._actions if a.option_strings}
    fields = {f.name: f.metadata["help"] for f in dataclasses.fields(RetrievalOptions)}
    assert helps["--lengths"] == fields["lengths"] and helps["--size"] == fields["size"]
    assert helps["--format"] == fields["format"]() and "tilde" in helps["--format"]  # read when the parser is made
    assert "(default: copy)" in helps["--task"] and "(default: 0,25,50,75,100)" in helps["--depths"]
    assert "(default: 4)" in helps["--samples"]


def test_given_flags_are_parsed():
    args = parser_of(inspect_cli).parse_args(
        ["run", "--needle-mass", "--depths", "10, 90", "--lengths", "64,128", "--samples", "2", "--pattern",
         "window:8", "--pattern", "causal", "--seed", "0"])
    values = NeedleMassOptions(**{k: v for k, v in declared.given(args, NeedleMassOptions, unset=True).items()
                                  if v is not None})
    assert values.depths == (10.0, 90.0) and values.lengths == [64, 128]
    assert values.samples == 2 and values.seed == 0 and values.patterns == ("window:8", "causal")


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


def test_the_library_refuses_what_the_command_refuses():
    from lexkit.instruments.base import get

    with pytest.raises(ValueError, match="--samples must be a positive integer"):
        get("inspect.needle_mass").measure("no-run", NeedleMassOptions(samples=0))


def test_parse_depths():
    assert parse_depths("0,12.5 ,100") == [0.0, 12.5, 100.0]
