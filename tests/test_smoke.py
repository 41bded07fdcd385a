"""The ten schemes exist and the CLI lists them."""

from lexkit import positions
from lexkit.cli import main

TEN = ["none", "sinusoidal", "learned", "rope", "xpos", "alibi", "kerple-power", "kerple-log", "sandwich", "t5"]


def test_registry_has_the_ten_schemes():
    assert positions.names()[: len(TEN)] == TEN


def test_cli_lists_every_scheme(capsys):
    assert main(["schemes"]) == 0
    out = capsys.readouterr().out
    for name in TEN:
        assert any(line.split()[0] == name for line in out.splitlines()[1:])
