"""The suite over releases: ``lexkit conformance --matrix transformers==5.0.0,5.12.0,5.24.0`` runs one
in-process adapter in a virtualenv per release (made once, kept under ``--envs``: ``python -m venv
--system-site-packages`` so torch and lexkit come from this environment, then ``pip install
PACKAGE==VERSION``, which installs the release and whatever of its dependencies this environment's do
not satisfy), out of process (:func:`lexkit.conformance.remote.elsewhere`), and writes one table of
case x release: when a difference came and when it went.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..errors import LexkitError
from .cases import Case
from .harness import Result, run
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


def environment(package: str, version: str, root: Path, echo=print) -> str:
    """The interpreter of the virtualenv of ``package==version`` under ``root``, made if missing."""
    where = root / f"{package}-{version}"
    python = where / "bin" / "python"
    marker = where / ".lexkit-ready"
    if marker.is_file():
        return str(python)
    echo(f"making {where}: python -m venv --system-site-packages, pip install {package}=={version}")
    for command in ([sys.executable, "-m", "venv", "--system-site-packages", str(where)],
                    [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                     f"{package}=={version}"]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or [""])[-1]
            raise LexkitError(f"--matrix {package}=={version}: {' '.join(command[-3:])} failed: {last}")
    marker.write_text(f"{package}=={version}\n")
    return str(python)


def matrix(package: str, versions: list[str], cases: list[Case], root: Path = ENVS,
           echo=print) -> dict[str, list[Result]]:
    """Each release's results on ``cases``, by release (its environment made first where missing)."""
    name = PACKAGES[package]
    out = {}
    for version in versions:
        python = environment(package, version, root, echo)
        adapter = elsewhere(name, python)
        reason = adapter.unavailable()
        if reason:
            raise LexkitError(f"--matrix {package}=={version}: {reason}")
        out[version] = run([adapter], cases)
    return out
