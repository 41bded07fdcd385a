"""``lexkit conformance``: RoPE scalings and rotary schemes of other implementations checked against
lexkit's float64 reference, case by case.

    lexkit conformance                                   # every implementation installed here
    lexkit conformance --impl transformers --impl x-transformers --case 'yarn/*' --case 'dynamic/*'
    lexkit conformance --list                            # the cases and the implementations
    lexkit conformance --json conformance.json           # or --out DIR: conformance.json + conformance.md
    lexkit conformance --impl mlx-lm --python mlx-lm=ENV/bin/python   # a runtime in its own environment
    lexkit conformance --matrix transformers==5.0.0,5.24.0            # case x release, a virtualenv each
    lexkit conformance --impl transformers --check --accept known.txt  # a CI: fail on a new difference only

Each cell is ``pass`` or ``FAIL`` with the largest error of the check nearest its bound, named
(``pass 3e-07 tables``; tolerances by dtype: docs/conformance.md), ``n/a`` where the implementation
cannot express the case, ``error`` where it raised. A difference is a measurement, not a verdict:
exit 0 unless ``--check`` (exit 1 on any FAIL or error, or when an implementation named by ``--impl``
was skipped or is n/a on every case). An implementation whose package is missing is skipped by name; ``--import
MODULE`` may register another (``lexkit.conformance.register``).
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

from ..conformance.battery import Battery
from ..core import checks, threads
from ..core.errors import LexkitError
from ..training.runs import atomic_write, write_json


def add_parser(sub):
    p = sub.add_parser("conformance", help="check RoPE scalings of other implementations against lexkit's reference",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--impl", action="append", metavar="NAME",
                   help="an implementation (repeatable; default: every one registered, missing ones skipped)")
    p.add_argument("--case", action="append", metavar="GLOB",
                   help="cases whose name matches (repeatable; 'yarn/*', a group such as 'dynamic', or a name)")
    p.add_argument("--list", action="store_true", help="list the cases and implementations, run nothing")
    p.add_argument("--json", metavar="FILE", help="write every result as JSON")
    p.add_argument("--out", metavar="DIR", help="write DIR/conformance.json and DIR/conformance.md")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when any case fails or errors, or an implementation named by --impl did not run "
                        "(skipped, or n/a on every case)")
    p.add_argument("--accept", metavar="FILE", help="differences known and accepted, one a line: IMPL CASE  # reason "
                   "(with --check, only a difference not in FILE fails; docs/conformance.md)")
    p.add_argument("--threads", type=int, metavar="N", help=threads.HELP)
    p.add_argument("--matrix", metavar="PACKAGE==V1,V2,...",
                   help="run PACKAGE's adapter on each release, each in a virtualenv of its own (made once under "
                        "--envs with pip), and write one table of case x release (e.g. transformers==5.0.0,5.24.0)")
    p.add_argument("--envs", metavar="DIR", help="where --matrix keeps the releases' virtualenvs "
                   "(default: ~/.cache/lexkit/conformance-envs)")
    p.add_argument("--python", action="append", metavar="NAME=PATH", default=[],
                   help="run implementation NAME in the interpreter PATH, its own environment (mlx-lm's side, or "
                        "an in-process adapter through lexkit there; repeatable; default: this interpreter)")
    p.add_argument("--models", action="store_true",
                   help="the model battery: tiny random checkpoints of whole models, each runtime's logits at every "
                        "position (prefill at L and 32·L, decode through its own cache) against lexkit's float64 "
                        "forward of the same weights (also --case 'models/...')")
    p.add_argument("--models-dir", metavar="DIR", help="where the model cases' checkpoints (and their reference "
                   "logits) are kept (default: ~/.cache/lexkit/conformance-models)")
    p.add_argument("--timeout", type=float, metavar="SECONDS", default=None,
                   help="seconds an implementation in another interpreter may take to answer one request (its "
                        "first import included) before it is stopped and its case is an error (default: 300)")
    return p


def _adapter(name: str, python: str | None, battery: Battery):
    """The adapter ``name``; with a ``python``, run there: an out-of-process adapter's side, or an
    in-process adapter through the lexkit side (lexkit.conformance.remote.elsewhere; table cases only)."""
    from ..conformance.remote import RemoteAdapter, elsewhere

    adapter = battery.registry.get(name)()
    if python is None:
        return adapter
    if isinstance(adapter, RemoteAdapter):
        adapter.python = python
        return adapter
    if battery.models:
        raise LexkitError(f"--python {name}={python}: {name} runs whole models in this process; --python names "
                          "the interpreter of a runtime's side (mlx-lm, vllm, llama.cpp)")
    return elsewhere(name, python)


def _timeout(value: float | None) -> float | None:
    """``--timeout``, checked: a positive, finite number of seconds."""
    import math

    if value is not None and not (math.isfinite(value) and value > 0):
        raise LexkitError(f"--timeout {value:g}: give a positive number of seconds (e.g. --timeout 600)")
    return value


def _pythons(given: list[str], names: list[str], registry) -> dict[str, str]:
    """``--python NAME=PATH`` by name, each checked: a known implementation among those run, a file
    that runs."""
    import os

    out = {}
    for item in given:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise LexkitError(f"--python {item!r}: give NAME=PATH, e.g. --python mlx-lm=/opt/mlx/bin/python")
        registry.get(name)  # an unknown name: ValueError listing the valid ones
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise LexkitError(f"--python {item}: {path} is not an executable file (a virtualenv's bin/python)")
        if name not in names:
            raise LexkitError(f"--python {item}: {name} is not among the implementations run (--impl {name})")
        out[name] = path
    return out


def _out_dir(path: str, stem: str = "conformance") -> Path:
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise LexkitError(f"--out {path}: exists and is not a directory")
    if not target.exists() and not target.parent.is_dir():
        raise LexkitError(f"--out {path}: directory {target.parent} does not exist")
    for name in (f"{stem}.json", f"{stem}.md"):
        if (target / name).exists():
            checks.writable("--out", target / name)
    return target


def _write(args, out_dir: Path | None, stem: str, doc: dict, markdown: str) -> None:
    """``--json FILE`` and ``--out DIR`` (DIR/STEM.json, DIR/STEM.md)."""
    if args.json:
        write_json(Path(args.json), doc)
    if out_dir is not None:
        out_dir.mkdir(exist_ok=True)
        write_json(out_dir / f"{stem}.json", doc)
        atomic_write(out_dir / f"{stem}.md", markdown)


def run(args) -> int:
    battery = Battery.of(args.case or [], args.models)
    cases = battery.cases
    names = list(dict.fromkeys(args.impl or battery.registry.names()))
    for name in names:
        battery.registry.get(name)  # an unknown name: ValueError listing the valid ones
    from ..conformance import accepted as known

    allowed = known.load(args.accept, battery.registry.names()) if args.accept else {}
    timeout = _timeout(args.timeout)
    if args.json:
        checks.writable("--json", args.json)
    out_dir = _out_dir(args.out, battery.stem) if args.out else None
    root = Path(args.models_dir) if args.models_dir else None
    if root is not None and root.exists() and not root.is_dir():
        raise LexkitError(f"--models-dir {args.models_dir}: exists and is not a directory")
    if args.matrix:
        return _matrix(args, battery, out_dir, allowed, timeout, root)
    pythons = _pythons(args.python, names, battery.registry)
    adapters = [_adapter(n, pythons.get(n), battery) for n in names]
    from ..conformance import report
    from ..conformance.remote import RemoteAdapter

    for adapter in adapters:
        if timeout is not None and isinstance(adapter, RemoteAdapter):
            adapter.timeout = timeout
    if args.list:
        print(report.listing(adapters, cases, models=battery.models, whole_suite=not args.case))
        return 0

    ready, skipped = [], []
    for adapter in adapters:
        reason = report.unavailable(adapter)
        if reason:
            skipped.append({"impl": adapter.name, "reason": reason})
        else:
            ready.append(adapter)
    impls = report.implementations(ready)
    results = battery.run(ready, root)

    doc = battery.to_json(results, impls, skipped)
    doc["date"] = datetime.date.today().isoformat()
    table = report.table(results, [a.name for a in ready], cases, battery.cell())
    _write(args, out_dir, battery.stem, doc,
           report.markdown(report.blocks(table, report.notes(results), impls, skipped, doc["date"])))
    print(report.text(results, impls, skipped, cases, table, what=battery.what, models=battery.models))
    for path in ([args.json] if args.json else []) + ([str(out_dir)] if out_dir is not None else []):
        print(f"wrote {path}")
    if args.check:
        named = set(args.impl or ()) | set(pythons)  # asked for by name: not running it is a failure
        unchecked = known.unchecked(results, [a.name for a in ready], skipped, named)
        for line in unchecked:
            print(f"check: {line}: nothing of it was checked")
        lines, new = known.judge(results, allowed, args.accept or "")
        for line in lines:
            print(f"check: {line}")
        if unchecked or new:
            return 1
    return 0


def _matrix(args, battery: Battery, out_dir, allowed, timeout, models_dir) -> int:
    """``--matrix PACKAGE==V1,V2``: the table of case x release, printed and written (the model battery's
    with ``--models``); with ``--check``, exit 1 on a difference in any release that ``--accept``'s file does
    not name."""
    from ..conformance import accepted as known
    from ..conformance import matrix, report

    if args.impl or args.python or args.list:
        raise LexkitError("--matrix runs its package's adapter on each release: leave out --impl, --python and --list")
    package, versions = matrix.parse(args.matrix)
    if battery.models and matrix.PACKAGES[package] not in battery.registry.names():
        valid = ", ".join(p for p, n in matrix.PACKAGES.items() if n in battery.registry.names())
        raise LexkitError(f"--matrix {args.matrix} --models: {package} runs no whole models here; the model "
                          f"runtimes over releases: {valid}")
    cases = battery.cases
    root = Path(args.envs) if args.envs else matrix.ENVS
    by_version = matrix.matrix(package, versions, cases, root, timeout=timeout, models_dir=models_dir)
    table = report.matrix_table(by_version, cases, package, battery.cell())
    doc = report.matrix_document(package, datetime.date.today().isoformat(), by_version)
    _write(args, out_dir, f"{battery.stem}-matrix", doc, report.markdown(report.matrix_blocks(doc, table)))
    print(report.matrix_text(by_version, cases, package, table, what=battery.what, models=battery.models))
    if not args.check:
        return 0
    failed = False
    for v, results in by_version.items():
        lines, new = known.judge(results, allowed, args.accept or "")
        failed |= new
        for line in lines:
            print(f"check: {package} {v}: {line}")
    return 1 if failed else 0
