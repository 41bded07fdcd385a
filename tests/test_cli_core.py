"""The core's CLI: ``lexkit schemes`` and ``lexkit patterns`` listings, and ``--import``."""

from __future__ import annotations

import sys

import pytest
import torch

from lexkit import GPT, ModelConfig, attention, positions
from lexkit.cli import main
from lexkit.positions import base

TEN = ["none", "sinusoidal", "learned", "rope", "xpos", "alibi", "kerple-power", "kerple-log", "sandwich", "t5"]


@pytest.fixture
def fresh_registry(monkeypatch):
    """Isolate the scheme registry and force a fresh import of the fixture module."""
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.delitem(sys.modules, "my_scheme", raising=False)
    base._REGISTRY.pop("capped-linear", None)
    yield
    sys.modules.pop("my_scheme", None)  # a later --import registers it again


def rows(out: str) -> dict[str, list[str]]:
    lines = out.strip().splitlines()
    assert lines[0].split()[:2] == ["name", "family"]
    return {line.split()[0]: line.split() for line in lines[1:]}


def test_schemes_lists_all_ten_with_family_and_defaults(capsys, fresh_registry):
    assert main(["schemes"]) == 0
    table = rows(capsys.readouterr().out)
    assert list(table)[:10] == TEN
    assert "capped-linear" not in table
    assert table["xpos"][1] == "rotary" and table["alibi"][1] == "bias" and table["learned"][1] == "absolute"
    out_line = " ".join(table["xpos"])
    for default in ("base=10000.0", "gamma=0.4", "scale_base=512.0", "decay=true", "rotate=true"):
        assert default in out_line
    assert "buckets=32," in " ".join(table["t5"]) and "max_distance=128" in " ".join(table["t5"])
    assert "dim=128" in " ".join(table["sandwich"])


def test_patterns_lists_the_three(capsys):
    assert main(["patterns"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:4]]
    assert names == ["causal", "window", "bca"]


def test_import_registers_a_user_scheme(capsys, fresh_registry):
    assert main(["schemes", "--import", "my_scheme"]) == 0
    table = rows(capsys.readouterr().out)
    assert list(table)[:10] == TEN
    assert table["capped-linear"][:2] == ["capped-linear", "bias"]
    assert "slope=0.5," in table["capped-linear"] and "cap=16" in table["capped-linear"]
    # and the scheme it registered runs: its bias, and a model forward through dense and chunked
    s = positions.create("capped-linear:slope=2,cap=3", n_heads=2, head_dim=8)
    assert s.bias_table(6).tolist() == [[0.0, -2.0, -4.0, -6.0, -6.0, -6.0]] * 2
    model = GPT(ModelConfig(scheme="capped-linear:cap=4", n_layers=1, d_model=16, n_heads=2, train_len=32)).eval()
    x = torch.randint(0, 256, (1, 40))
    with torch.no_grad():
        dense = model(x, pattern="window:16", kernel="dense")
        chunked = model(x, pattern="window:16", kernel="chunked")
    assert torch.isfinite(dense).all() and torch.allclose(dense, chunked, atol=1e-5)


def test_import_bad_spec_of_the_user_scheme_is_an_error(capsys, fresh_registry):
    main(["schemes", "--import", "my_scheme"])
    with pytest.raises(ValueError, match="cap=.?0.? is out of range"):
        positions.create("capped-linear:cap=0", n_heads=1, head_dim=4)


def test_import_of_a_missing_module_exits_2_with_one_error_line(capsys):
    assert main(["schemes", "--import", "no_such_module"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "no_such_module" in err[0]
    assert "Traceback" not in captured.err and captured.out == ""


def test_unknown_command_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2
    assert capsys.readouterr().err.startswith("error:")


def test_pattern_registry_lists_the_three_core_patterns_first():
    assert attention.names()[:3] == ["causal", "window", "bca"]
