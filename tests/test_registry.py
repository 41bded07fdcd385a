"""The registries of position schemes and attention patterns (lexkit.core.registry): what ``lexkit schemes``
and ``lexkit patterns`` list, a user's own classes registered by ``--import``, and names already taken."""

from __future__ import annotations

import sys

import pytest
import torch

from kit import tiny_gpt
from lexkit import attention, positions
from lexkit.attention.patterns import PATTERNS
from lexkit.cli import main
from lexkit.positions.base import SCHEMES
from schemes_under_test import BIAS, TEN


@pytest.fixture
def fresh_registry(monkeypatch):
    """Isolate the scheme and pattern registries and force a fresh import of the fixture modules."""
    for registry in (SCHEMES, PATTERNS):
        monkeypatch.setattr(registry, "_classes", dict(registry._classes))
    SCHEMES._classes.pop("capped-linear", None)
    PATTERNS._classes.pop("strided", None)
    for module in ("my_scheme", "my_pattern"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    yield
    for module in ("my_scheme", "my_pattern"):
        sys.modules.pop(module, None)  # a later --import registers it again


def assert_dense_equals_chunked(scheme: str, pattern: str) -> None:
    """A one-layer model with ``scheme`` runs ``pattern`` at 40 tokens: dense (additive mask) and
    chunked kernels agree and are finite."""
    model = tiny_gpt(scheme, n_layers=1, d_model=16, train_len=32)
    x = torch.randint(0, 256, (1, 40))
    with torch.no_grad():
        dense = model(x, pattern=pattern, kernel="dense")
        chunked = model(x, pattern=pattern, kernel="chunked")
    assert torch.isfinite(dense).all() and torch.allclose(dense, chunked, atol=1e-5)


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


def test_every_default_lexkit_schemes_shows_is_accepted_back(capsys):
    """`rerope:k=inf` is the default `lexkit schemes` prints; each shown key=value parses and
    means the default. Other infinities and NaN are still refused."""
    assert main(["schemes"]) == 0
    assert "k=inf" in capsys.readouterr().out
    for name, _, shown, _ in positions.describe():
        for item in filter(None, shown.split(", ")):
            if "=" in item and not item.endswith("=auto"):  # auto: no default value to give
                assert positions.canonical(f"{name}:{item}") == positions.canonical(name), item
    for bad in ("rerope:k=-inf", "rerope:k=nan", "rope:base=inf"):
        with pytest.raises(ValueError, match="not a finite number"):
            positions.parse(bad)


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
    assert_dense_equals_chunked("capped-linear:cap=4", "window:16")


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


def test_pattern_registry_lists_the_three_core_patterns_first():
    assert attention.names()[:3] == ["causal", "window", "bca"]


def test_import_registers_a_user_pattern(capsys, fresh_registry):
    assert main(["patterns", "--import", "my_pattern"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert names[:3] == ["causal", "window", "bca"] and "strided" in names
    # its predicate, written out by hand: causal and distance 0, 3, 6, ...
    pat = attention.create("strided:3")
    q, k = torch.arange(7)[:, None], torch.arange(7)[None, :]
    expected = [[int(j <= i and (i - j) % 3 == 0) for j in range(7)] for i in range(7)]
    assert pat.visible(q, k).int().tolist() == expected
    # and it runs through the model: dense (additive mask) and chunked agree
    assert_dense_equals_chunked("alibi", "strided:3")


def test_a_second_class_cannot_claim_a_taken_name(fresh_registry):
    class Impostor(positions.Scheme):
        name = "rope"
        family = "rotary"

    with pytest.raises(ValueError, match="position scheme 'rope' is already registered"):
        positions.register(Impostor)
    assert positions.get("rope") is not Impostor
    with pytest.warns(UserWarning, match="'rope' .* is replaced by"):
        positions.register(Impostor, replace=True)
    assert positions.get("rope") is Impostor

    class Again(attention.Pattern):
        name = "window"

    with pytest.raises(ValueError, match="attention pattern 'window' is already registered"):
        attention.register(Again)


def test_registering_the_same_class_twice_is_harmless(fresh_registry):
    cls = positions.get("alibi")
    assert positions.register(cls) is cls and positions.get("alibi") is cls


def test_has_bias_is_derived_from_the_class_defining_bias():
    flags = {name: positions.get(name).has_bias for name in TEN}
    assert {n for n, f in flags.items() if f} == set(BIAS)


def test_import_finds_a_module_in_the_working_directory(tmp_path, monkeypatch, capsys, fresh_registry):
    """The `lexkit` console script's sys.path starts with its bin directory, not the working
    directory: `--import mymod` did not find ./mymod.py (`python -m lexkit` did)."""
    from pathlib import Path

    source = Path(__file__).parent / "fixtures" / "my_scheme.py"
    (tmp_path / "my_user_scheme.py").write_text(source.read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "my_user_scheme", raising=False)
    assert main(["schemes", "--import", "my_user_scheme"]) == 0
    assert "capped-linear" in rows(capsys.readouterr().out)
    sys.modules.pop("my_user_scheme", None)


def test_a_run_of_an_imported_scheme_names_it_and_import(tmp_path, capsys, fresh_registry):
    """Loaded without its module, a run of a user's scheme said "not a valid lexkit run config"."""
    import json

    from lexkit.training import runs

    main(["schemes", "--import", "my_scheme"])
    run = tmp_path / "run"
    run.mkdir()
    config = {"model": {"scheme": "capped-linear:cap=4", "n_layers": 1, "d_model": 16, "n_heads": 2,
                        "train_len": 32}, "data": {"spec": "stdlib"}}
    (run / runs.CONFIG).write_text(json.dumps(config))
    assert runs.read_config(run)["model"]["scheme"] == "capped-linear:cap=4"
    SCHEMES._classes.pop("capped-linear")
    capsys.readouterr()
    assert main(["eval", str(run), "--lengths", "16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {run / runs.CONFIG}: the run's position scheme 'capped-linear' is not registered here "
                   "(a scheme of your own?): load the module that registers it with --import MODULE (Python: import "
                   "it first)"]
