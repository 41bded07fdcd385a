"""The out-of-process sides (src/lexkit/conformance/sides/) call their runtime as its models do, checked
without the runtime: a fake package in its place records the call."""

from __future__ import annotations

import sys

import pytest

from lexkit import conformance

#: a stand-in for mlx-lm: ``initialize_rope`` records its arguments in ``CALLS``
FAKE_ROPE_UTILS = '''
CALLS = []


def initialize_rope(dims, base, traditional, scaling_config=None, max_position_embeddings=None):
    CALLS.append((dims, base, traditional, scaling_config, max_position_embeddings))
    return object()
'''


#: the modules the mlx-lm side's test imports
MODULES = ("mlx_lm", "mlx_lm.models", "mlx_lm.models.rope_utils", "mlxlm_side", "readoff", "hfrope")


@pytest.fixture
def fake_mlx_lm(tmp_path, monkeypatch):
    """The mlx-lm side importable over a fake ``mlx_lm``; yields the fake's list of ``initialize_rope`` calls.
    The modules imported here leave ``sys.modules`` when the test ends."""
    from lexkit.conformance.remote import SIDES

    models = tmp_path / "mlx_lm" / "models"
    models.mkdir(parents=True)
    (tmp_path / "mlx_lm" / "__init__.py").write_text("")
    (models / "__init__.py").write_text("")
    (models / "rope_utils.py").write_text(FAKE_ROPE_UTILS)
    for name in MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)  # any there before: back after the test
    monkeypatch.syspath_prepend(str(SIDES))
    monkeypatch.syspath_prepend(str(tmp_path))
    import mlx_lm.models.rope_utils

    assert mlx_lm.models.rope_utils.__file__ == str(models / "rope_utils.py")
    yield mlx_lm.models.rope_utils.CALLS
    for name in MODULES:  # the fake and the side out before monkeypatch puts back what was there
        sys.modules.pop(name, None)


@pytest.mark.parametrize("case, dims", [("rope/partial-0.3", 19), ("rope/default", 64)])
def test_the_mlx_lm_side_passes_the_rotary_dims_mlx_lms_models_do(fake_mlx_lm, case, dims):
    """int(head_dim * partial_rotary_factor), as mlx-lm's models pass it (bailing_moe.py, qwen3_next.py):
    19 of 64 at 0.3, odd and not rounded down to lexkit's 18 (mlx then raises, an error cell)."""
    import mlxlm_side

    from lexkit.conformance.remote import config_json

    config = conformance.cases([case])[0].config
    assert (config.head_dim, config.fraction) == (64, 0.3 if case == "rope/partial-0.3" else 1.0)
    side = mlxlm_side.build(config_json(config))
    assert fake_mlx_lm == [(dims, 10000.0, False, None, 4096)]
    assert side.r == dims


def test_the_mlx_lm_side_batches_sequences_of_different_lengths_as_one_call(fake_mlx_lm, monkeypatch):
    """Right-padded into one model call (no mask: causal rows do not see the padding after them), each
    sequence's rows at its own real positions."""
    import types

    import numpy as np

    mx = types.ModuleType("mlx.core")
    mx.array, mx.float32 = np.asarray, np.float32
    mlx = types.ModuleType("mlx")
    mlx.core = mx
    monkeypatch.setitem(sys.modules, "mlx", mlx)
    monkeypatch.setitem(sys.modules, "mlx.core", mx)
    import mlxlm_side

    calls = []

    def causal_toy(block):  # [B, n] -> [B, n, 3]: the logits at t from the ids up to t only
        calls.append(block.shape)
        total = np.cumsum(block, axis=1)
        return np.stack([total, total ** 2, np.arange(block.shape[1]) + 0 * total], axis=-1).astype(np.float32)

    model = object.__new__(mlxlm_side.Model)
    model.model = causal_toy
    seqs = [np.array([3, 1, 4, 1, 5]), np.array([2, 7])]
    rows = model.batch(seqs)
    assert calls == [(2, 5)]  # one call of both
    assert [r.shape for r in rows] == [(5, 3), (2, 3)]
    assert np.array_equal(rows[1], causal_toy(seqs[1][None])[0])  # as if alone
