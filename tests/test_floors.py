"""The house's floors (README's Layout): every module of src/lexkit is in one of the floor folders or is a
public verb at the top, and imports only from its own floor or the floors below it, lazy imports inside
functions included; read from the source text (no module is imported), so a new flat file or an arrow
back up fails here with its file and line."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "lexkit"

#: the floors from the ground up, as the README's Layout prints them
FLOORS = ("core", "documents", "positions", "tasks", "attention", "layouts", "model", "data", "training",
          "instruments", "conformance", "study", "cli")
#: what stays at the top: the package, the entry point and the callable public verbs
TOP = ("__init__", "__main__", "evaluate", "resolution", "retrieval", "train")


def floor_of(parts: tuple[str, ...]) -> int:
    """A module's floor (its path under lexkit, without .py): a floor folder's index, the top above them."""
    if parts and parts[0] in FLOORS:
        return FLOORS.index(parts[0])
    return len(FLOORS)


def imported(source: str, parts: tuple[str, ...]) -> list[tuple[int, tuple[str, ...]]]:
    """(line, module path under lexkit) of every lexkit import in ``source``, the module at ``parts``
    (its path under lexkit, without .py): relative ones resolved from its place, ``from PACKAGE import
    name`` read as the module ``PACKAGE.name`` where that is one."""
    package = parts[:-1]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
            elif node.module and node.module.split(".")[0] == "lexkit":
                base = ()
            else:
                continue
            module = base + tuple((node.module or "").split(".")) if node.module else base
            if not node.level:
                module = module[1:]  # lexkit.x.y -> (x, y)
            for alias in node.names:
                candidate = module + (alias.name,)
                is_module = (SRC.joinpath(*candidate).is_dir() or SRC.joinpath(*candidate).with_suffix(".py").is_file())
                out.append((node.lineno, candidate if is_module else module))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names = alias.name.split(".")
                if names[0] == "lexkit":
                    out.append((node.lineno, tuple(names[1:])))
    return out


def modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def test_only_floors_and_public_verbs_sit_at_the_top():
    flat = sorted(p.stem for p in SRC.glob("*.py"))
    assert flat == sorted(TOP), f"a module at the top of src/lexkit must choose a floor: {sorted(set(flat) - set(TOP))}"
    folders = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file())
    assert folders == sorted(FLOORS)


def test_imports_go_to_the_same_floor_or_below():
    """Every module at once (one test, every arrow back up named with its file and line)."""
    up = []
    for path in modules():
        parts = path.relative_to(SRC).with_suffix("").parts
        own = floor_of(parts)
        up += [f"{path.relative_to(SRC)}:{line} (floor {own}) imports {'.'.join(target)} (floor {floor_of(target)})"
               for line, target in imported(path.read_text(encoding="utf-8"), parts) if floor_of(target) > own]
    assert not up, "imports from a floor above:\n" + "\n".join(up)


def test_the_reader_sees_every_kind_of_import():
    """The check is itself checked: the three forms of an import, relative at two depths and absolute,
    inside a function too, each resolved to its module (a file of the model floor that imports upwards)."""
    source = ("from ..core import checks\nfrom ..training.loop import train\nimport lexkit.cli\n"
              "def f():\n    from . import gpt\n    from lexkit.study import plan\n")
    found = [target for _, target in imported(source, ("model", "probe"))]
    assert found == [("core", "checks"), ("training", "loop"), ("cli",), ("model", "gpt"), ("study", "plan")]
    assert [floor_of(t) > floor_of(("model",)) for t in found] == [False, True, True, False, True]
