"""Devices and module state: ``auto`` and LEXKIT_DEVICE, device_of, eval_mode restoring the mode."""

import pytest
import torch
from torch import nn

from lexkit.core.device import device_of, eval_mode, resolve_device, training_dtype


def test_auto_follows_lexkit_device(monkeypatch):
    monkeypatch.setenv("LEXKIT_DEVICE", "cpu")
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setenv("LEXKIT_DEVICE", "auto")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("LEXKIT_DEVICE", "tpu")
    with pytest.raises(ValueError, match="unknown device 'tpu'; valid: auto, cpu"):
        resolve_device("auto")
    assert resolve_device("cpu") == torch.device("cpu")  # an explicit device ignores the variable


def test_device_of_a_module():
    assert device_of(nn.Linear(2, 2)) == torch.device("cpu")
    assert device_of(nn.Identity()) == torch.device("cpu")  # no parameters, no buffers


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_restores_the_mode_also_on_error(training):
    model = nn.Sequential(nn.Dropout(0.5)).train(training)
    with eval_mode(model):
        assert not model.training and not model[0].training
    assert model.training is training and model[0].training is training
    with pytest.raises(RuntimeError), eval_mode(model):
        raise RuntimeError("boom")
    assert model.training is training


def test_the_trainer_computes_in_bfloat16_on_cuda_and_float32_elsewhere():
    """One rule (lexkit.core.device.training_dtype) for the autocast, the MFU and the provenance."""
    from contextlib import nullcontext

    from lexkit.training.loop import device_autocast

    assert [training_dtype(d) for d in ("cpu", "cuda", "cuda:1", torch.device("mps"))] == [
        "float32", "bfloat16", "bfloat16", "float32"]
    assert isinstance(device_autocast(torch.device("cpu")), nullcontext)
    if torch.cuda.is_available():
        autocast = device_autocast(torch.device("cuda"))
        assert isinstance(autocast, torch.autocast) and autocast.fast_dtype == torch.bfloat16
