"""TensorBoard event files from what lexkit already records (the optional ``lexkit[tb]`` extra).

``metrics.jsonl`` stays the source of truth; this module only copies it into the format
``tensorboard --logdir`` reads, through tensorboardX (numpy and protobuf, not TensorFlow):

* :func:`open_writer` / :class:`Writer`: one metrics row at a time, as a run trains
  (``lexkit train --tensorboard``), each flushed to disk as it is written; a resumed run's writer
  first rewrites the curves from metrics.jsonl (cut back to the checkpoint), so a run killed
  before its writer flushed still has every step, and nothing twice; :func:`training_logdir`
  says where a training job's curves go (a resumed run's go on where they were), the extra
  checked (:func:`check_extra`) before anything is written;
* :func:`export_runs`: the runs below a directory, one subdirectory each, named by its path
  (``lexkit runs DIR --tensorboard OUT``), so a study's runs share one TensorBoard;
* :func:`write_study`: a study's evaluations, bpb by length per scheme and pattern (the
  ``step`` axis is the evaluation length in bytes; ``lexkit study --tensorboard``).
"""

from __future__ import annotations

import hashlib
import re
import sys
import warnings
from pathlib import Path

from ..core.errors import LexkitError
from . import runs

#: metrics.jsonl keys -> TensorBoard tags; any other numeric key ``k`` goes to ``train/k`` (``val/k``
#: for a ``val_k``)
TAGS = {
    "loss": "train/loss",
    "lr": "train/lr",
    "grad_norm": "train/grad_norm",
    "val_bpb": "val/bpb",
    "bytes_per_s": "perf/bytes_per_s",
    "step_seconds": "perf/step_seconds",
    "mfu": "perf/mfu",
}
#: the file name ending of event files written by :func:`export_runs` (a re-export replaces them)
EXPORT_SUFFIX = ".lexkit-export"
#: ... and of a training run's own (followed by a digest of the run's path: runs may share a logdir)
TRAIN_SUFFIX = ".lexkit-train"
INSTALL = "pip install -e '.[tb]'"


def require():
    """The tensorboardX module, or a LexkitError saying which extra to install."""
    try:
        import tensorboardX
    except ImportError as exc:
        raise LexkitError(f"TensorBoard output needs the tensorboardX package, which is not installed: "
                          f"{INSTALL}") from exc
    return tensorboardX


def tag(key: str) -> str:
    """The TensorBoard tag of a metrics.jsonl key."""
    if key in TAGS:
        return TAGS[key]
    return f"val/{key[4:]}" if key.startswith("val_") else f"train/{key}"


def scalars(record: dict) -> dict[str, float]:
    """The numeric fields of one metrics row (``step`` excluded) by tag; booleans, strings and
    None are not scalars."""
    return {tag(k): float(v) for k, v in record.items()
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)}


class Writer:
    """An event file in ``logdir``: :meth:`add` one metrics row at a time; a context manager.
    Written synchronously (tensorboardX's ``EventsWriter``, not ``SummaryWriter``, whose thread
    and queue hold events back from a flush), so what :meth:`flush` returns from is on disk."""

    def __init__(self, logdir: str | Path, *, suffix: str = "") -> None:
        require()
        from tensorboardX.event_file_writer import EventsWriter

        Path(logdir).mkdir(parents=True, exist_ok=True)
        self.logdir = Path(logdir)
        self._events = EventsWriter(str(self.logdir / "events"), suffix)

    def add(self, record: dict, flush: bool = True) -> None:
        """Every numeric field of ``record`` as a scalar at step ``record["step"]``, on disk when
        this returns (unless ``flush`` is False): a run killed later loses none of it."""
        step = int(record["step"])
        for name, value in scalars(record).items():
            self.scalar(name, value, step)
        if flush:
            self.flush()

    def scalar(self, name: str, value: float, step: int) -> None:
        import time

        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.summary import scalar

        self._events.write_event(Event(wall_time=time.time(), step=int(step), summary=scalar(name, float(value))))

    def flush(self) -> None:
        self._events.flush()

    def close(self) -> None:
        self._events.close()

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_writer(logdir: str | Path, run: str | Path | None = None) -> Writer:
    """A :class:`Writer` into ``logdir`` (created); LexkitError when the extra is missing.

    ``run``: the writer of that training run (``lexkit train --tensorboard``). Its event files
    (``*.lexkit-train-<digest of the run's path>``) from an earlier session of the run are
    replaced by the run's metrics.jsonl rows, so a resumed run's curves are whole and single
    whatever the earlier session flushed (metrics.jsonl is cut back to the checkpoint first)."""
    if run is None:
        return Writer(logdir)
    suffix = f"{TRAIN_SUFFIX}-{hashlib.sha256(str(Path(run).resolve()).encode()).hexdigest()[:8]}"
    for old in Path(logdir).glob(f"events.out.tfevents.*{suffix}"):
        old.unlink()
    writer = Writer(logdir, suffix=suffix)
    for row in runs.read_metrics(run):
        if isinstance(row.get("step"), int):
            writer.add(row, flush=False)
    writer.flush()
    return writer


def check_extra() -> None:
    """The extra, checked as a training run needs it before anything is written: a writer opened
    and closed on a scratch directory; a missing extra is one LexkitError naming what to install."""
    import tempfile

    try:
        with tempfile.TemporaryDirectory() as scratch:
            Writer(scratch).close()
    except LexkitError as exc:
        raise LexkitError(f"--tensorboard needs the TensorBoard extra: {INSTALL}") from exc


def training_logdir(logdir: str | Path | None, old: dict | None) -> str | Path | None:
    """Where a training job writes its curves (None: nowhere), decided before anything is written:
    ``logdir`` when given (:func:`check_extra` first); else, for a resumed run whose config.json
    (``old``) records curves, its recorded logdir, with one line saying the curves go on there,
    or, without the extra now, one warning that they stop."""
    if logdir is not None:
        check_extra()
        return logdir
    recorded = (old or {}).get("tensorboard")
    if not recorded:
        return None
    try:
        check_extra()
    except LexkitError as exc:
        warnings.warn(f"{exc}: the run's TensorBoard curves in {recorded} stop at this resume", RuntimeWarning,
                      stacklevel=2)
        return None
    print(f"tensorboard: the curves go on in {recorded} (recorded in config.json)", file=sys.stderr)
    return recorded


def run_name(run_dir: Path, root: Path) -> str:
    """A run's subdirectory in an export: its path below ``root`` (``root``'s own name for
    ``root`` itself)."""
    rel = run_dir.relative_to(root)
    return rel.as_posix() if rel.parts else (root.resolve().name or "run")


def export_writer(logdir: Path) -> Writer:
    """A :class:`Writer` into ``logdir`` whose event file replaces the one a previous export
    left there (event files of other writers are kept)."""
    for old in Path(logdir).glob(f"events.out.tfevents.*{EXPORT_SUFFIX}"):
        old.unlink()
    return Writer(logdir, suffix=EXPORT_SUFFIX)


def export_runs(root: str | Path, logdir: str | Path, *, depth: int = 4) -> list[tuple[str, int]]:
    """Every run at or below ``root`` (:func:`lexkit.training.runs.find`) with logged rows, written to
    ``logdir/<its path below root>``; a previous export there is replaced, nothing else touched.
    Returns (subdirectory, rows written) per run."""
    require()
    root, logdir = Path(root), Path(logdir)
    done = []
    for run_dir in runs.find(root, depth=depth):
        rows = [r for r in runs.read_metrics(run_dir) if isinstance(r.get("step"), int)]
        if not rows:
            continue
        name = run_name(run_dir, root)
        with export_writer(logdir / name) as writer:
            for row in rows:
                writer.add(row)
        done.append((name, len(rows)))
    return done


def slug(text: str) -> str:
    """``text`` as one path component."""
    return "".join(c if c.isalnum() or c in "-.=+" else "_" for c in text)


def tag_slug(text: str) -> str:
    """``text`` as one part of a tag, as TensorBoard stores it: characters other than letters,
    digits and ``-._`` become ``_`` (tensorboardX's own rule, ``=`` and ``+`` included)."""
    return re.sub(r"[^-\w.]", "_", text)
