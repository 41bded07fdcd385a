"""Integrity of weights and checkpoints: the safetensors metadata of each carries ``sha256`` (a hash of
every tensor's name, dtype, shape and bytes) and ``model`` (the model section of config.json).
Loading recomputes the one and compares the other, so a damaged file, or weights copied from
another run, are refused with one line naming the file. Files written by lexkit 0.1 have neither:
they load with a warning. Also: how a set of tensors fails to fit a model, in words.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from pathlib import Path

import torch

from ...core.errors import RunError
from ...model.gpt import GPT, ModelConfig
from .files import RunWarning


def content_hash(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def model_json(model_section: dict) -> str:
    return json.dumps(model_section, sort_keys=True)


def sort_metadata(path: Path) -> None:
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
        diff = model_differences(written, json.loads(model_json(model_section)))
        if diff:
            raise RunError(f"{path} was written for another model than its run's config.json describes "
                           f"({'; '.join(diff[:3])}): copied from another run?")


def model_differences(written: dict, expected: dict) -> list[str]:
    """How a weight file's recorded model section ``written`` differs from ``expected`` (config.json's),
    one phrase per key; a key one side predates (``model.logn``, ``model.untied_head``) reads as its default."""
    default = dataclasses.asdict(ModelConfig())
    return [f"{k} {written.get(k)!r} there, {expected.get(k)!r} in config.json"
            for k in sorted(set(written) | set(expected))
            if written.get(k, default.get(k)) != expected.get(k, default.get(k))]


def model_tensors(model: GPT) -> dict[str, torch.Tensor]:
    """State dict without the tied head (it is the embedding, saved once as ``embed.weight``); an
    untied head (``untied_head``) is its own ``head.weight``."""
    tied = getattr(model.cfg, "untied_head", False) is False
    return {k: v for k, v in model.state_dict().items() if not (tied and k == "head.weight")}


def mismatch(model: GPT, tensors: dict[str, torch.Tensor]) -> tuple[list[str], list[str], list[str]]:
    """How a weight file's ``tensors`` fail to fit ``model``: (names the model has and the file
    lacks, names the file has and the model lacks, names whose shapes differ); all empty: it fits."""
    expected = model_tensors(model)
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    bad = [k for k in expected if k in tensors and tensors[k].shape != expected[k].shape]
    return missing, extra, bad


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
