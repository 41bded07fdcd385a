"""The ten schemes exist and the CLI lists them."""

from lexkit import positions
from lexkit.cli import main
from schemes_under_test import TEN


def test_registry_has_the_ten_schemes():
    assert positions.names()[: len(TEN)] == TEN


def test_cli_lists_every_scheme(capsys):
    assert main(["schemes"]) == 0
    out = capsys.readouterr().out
    for name in TEN:
        assert any(line.split()[0] == name for line in out.splitlines()[1:])
