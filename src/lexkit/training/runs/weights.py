"""Weights and checkpoints: written with their content hash and model config (:mod:`.integrity`),
atomically; read back verified. The checkpoint is one file (weights, optimizer tensors, RNG state;
the trainer state and parameter groups as JSON metadata), so its parts can never disagree."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ...core.errors import RunError
from ...model.gpt import GPT
from .files import CHECKPOINT, WEIGHTS, umask_mode
from .integrity import content_hash, fit_problem, mismatch, model_json, model_tensors, sort_metadata, verify


def _save_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str], model: GPT) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    metadata = {**metadata, "sha256": content_hash(tensors), "model": model_json(dataclasses.asdict(model.cfg))}
    try:
        save_file(tensors, str(tmp), metadata=metadata)
        sort_metadata(tmp)
        os.chmod(tmp, umask_mode())  # safetensors creates 0600; follow the umask like every other file
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RunError(f"cannot write {path}: {exc.strerror or exc}") from exc


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


def recorded_model(run_dir: str | Path, name: str = WEIGHTS) -> dict | None:
    """The model section a run's weight file (or its checkpoint, ``name=CHECKPOINT``) records: its
    ``model`` metadata, the model it holds. None when there is no such file or it records none (lexkit 0.1)."""
    path = Path(run_dir) / name
    if not path.is_file():
        return None
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            text = (handle.metadata() or {}).get("model")
        return json.loads(text) if text is not None else None
    except (SafetensorError, OSError, ValueError) as exc:
        raise RunError(f"{path} is corrupt or truncated ({exc})") from exc


def finished(state: dict | None, steps: int) -> bool:
    """Whether a trainer state is a run's end: its last step taken (``steps``), or stopped there by
    its stop rule (``"stopped"``, :mod:`lexkit.training.stopping`)."""
    return bool(state and state.get("done") and (state["step"] >= steps or state.get("stopped") is not None))


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
