"""Run directories: plain, portable, never unpickled.

::

    RUN_DIR/config.json               model, training and data settings (enough to rebuild both)
    RUN_DIR/model.safetensors         the weights (deterministic bytes: no timestamps)
    RUN_DIR/checkpoint.safetensors    weights + AdamW state + RNG state, trainer state as metadata
    RUN_DIR/metrics.jsonl             one JSON object per logged step

Every file is written to a temporary name in the same directory and renamed over the old one, so
a kill at any moment leaves the last good checkpoint whole. The checkpoint is one file, so its
parts can never disagree.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .errors import RunError
from .model import GPT, ModelConfig

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
CHECKPOINT = "checkpoint.safetensors"
METRICS = "metrics.jsonl"
FORMAT_VERSION = 1


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write to ``path`` through a temporary file and a rename (never a half-written file)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data.encode() if isinstance(data, str) else data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_json(path: Path, obj: Any) -> None:
    """``obj`` as indented JSON, atomically (every JSON document lexkit writes goes through here)."""
    atomic_write(path, json.dumps(obj, indent=2) + "\n")


def _save_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    tmp = Path(path).with_name(f".{Path(path).name}.tmp")
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp), metadata=metadata)
    with open(tmp, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def model_tensors(model: GPT) -> dict[str, torch.Tensor]:
    """State dict without the tied head (it is the embedding)."""
    return {k: v for k, v in model.state_dict().items() if k != "head.weight"}


def save_weights(run_dir: Path, model: GPT) -> None:
    _save_tensors(Path(run_dir) / WEIGHTS, model_tensors(model), {"format": "pt"})


def save_checkpoint(run_dir: Path, model: GPT, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """One file: weights, optimizer tensors and RNG state; scalars and param groups as JSON metadata."""
    tensors = {f"model.{k}": v for k, v in model_tensors(model).items()}
    opt = optimizer.state_dict()
    for index, slots in opt["state"].items():
        for key, value in slots.items():
            tensors[f"optim.{index}.{key}"] = torch.as_tensor(value)
    tensors["rng.torch"] = torch.get_rng_state()
    meta = {"trainer": json.dumps(state, sort_keys=True), "param_groups": json.dumps(opt["param_groups"])}
    _save_tensors(Path(run_dir) / CHECKPOINT, tensors, meta)


def load_checkpoint(run_dir: Path, model: GPT, optimizer: torch.optim.Optimizer) -> dict:
    """Restore weights, optimizer and RNG state; returns the trainer state."""
    path = Path(run_dir) / CHECKPOINT
    tensors, meta = _read(path)
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


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    if not path.is_file():
        raise RunError(f"{path} is missing")
    try:
        tensors = load_file(str(path))
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata() or {}
    except (SafetensorError, OSError, ValueError) as exc:
        raise RunError(f"{path} is corrupt or truncated ({str(exc).splitlines()[0]})") from exc
    return tensors, meta


def _load_model(model: GPT, tensors: dict[str, torch.Tensor], path: Path) -> None:
    expected = model_tensors(model)
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    bad = [k for k in expected if k in tensors and tensors[k].shape != expected[k].shape]
    if missing or extra or bad:
        raise RunError(
            f"{path} does not match config.json (missing {missing[:3]}, unexpected {extra[:3]}, wrong shape {bad[:3]})"
        )
    model.load_state_dict(tensors, strict=False)


def read_config(run_dir: str | Path) -> dict:
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
        ModelConfig(**config["model"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise RunError(f"{path} is not a valid lexkit run config ({exc})") from exc
    return config


def build_model(config: dict) -> GPT:
    return GPT(ModelConfig(**config["model"]))


def load(
    run_dir: str | Path, *, device: str = "cpu", scheme: str | None = None, logn: bool | None = None
) -> tuple[GPT, dict]:
    """The trained model of a run directory (eval mode) and its config dict.

    ``scheme`` / ``logn`` evaluate it under another scheme with the same tensors or with log-n
    scaling switched, without retraining (``lexkit eval --scheme rope:scaling=yarn,factor=4``):
    the returned config's ``model`` then holds the overrides, ``"overrides"`` lists them and
    ``"trained"`` the run's own values. A
    scheme's training-length defaults (``original_len``, ReRoPE's ``w``) take the run's length."""
    run_dir = Path(run_dir)
    config = read_config(run_dir)
    overrides = {k: v for k, v in (("scheme", scheme), ("logn", logn)) if v is not None}
    if scheme is not None:
        from .positions import canonical

        overrides["scheme"] = canonical(scheme)
    if overrides:
        trained = {k: config["model"].get(k) for k in overrides}
        config = {**config, "model": {**config["model"], **overrides}, "overrides": overrides, "trained": trained}
    model = build_model(config)
    try:
        load_weights(run_dir, model)
    except RunError as exc:
        if scheme is not None:
            raise RunError(f"scheme {scheme} does not fit the weights of {run_dir} ({exc})") from exc
        raise
    return model.to(device).eval(), config


def load_weights(run_dir: str | Path, model: GPT) -> None:
    """Load a run's trained weights into ``model`` (same architecture; the scheme may differ if it
    has the same tensors, e.g. rope -> rope:scaling=yarn,factor=4)."""
    path = Path(run_dir) / WEIGHTS
    if not path.is_file():
        raise RunError(f"{run_dir} has no {WEIGHTS} yet (is the run still starting?)")
    tensors, _ = _read(path)
    _load_model(model, tensors, path)


def read_metrics(run_dir: str | Path) -> list[dict]:
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

