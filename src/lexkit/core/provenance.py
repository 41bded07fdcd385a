"""How a result was produced: versions, commit, device, precision, ranks, time; and model FLOP
utilisation against a device's peak.

:func:`collect` gives the ``"provenance"`` section of a run's config.json and of a study's
results.json::

    {"lexkit_version": "0.1.0", "git_commit": "c19629d..." | null, "torch_version": "2.13.0",
     "python": "3.12.3", "platform": "Linux-6.8-x86_64-with-glibc2.39",
     "device": {"type": "cuda", "name": "NVIDIA H200", "count": 2}, "dtype": "bfloat16",
     "autocast": true, "world_size": 2, "backend": "nccl", "started": "2026-12-01T00:30:00Z"}

``git_commit`` is the commit of the lexkit checkout the code runs from (an editable install of a
git clone), null for an installed package; it never fails. ``device.count`` is the number of
devices the job uses (one per rank), ``backend`` the process group's (null without one: one
process, or a study's ranks, which share their work through the study directory).

MFU (model FLOP utilisation, PaLM appendix B; nanoGPT's ``estimate_mfu``) is the model's FLOP/s
over the device's dense peak at the training precision: :func:`mfu`, from :data:`PEAK_FLOPS`.
"""

from __future__ import annotations

import datetime
import functools
import platform
import subprocess
from pathlib import Path

import torch

#: Dense (no structured sparsity) tensor-core peak FLOP/s per device at a training dtype, from the
#: vendors' spec sheets: NVIDIA H100 and H200 datasheets (SXM: 989.4 TFLOP/s BF16/FP16 dense, half
#: the 1,979 quoted "with sparsity"; H100 PCIe: 756), NVIDIA A100 datasheet (312 TFLOP/s BF16/FP16
#: dense, 624 with sparsity). Matched in order against the device name (``torch.cuda.get_device_name``),
#: so the more specific "H100 PCIe" comes before "H100". Unknown devices (and CPUs) have no peak;
#: the NVL boards (H100 NVL, H200 NVL: lower clocks and power than SXM) are listed without one so
#: that they are not read as their SXM namesakes.
PEAK_FLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H200 NVL", {}),
    ("H100 NVL", {}),
    ("H200", {"bfloat16": 989.4e12, "float16": 989.4e12}),
    ("H100 PCIe", {"bfloat16": 756.0e12, "float16": 756.0e12}),
    ("H100", {"bfloat16": 989.4e12, "float16": 989.4e12}),
    ("A100", {"bfloat16": 312.0e12, "float16": 312.0e12}),
)


def peak_flops(device_name: str | None, dtype: str | None) -> float | None:
    """The dense peak FLOP/s of ``device_name`` at ``dtype`` ("bfloat16", ...), or None if unknown."""
    if not device_name or not dtype:
        return None
    for key, peaks in PEAK_FLOPS:
        if key.lower() in device_name.lower():
            return peaks.get(dtype)
    return None


def mfu(flops_per_s: float, device_name: str | None, dtype: str | None) -> float | None:
    """``flops_per_s`` (one device's model FLOP/s) as a fraction of that device's peak at
    ``dtype``; None when the peak is not in :data:`PEAK_FLOPS`."""
    peak = peak_flops(device_name, dtype)
    return None if peak is None else flops_per_s / peak


def flops_per_token(params: int, n_layers: int, d_model: int, length: int) -> int:
    """Training FLOPs per token of a decoder: ``6·N + 12·L·d·T`` (N parameters, L layers, width d,
    context T): 6N for the forward and backward matrix multiplies over the weights (2N forward,
    4N backward), 12·L·d·T for the attention scores and their weighted sum (PaLM appendix B;
    nanoGPT's ``estimate_mfu``, with H·Q = d)."""
    return 6 * params + 12 * n_layers * d_model * length


@functools.cache
def git_commit() -> str | None:
    """The commit of the lexkit git checkout this code runs from, or None (an installed package,
    no git, anything going wrong). Asked once a process: the code running is what was imported
    when it started (a sweep that trains for hours records one commit, not a later checkout's)."""
    root = Path(__file__).resolve().parents[3]  # <root>/src/lexkit/core/provenance.py
    if not (root / ".git").exists() or not (root / "src" / "lexkit").is_dir():
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and len(commit) == 40 else None


def now() -> str:
    """The current time, ISO 8601 UTC to the second (``2026-12-01T00:30:00Z``)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def device_name(device: torch.device | str | None) -> str | None:
    """A device's product name (``NVIDIA H200``); the processor for the CPU (may be empty)."""
    device = torch.device(device) if device is not None else None
    if device is not None and device.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(device)
    if device is not None and device.type == "mps":
        return "Apple MPS"
    return platform.processor() or platform.machine() or None


def collect(world=None, device: torch.device | str | None = None, dtype: str | None = None) -> dict:
    """The provenance of a run or study started now (see the module docstring for the keys).
    ``world``: a :class:`lexkit.training.distributed.World` (one process by default); ``device``: this
    rank's device; ``dtype``: the precision the model computes in (autocast's, else the weights')."""
    from .version import __version__

    size = getattr(world, "size", 1)
    dev = torch.device(device) if device is not None else torch.device("cpu")
    backend = None
    if size > 1:
        import torch.distributed as dist

        backend = dist.get_backend() if dist.is_available() and dist.is_initialized() else None
    return {
        "lexkit_version": __version__,
        "git_commit": git_commit(),
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": {"type": dev.type, "name": device_name(dev), "count": size},
        "dtype": dtype,
        "autocast": dev.type == "cuda",
        "world_size": size,
        "backend": backend,
        "started": now(),
    }
