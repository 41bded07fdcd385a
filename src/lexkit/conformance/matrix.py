"""The suite over releases: ``lexkit conformance --matrix transformers==5.0.0,5.12.0,5.24.0`` runs one
in-process adapter in a virtualenv per release, out of process (:func:`lexkit.conformance.remote.elsewhere`),
and writes one table of case x release: when a difference came and when it went.

A release's environment is made once and kept under ``--envs``: ``python -m venv --without-pip``, then
a ``.pth`` file that adds *this* environment's site directories after its own (so torch, lexkit and
pip come from the environment lexkit runs in, a virtualenv's included: ``--system-site-packages``
would give the base interpreter's instead), then ``pip install PACKAGE==VERSION`` into it, which
installs the release and whatever of its dependencies this environment's do not satisfy, ahead of
this environment's own. It is marked ready only once lexkit's conformance imports there and the
package's version is the release; a release that fails leaves no environment behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..core.errors import LexkitError
from .cases import Case
from .harness import run
from .remote import elsewhere

#: where the releases' environments are kept unless --envs says
ENVS = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lexkit" / "conformance-envs"
#: the adapters a matrix can run, by the package whose releases it compares
PACKAGES = {"transformers": "transformers", "x-transformers": "x-transformers", "torchtune": "torchtune",
            "litgpt": "litgpt"}


def parse(spec: str) -> tuple[str, list[str]]:
    """``transformers==5.0.0,5.24.0`` -> ("transformers", ["5.0.0", "5.24.0"]); ValueError naming what
    would be valid."""
    package, sep, versions = spec.partition("==")
    package = package.strip()
    if package not in PACKAGES:
        raise ValueError(f"--matrix {spec!r}: {package or 'no package'} is not a package of an adapter; valid: "
                         f"{', '.join(PACKAGES)} (e.g. --matrix transformers==5.0.0,5.24.0)")
    out = [v.strip() for v in versions.split(",") if v.strip()] if sep else []
    if not out:
        raise ValueError(f"--matrix {spec!r}: give the releases after ==, comma-separated "
                         f"(e.g. --matrix {package}==5.0.0,5.24.0)")
    if len(set(out)) != len(out):
        raise ValueError(f"--matrix {spec!r}: a release is named twice")
    return package, out


#: the file in a release's environment that adds this environment's site directories (a .pth file)
INHERIT = "_lexkit_inherit.pth"
#: asks an interpreter for its site directories (and the user's, where it reads them), in order
_SITES = ("import json, os, site; d = site.getsitepackages()"
          " + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else []);"
          " print(json.dumps([x for x in d if os.path.isdir(x)]))")


def _run(command: list[str], what: str) -> str:
    """``command``'s stdout; LexkitError with ``what`` and the last line it said where it fails."""
    done = subprocess.run(command, capture_output=True, text=True, errors="replace")
    if done.returncode:
        last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or [""])[-1]
        raise LexkitError(f"{what} failed (exit {done.returncode}): {last}")
    return done.stdout


def _sites(python: str) -> list[str]:
    return json.loads(_run([python, "-c", _SITES], f"asking {python} for its site directories"))


def _install(python: str, package: str, version: str, what: str) -> None:
    """``pip install PACKAGE==VERSION`` into the environment of ``python`` (pip from the inherited sites),
    then, for each optional dependency the release names that the inherited sites hold at a version
    outside the release's range (transformers 5.0.0 imports ``kernels`` when it is there and breaks on
    0.19, which 5.25 requires), a version inside it, installed ahead of the inherited one."""
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, f"{package}=={version}"], f"{what}: pip install {package}=={version}")
    outside = _outside(python, package, what)
    if outside:
        _run([*pip, *outside], f"{what}: pip install {' '.join(outside)}")


def _outside(python: str, package: str, what: str = "--matrix") -> list[str]:
    """``name<specifier>`` of each requirement of ``package`` (any extra) that the environment of
    ``python`` holds at a version outside its range."""
    return _run([python, "-c", _OUTSIDE, package], f"{what}: reading {package}'s optional dependencies").split()


#: prints ``name<specifier>`` for each requirement of a distribution (any extra) that is installed at a
#: version outside its range
_OUTSIDE = """import sys, importlib.metadata as m
from packaging.requirements import Requirement
seen = set()
for line in m.distribution(sys.argv[1]).requires or []:
    r = Requirement(line)
    if r.name in seen or not r.specifier:
        continue
    try:
        have = m.version(r.name)
    except m.PackageNotFoundError:
        continue
    if not r.specifier.contains(have, prereleases=True):
        seen.add(r.name)
        print(f"{r.name}{r.specifier}")
"""


def _check(python: str, package: str, version: str, what: str) -> None:
    """lexkit's conformance is found in the environment (imported by the adapter's own check before a
    case runs) and ``package`` there is the release."""
    code = ("import importlib.metadata as m, importlib.util as u, os, sys\n"
            "s = u.find_spec('lexkit')  # (its conformance found, not imported: that is torch's import)\n"
            "if s is None or not any(os.path.isdir(os.path.join(d, 'conformance')) "
            "for d in s.submodule_search_locations): sys.exit('lexkit.conformance is not there')\n"
            f"try: print(m.version({package!r}))\n"
            "except m.PackageNotFoundError: print()")
    found = _run([python, "-c", code], f"{what}: looking for lexkit and {package} there").strip()
    if found != version:
        raise LexkitError(f"{what}: {package} there is {found or 'missing'}, not {version}")


def environment(package: str, version: str, root: Path, echo=print, python: str = sys.executable) -> str:
    """The interpreter of the virtualenv of ``package==version`` under ``root``, made if missing, on top
    of the environment of ``python`` (this one's by default); a half-made one is made anew."""
    where = root / f"{package}-{version}"
    interpreter = where / "bin" / "python"
    marker = where / ".lexkit-ready"
    if marker.is_file():
        return str(interpreter)
    what = f"--matrix {package}=={version}"
    if where.exists():  # an earlier try that did not finish
        shutil.rmtree(where)
    echo(f"making {where}: a virtualenv on this environment's packages, pip install {package}=={version}")
    try:
        root.mkdir(parents=True, exist_ok=True)
        _run([python, "-m", "venv", "--without-pip", str(where)], f"{what}: python -m venv")
        own = _sites(str(interpreter))[0]
        lines = [f"import site; site.addsitedir({d!r})" for d in _sites(python) if d != own]
        Path(own, INHERIT).write_text("\n".join(lines) + "\n")
        _install(str(interpreter), package, version, what)
        _check(str(interpreter), package, version, what)
    except BaseException:
        shutil.rmtree(where, ignore_errors=True)
        raise
    marker.write_text(f"{package}=={version}\n")
    return str(interpreter)


def matrix(package: str, versions: list[str], cases: list, root: Path = ENVS,
           echo=print, timeout: float | None = None, models_dir: Path | None = None) -> dict[str, list]:
    """Each release's results on ``cases``, by release (its environment made first where missing): table
    cases, or model cases (``lexkit.conformance.models``: the package's model runtime there, the checkpoints
    under ``models_dir``)."""
    name = PACKAGES[package]
    whole = bool(cases) and not isinstance(cases[0], Case)
    out = {}
    for version in versions:
        python = environment(package, version, root, echo)
        if whole:
            from .models import remote as model_remote

            adapter = model_remote.elsewhere(name, python)
        else:
            adapter = elsewhere(name, python)
        if timeout is not None:
            adapter.timeout = timeout
        reason = adapter.unavailable()
        if reason:
            raise LexkitError(f"--matrix {package}=={version}: {reason}")
        if whole:
            from .models import run as run_models

            out[version] = run_models([adapter], cases, models_dir)
        else:
            out[version] = run([adapter], cases)
    return out
