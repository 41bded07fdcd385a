"""Which torch device a command runs on: ``auto`` (CUDA when present, else CPU), ``cpu``,
``cuda``/``cuda:N`` or ``mps``; asking for one that is not here is a clear ValueError."""

from __future__ import annotations

import torch


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda", "mps") and not device.startswith("cuda:"):
        raise ValueError(f"unknown device {device!r}; valid: auto, cpu, cuda, cuda:N, mps")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: no CUDA device is available here (use cpu or auto)")
    if device == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ValueError("--device mps: MPS is not available here (use cpu or auto)")
    return torch.device(device)
