"""Run directories: plain, portable, never unpickled.

::

    RUN_DIR/config.json               model, training and data settings (enough to rebuild both)
    RUN_DIR/model.safetensors         the weights (deterministic bytes: no timestamps)
    RUN_DIR/checkpoint.safetensors    weights + AdamW state + RNG state, trainer state as metadata
    RUN_DIR/metrics.jsonl             one JSON object per logged step

Every file is written to a temporary name in the same directory and renamed over the old one, so
a kill at any moment leaves the last good checkpoint whole. The checkpoint is one file, so its
parts can never disagree. Files get the mode the umask gives (like any file a user writes).

Integrity: the safetensors metadata of the weights and the checkpoint carries ``sha256`` (a
hash of every tensor's name, dtype, shape and bytes) and ``model`` (the model section of
config.json). Loading recomputes the one and compares the other, so a damaged file, or weights
copied from another run, are refused with one line naming the file. Files written by lexkit 0.1
have neither: they load with a warning.

One writer: ``train`` holds ``RUN_DIR/.lock`` (see :mod:`lexkit.lock`) while it writes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .errors import RunError
from .model import GPT, ModelConfig
from .positions import randomized

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
CHECKPOINT = "checkpoint.safetensors"
METRICS = "metrics.jsonl"
FORMAT_VERSION = 1


class RunWarning(UserWarning):
    """Something about a run a user should know that does not stop the command."""


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write to ``path`` through a temporary file and a rename (never a half-written file)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RunError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_json(path: Path, obj: Any) -> None:
    """``obj`` as indented strict JSON (NaN and inf as null), atomically (every JSON document
    lexkit writes goes through here)."""
    from .checks import strict_json

    atomic_write(path, strict_json(obj, indent=2) + "\n")


def content_hash(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _model_json(model_section: dict) -> str:
    return json.dumps(model_section, sort_keys=True)


def _sort_metadata(path: Path) -> None:
    """Rewrite a safetensors header in place with its metadata keys sorted: safetensors writes
    them in hash-map order, which differs between processes, and the weights file must have
    deterministic bytes. The new header is the same JSON reordered, so it is no longer than the
    old one; it is padded with spaces (which the format allows) to the same length."""
    with open(path, "r+b") as handle:
        size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(size))
        header["__metadata__"] = dict(sorted(header.get("__metadata__", {}).items()))
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
        if len(text) > size:  # pragma: no cover - reordering cannot lengthen it
            raise RunError(f"cannot normalise the header of {path}")
        handle.seek(8)
        handle.write(text + b" " * (size - len(text)))


def _save_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str], model: GPT) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    metadata = {**metadata, "sha256": content_hash(tensors), "model": _model_json(dataclasses.asdict(model.cfg))}
    try:
        save_file(tensors, str(tmp), metadata=metadata)
        _sort_metadata(tmp)
        os.chmod(tmp, _umask_mode())  # safetensors creates 0600; follow the umask like every other file
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RunError(f"cannot write {path}: {exc.strerror or exc}") from exc


def model_tensors(model: GPT) -> dict[str, torch.Tensor]:
    """State dict without the tied head (it is the embedding)."""
    return {k: v for k, v in model.state_dict().items() if k != "head.weight"}


def save_weights(run_dir: Path, model: GPT) -> None:
    _save_tensors(Path(run_dir) / WEIGHTS, model_tensors(model), {"format": "pt"}, model)


def save_checkpoint(run_dir: Path, model: GPT, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """One file: weights, optimizer tensors and RNG state; scalars and param groups as JSON metadata."""
    tensors = {f"model.{k}": v for k, v in model_tensors(model).items()}
    opt = optimizer.state_dict()
    for index, slots in opt["state"].items():
        for key, value in slots.items():
            tensors[f"optim.{index}.{key}"] = torch.as_tensor(value)
    tensors["rng.torch"] = torch.get_rng_state()
    meta = {"trainer": json.dumps(state, sort_keys=True), "param_groups": json.dumps(opt["param_groups"])}
    _save_tensors(Path(run_dir) / CHECKPOINT, tensors, meta, model)


def load_checkpoint(run_dir: Path, model: GPT, optimizer: torch.optim.Optimizer) -> dict:
    """Restore weights, optimizer and RNG state; returns the trainer state."""
    path = Path(run_dir) / CHECKPOINT
    tensors, meta = _read(path, model)
    _load_model(model, {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}, path)
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, index, slot = key.split(".", 2)
            state.setdefault(int(index), {})[slot] = value
    optimizer.load_state_dict({"state": state, "param_groups": json.loads(meta["param_groups"])})
    torch.set_rng_state(tensors["rng.torch"])
    return json.loads(meta["trainer"])


def trainer_state(run_dir: str | Path) -> dict | None:
    """The trainer state of a run's checkpoint (step, done, loss, elapsed seconds), or None."""
    path = Path(run_dir) / CHECKPOINT
    if not path.is_file():
        return None
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            return json.loads((handle.metadata() or {})["trainer"])
    except (SafetensorError, OSError, KeyError, ValueError) as exc:
        raise RunError(f"{path} is corrupt or truncated ({exc})") from exc


def _read(path: Path, model: GPT, recorded: dict | None = None) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors and metadata of a weights or checkpoint file, verified against ``model``'s
    config, or the run's ``recorded`` model section when given (and their content hash)."""
    if not path.is_file():
        raise RunError(f"{path} is missing")
    try:
        tensors = load_file(str(path))
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata() or {}
    except (SafetensorError, OSError, ValueError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise RunError(f"{path} is corrupt or truncated ({reason})") from exc
    verify(path, tensors, meta, recorded if recorded is not None else dataclasses.asdict(model.cfg))
    return tensors, meta


def verify(path: Path, tensors: dict[str, torch.Tensor], meta: dict[str, str], model_section: dict) -> None:
    """Refuse a file whose content hash or model config does not match (one line naming it)."""
    if "sha256" not in meta:
        warnings.warn(f"{path} has no content hash (written by lexkit 0.1): it cannot be checked for damage",
                      RunWarning, stacklevel=3)
    elif content_hash(tensors) != meta["sha256"]:
        raise RunError(f"{path} is corrupt: its content does not match the hash recorded in it "
                       "(the file was changed or damaged; restore it or train the run again)")
    if "model" in meta:
        try:
            written = json.loads(meta["model"])
        except json.JSONDecodeError as exc:
            raise RunError(f"{path} is corrupt: its recorded model config is not JSON") from exc
        expected = json.loads(_model_json(model_section))
        default = dataclasses.asdict(ModelConfig())  # a key one side predates (model.logn) reads as its default
        diff = [f"{k} {written.get(k)!r} there, {expected.get(k)!r} in config.json"
                for k in sorted(set(written) | set(expected))
                if written.get(k, default.get(k)) != expected.get(k, default.get(k))]
        if diff:
            raise RunError(f"{path} was written for another model than its run's config.json describes "
                           f"({'; '.join(diff[:3])}): copied from another run?")


def mismatch(model: GPT, tensors: dict[str, torch.Tensor]) -> tuple[list[str], list[str], list[str]]:
    """How a weight file's ``tensors`` fail to fit ``model``: (names the model has and the file
    lacks, names the file has and the model lacks, names whose shapes differ); all empty: it fits."""
    expected = model_tensors(model)
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    bad = [k for k in expected if k in tensors and tensors[k].shape != expected[k].shape]
    return missing, extra, bad


def _load_model(model: GPT, tensors: dict[str, torch.Tensor], path: Path, scheme: str | None = None) -> None:
    """Load ``tensors`` into ``model``. ``scheme``: the scheme the user asked for in place of the
    run's own (a mismatch is then that scheme's parameters, not the file's fault)."""
    missing, extra, bad = mismatch(model, tensors)
    if not (missing or extra or bad):
        model.load_state_dict(tensors, strict=False)
        return
    if scheme is not None:
        raise RunError(f"--scheme {scheme} does not fit the weights of {path.parent}: " + fit_problem(
            missing, extra, bad))
    raise RunError(
        f"{path} does not match config.json (missing {missing[:3]}, unexpected {extra[:3]}, wrong shape {bad[:3]})"
    )


def fit_problem(missing: list[str], extra: list[str], bad: list[str]) -> str:
    """A :func:`mismatch` in words, naming the position scheme's parameters (``scheme.*``) it needs
    and does not find, or finds and does not use."""
    def names(keys: list[str]) -> str:
        return ", ".join(keys[:4]) + (f" (+{len(keys) - 4} more)" if len(keys) > 4 else "")

    parts = []
    if missing:
        parts.append(f"it needs parameters the weights do not have ({names(missing)})")
    if extra:
        parts.append(f"the weights have parameters it does not use ({names(extra)})")
    if bad:
        parts.append(f"parameters of another shape ({names(bad)})")
    return "; ".join(parts) + " (give a scheme with the same parameters as the run's)"


def read_config(run_dir: str | Path, *, training: bool = False) -> dict:
    """A run's config.json, checked: its model section (and data spec) always, its train section
    and data fingerprint too when ``training`` (resuming or listing needs them)."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise RunError(f"run directory {run_dir} does not exist")
    if not run_dir.is_dir():
        raise RunError(f"{run_dir} is not a directory")
    path = run_dir / CONFIG
    if not path.is_file():
        raise RunError(f"{run_dir} is not a lexkit run (no {CONFIG}; train one with `lexkit train`)")
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunError(f"{path} is not a valid lexkit run config (not JSON: {exc})") from exc
    except OSError as exc:
        raise RunError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not isinstance(config, dict):
        raise RunError(f"{path} is not a valid lexkit run config (not a JSON object)")
    for section, keys in (TRAINING_SECTIONS if training else SECTIONS).items():
        if not isinstance(config.get(section), dict):
            raise RunError(f"{path} is not a valid lexkit run config (no {section!r} section; "
                           f"a run's config.json has {', '.join(TRAINING_SECTIONS)})")
        missing = [k for k in keys if k not in config[section]]
        if missing:
            raise RunError(f"{path} is not a valid lexkit run config ({section!r} lacks {', '.join(missing)})")
    try:
        ModelConfig(**config["model"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RunError(f"{path} is not a valid lexkit run config ({exc})") from exc
    return config


#: the sections of config.json and the keys each must have (to use a run; to continue or list it)
SECTIONS = {"model": ("scheme",), "data": ("spec",)}
TRAINING_SECTIONS = {"model": ("scheme",), "train": ("steps", "data"), "data": ("spec", "fingerprint")}


def build_model(config: dict) -> GPT:
    return GPT(ModelConfig(**config["model"]))


def load(
    run_dir: str | Path, *, device: str = "cpu", scheme: str | None = None, logn: bool | None = None
) -> tuple[GPT, dict]:
    """The trained model of a run directory (eval mode) and its config dict.

    ``scheme`` / ``logn`` evaluate it under another scheme with the same tensors or with log-n
    scaling switched, without retraining (``lexkit eval --scheme rope:scaling=yarn,factor=4``):
    the returned config's ``model`` then holds the overrides, ``"overrides"`` lists them and
    ``"trained"`` is the run's own model section (the weights are verified against it). A
    scheme's training-length defaults (``original_len``, ReRoPE's ``w``) take the run's length.
    On a run with a layout, ``scheme`` may select layers (``global=rerope:w=64``; unqualified: the
    layers of its family, :func:`lexkit.layouts.override_schemes`) and becomes the layout's."""
    run_dir = Path(run_dir)
    config = read_config(run_dir)
    overrides = {} if logn is None else {"logn": logn}
    if scheme is not None:
        overrides.update(scheme_overrides(config["model"], scheme))
    if logn is not None and config["model"].get("layout") is not None:
        raise ValueError(f"--logn switches log-n on every layer; {run_dir} has a layout "
                         f"({config['model']['layout']}), whose temperatures are per layer")
    if overrides:
        config = {**config, "model": {**config["model"], **overrides}, "overrides": overrides,
                  "trained": config["model"]}
    model = build_model(config)
    load_weights(run_dir, model, recorded=config["trained"] if overrides else None, scheme=scheme)
    return model.to(device).eval(), config


def scheme_overrides(model_section: dict, scheme: str) -> dict:
    """The model-config keys an evaluation ``--scheme`` changes: ``scheme`` on a uniform run given
    one unqualified spec, else the run's ``layout`` with the selected layers' schemes replaced."""
    from . import layouts
    from .positions import canonical

    cfg = ModelConfig(**model_section)
    plain, pairs = layouts.split_overrides(scheme)
    if cfg.layout is None and not pairs:
        return {"scheme": canonical(plain)}
    layers = layouts.override_schemes(cfg.layers(), scheme, cfg.position_len)
    return {"layout": layouts.canonical(layers), "logn": False}  # a uniform run's log-n is now each layer's


def load_weights(run_dir: str | Path, model: GPT, *, recorded: dict | None = None, scheme: str | None = None) -> None:
    """Load a run's trained weights into ``model`` (same architecture; the scheme may differ if it
    has the same tensors, e.g. rope -> rope:scaling=yarn,factor=4). ``recorded``: the run's own
    model section, which the weight file is verified against when ``model`` is built otherwise;
    ``scheme``: the scheme the user gave for ``model`` (named in a mismatch, which is its fault)."""
    path = Path(run_dir) / WEIGHTS
    if not path.is_file():
        raise RunError(f"{run_dir} has no {WEIGHTS} yet (is the run still starting?)")
    _load_model(model, read_weights(run_dir, model, recorded=recorded), path, scheme)


def read_weights(run_dir: str | Path, model: GPT, *, recorded: dict | None = None) -> dict[str, torch.Tensor]:
    """A run's weight tensors, verified (content hash; the model config recorded in the file
    against ``recorded``, the run's model section, or ``model``'s config), not loaded."""
    path = Path(run_dir) / WEIGHTS
    if not path.is_file():
        raise RunError(f"{run_dir} has no {WEIGHTS} yet (is the run still starting?)")
    return _read(path, model, recorded)[0]


def read_metrics(run_dir: str | Path) -> list[dict]:
    """The logged rows. A partial last line (a write cut short by a kill) is dropped; a bad line
    anywhere else is a RunError naming the file and line."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return []
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise RunError(f"cannot read {path}: {exc.strerror or exc}") from exc
    lines = text.split("\n")
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            if number == len(lines):  # no newline after it: the last write was cut short
                break
            raise RunError(f"{path}: line {number} is not a metrics row ({exc}); remove that line to go on") from exc
        rows.append(row)
    return rows


def summary(run_dir: str | Path) -> dict:
    """One run at a glance (``lexkit runs``): scheme, layout (None: uniform), training length, step / total, finished,
    writing (locked by a live process), the validation bpb of the checkpoint's weights (the last
    one logged at or before its step: rows past it belong to steps a resume will redo), the
    parent run of a fine-tune, world size and device (from the provenance), size in bytes.
    Raises RunError for a directory that is not a readable run."""
    from . import lock

    run_dir = Path(run_dir)
    config = read_config(run_dir, training=True)
    state = trainer_state(run_dir) or {}
    step = int(state.get("step", 0))
    try:
        rows = read_metrics(run_dir)
    except RunError:
        rows = []
    bpb = [r["val_bpb"] for r in rows if r.get("val_bpb") is not None and r.get("step", 0) <= step]
    size = sum(p.stat().st_size for p in run_dir.iterdir() if p.is_file())
    origin = config.get("provenance") or {}
    device = origin.get("device") or {}
    return {
        "path": str(run_dir), "layout": config["model"].get("layout"), "train_len": config["model"].get("train_len"),
        "scheme": randomized.label(config["model"]["scheme"], config["model"].get("random_positions")),
        "step": step, "steps": int(config["train"]["steps"]),
        "finished": bool(state.get("done")) and step >= int(config["train"]["steps"]),
        "writing": lock.is_locked(run_dir), "val_bpb": bpb[-1] if bpb else None, "bytes": size,
        "parent": (config.get("init") or {}).get("run"), "world_size": origin.get("world_size"),
        "device": device.get("type") if device.get("type") in (None, "cpu") else device.get("name") or device["type"],
    }


def find(root: str | Path, *, depth: int = 4) -> list[Path]:
    """Run directories (holding config.json) at or below ``root``, at most ``depth`` levels down,
    in path order; hidden directories skipped."""
    root = Path(root)
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        level = len(here.relative_to(root).parts)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")) if level < depth else []
        if CONFIG in filenames:
            found.append(here)
    return sorted(found)


def check_new(out: Path) -> None:
    """``out`` can become a new run: absent, or an empty directory, in a writable place."""
    from . import lock

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RunError(f"{out} exists and is not a directory; give a new --out")
    if out.is_dir() and any(p.name != lock.LOCK for p in out.iterdir()):
        raise RunError(f"{out} exists and is not empty; use --resume to continue it, or another --out")
    parent = out if out.is_dir() else next((p for p in out.absolute().parents if p.exists()), None)
    if parent is not None and not os.access(parent, os.W_OK):
        raise RunError(f"--out {out}: {parent} is not writable")


class RunDir:
    """A run directory while one process writes it: the one owner of its lock, config.json, the
    checkpoint, the metrics file and the provenance.

    ::

        with RunDir(out, resume=False) as run:          # directory created, locked, checked again
            state = run.start(config, model, optimizer) # checkpoint loaded (resume), config.json written
            run.log({"step": 10, "loss": 3.1})          # one metrics row
            run.save(model, optimizer, state)           # checkpoint + weights, atomically
            run.finish()                                # provenance: finished, wall seconds

    Every check that needs no write happens before (:func:`check_new`, :func:`read_config`);
    ``expected`` (on resume) is the config.json the caller checked, which must still be there
    once the lock is held. On resume, metric rows past the checkpoint are dropped (they will
    be logged again) and the provenance of earlier sessions is kept under ``"previous"``.
    """

    def __init__(self, path: str | Path, *, resume: bool = False, expected: dict | None = None) -> None:
        self.path, self.resume, self.expected = Path(path), resume, expected
        self.config: dict | None = None
        self._fd: int | None = None
        self._metrics = None
        self._began = 0.0

    # -- the lock ---------------------------------------------------------------------------
    def open(self) -> RunDir:
        """Create the directory if missing and take its lock; check it again under the lock
        (another writer may have started meanwhile)."""
        from . import lock

        self._fd = lock.take(self.path)
        try:
            if not self.resume:
                check_new(self.path)
            elif read_config(self.path, training=True) != self.expected:
                raise RunError(f"{self.path} changed while this command started; try again")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Close the metrics file and release the lock (idempotent)."""
        from . import lock

        if self._metrics is not None:
            self._metrics.close()
            self._metrics = None
        if self._fd is not None:
            lock.release(self.path, self._fd)
            self._fd = None

    def __enter__(self) -> RunDir:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the files --------------------------------------------------------------------------
    @property
    def has_checkpoint(self) -> bool:
        return (self.path / CHECKPOINT).is_file()

    def start(self, config: dict, model: GPT, optimizer: torch.optim.Optimizer) -> dict:
        """The trainer state to start from: the checkpoint's (weights, optimizer and RNG state
        restored) on resume when there is one, else step 0 (``model`` as the caller built or
        loaded it). Then, unless the run is already finished, metrics are cut back to that step
        and ``config`` is written as config.json (its ``"provenance"`` following the earlier
        sessions'). Returns the trainer state."""
        import time

        self._began = time.perf_counter()
        state: dict = {"step": 0, "done": False}
        if self.resume and self.has_checkpoint:
            state = load_checkpoint(self.path, model, optimizer)
            if state.get("done") and state["step"] >= config["train"]["steps"]:
                return state
        if self.resume:
            self.truncate_metrics(state["step"])
            earlier = (self.expected or {}).get("provenance")
            if earlier and "provenance" in config:
                config = {**config, "provenance": {**config["provenance"], "previous": [
                    {k: v for k, v in earlier.items() if k != "previous"}, *earlier.get("previous", [])]}}
        self.config = config
        write_json(self.path / CONFIG, config)
        self._metrics = open(self.path / METRICS, "a")
        return state

    def log(self, row: dict) -> None:
        """Append one metrics row (flushed: a reader sees it at once)."""
        from .checks import strict_json

        self._metrics.write(strict_json(row) + "\n")
        self._metrics.flush()

    def save(self, model: GPT, optimizer: torch.optim.Optimizer, state: dict) -> None:
        """The checkpoint (weights, optimizer, RNG, ``state``) and the weights file."""
        save_checkpoint(self.path, model, optimizer, state)
        save_weights(self.path, model)

    def finish(self) -> None:
        """Record in config.json's provenance when this session ended and its wall seconds."""
        import time

        from .provenance import now

        if self.config is None or "provenance" not in self.config:
            return
        self.config["provenance"] = {**self.config["provenance"], "finished": now(),
                                     "wall_seconds": round(time.perf_counter() - self._began, 3)}
        write_json(self.path / CONFIG, self.config)

    def truncate_metrics(self, step: int) -> None:
        """Drop metric rows past ``step`` (the checkpoint resumed from: they will be logged again)."""
        from .checks import strict_json

        rows = [r for r in read_metrics(self.path) if r.get("step", 0) <= step]
        atomic_write(self.path / METRICS, "".join(strict_json(r) + "\n" for r in rows))
