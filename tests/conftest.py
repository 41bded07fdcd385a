import os
import sys

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # tests never reach a hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

torch.set_num_threads(min(2, os.cpu_count() or 1))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures"))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _device(request, monkeypatch):
    """Tests about CPU behaviour run on the CPU even on a GPU machine (``auto`` means cpu); tests
    marked ``gpu`` need CUDA and are skipped without it (``make test-gpu`` runs them)."""
    if request.node.get_closest_marker("gpu") is not None:
        if not torch.cuda.is_available():
            pytest.skip("needs CUDA")
        monkeypatch.setenv("LEXKIT_DEVICE", "cuda")
    else:
        monkeypatch.setenv("LEXKIT_DEVICE", "cpu")
