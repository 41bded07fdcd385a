"""Where a module runs: which torch device a command uses, the device a module lives on, the
precision the trainer computes in there, and evaluation mode for the length of a block.

``resolve_device``: ``auto`` (CUDA when present, else CPU; the environment variable
``LEXKIT_DEVICE`` overrides what ``auto`` means, e.g. ``LEXKIT_DEVICE=cpu`` on a GPU machine),
``cpu``, ``cuda``/``cuda:N`` or ``mps``; asking for one that is not here is a clear ValueError.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        chosen = os.environ.get("LEXKIT_DEVICE", "").strip()
        if chosen and chosen != "auto":
            return resolve_device(chosen)
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda", "mps") and not device.startswith("cuda:"):
        raise ValueError(f"unknown device {device!r}; valid: auto, cpu, cuda, cuda:N, mps")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: no CUDA device is available here (use cpu or auto)")
    if device == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ValueError("--device mps: MPS is not available here (use cpu or auto)")
    return torch.device(device)


def training_dtype(device: str | torch.device) -> str:
    """The precision lexkit's trainer computes in on ``device``: ``"bfloat16"`` (autocast) on CUDA,
    ``"float32"`` elsewhere (the CPU and MPS train in float32). The one rule the trainer's autocast,
    its MFU and every run's provenance read."""
    return "bfloat16" if torch.device(device).type == "cuda" else "float32"


def device_of(module: nn.Module) -> torch.device:
    """The device of a module's first parameter (or buffer); CPU for a module with neither."""
    for tensor in module.parameters():
        return tensor.device
    for tensor in module.buffers():
        return tensor.device
    return torch.device("cpu")


@contextmanager
def eval_mode(module: nn.Module) -> Iterator[nn.Module]:
    """``with eval_mode(model): ...`` runs the block in evaluation mode and restores the mode
    the module had (training or not) on the way out, also when the block raises."""
    was_training = module.training
    module.eval()
    try:
        yield module
    finally:
        module.train(was_training)
