"""Provenance: what a run or study records about how it was produced, and MFU against a peak."""

import datetime
import subprocess
from pathlib import Path

import pytest
import torch

from lexkit import __version__
from lexkit.core import provenance
from lexkit.training import distributed

KEYS = {"lexkit_version", "git_commit", "torch_version", "python", "platform", "device", "dtype", "autocast",
        "world_size", "backend", "started"}


def test_collect_one_process_on_the_cpu():
    p = provenance.collect(distributed.SINGLE, torch.device("cpu"), "float32")
    assert set(p) == KEYS
    assert p["lexkit_version"] == __version__ and p["torch_version"] == torch.__version__
    assert p["device"]["type"] == "cpu" and p["device"]["count"] == 1
    assert p["world_size"] == 1 and p["backend"] is None and p["dtype"] == "float32" and p["autocast"] is False
    started = datetime.datetime.strptime(p["started"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    assert abs((datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()) < 60


def test_git_commit_is_the_checkout_head_or_none(monkeypatch):
    root = Path(provenance.__file__).resolve().parents[3]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5).stdout.strip() or None
    except OSError:
        head = None
    provenance.git_commit.cache_clear()
    assert provenance.git_commit() == (head if (root / ".git").exists() else None)

    def broken(*a, **k):
        raise OSError("no git here")

    monkeypatch.setattr(provenance.subprocess, "run", broken)
    assert provenance.git_commit() == (head if (root / ".git").exists() else None)  # asked once a process
    provenance.git_commit.cache_clear()
    try:
        assert provenance.git_commit() is None  # never fails
    finally:
        provenance.git_commit.cache_clear()


def test_peaks_and_mfu():
    # dense bf16 peaks of the spec sheets; the PCIe H100 matched before the SXM one
    assert provenance.peak_flops("NVIDIA H200", "bfloat16") == 989.4e12
    assert provenance.peak_flops("NVIDIA H100 80GB HBM3", "bfloat16") == 989.4e12
    assert provenance.peak_flops("NVIDIA H100 PCIe", "bfloat16") == 756e12
    assert provenance.peak_flops("NVIDIA A100-SXM4-80GB", "float16") == 312e12
    assert provenance.peak_flops("NVIDIA A100-SXM4-80GB", "float32") is None
    assert provenance.peak_flops("x86_64", "float32") is None and provenance.peak_flops(None, "bfloat16") is None
    assert provenance.mfu(494.7e12, "NVIDIA H200", "bfloat16") == pytest.approx(0.5)
    assert provenance.mfu(1e12, "some CPU", "float32") is None


def test_flops_per_token_is_nanogpts_estimate():
    # nanoGPT's estimate_mfu: 6N + 12·L·H·Q·T with H·Q = d
    n, layers, d, t = 124_000_000, 12, 768, 1024
    assert provenance.flops_per_token(n, layers, d, t) == 6 * n + 12 * layers * d * t


def test_mfu_peaks_by_device_name():
    """The dense BF16 peaks of the table (datasheet figures with sparsity halved); an NVL board
    is not read as its SXM namesake, and a device or dtype not in the table has no MFU."""
    from lexkit.core.provenance import mfu, peak_flops

    assert peak_flops("NVIDIA H200", "bfloat16") == 989.4e12 and peak_flops("NVIDIA H100 PCIe", "float16") == 756e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", "bfloat16") == 312e12
    assert peak_flops("NVIDIA H200 NVL", "bfloat16") is None and peak_flops("NVIDIA H100 NVL", "bfloat16") is None
    assert peak_flops("NVIDIA H200", "float32") is None and mfu(1e12, "Intel Xeon", "float32") is None
    assert mfu(494.7e12, "NVIDIA H200", "bfloat16") == pytest.approx(0.5)
