"""Attention-only blocks (``ModelConfig.mlp`` False, ``lexkit train --no-mlp``; Sanford, Hsu and Telgarsky
2024's MLP-free transformers, the hunt's C3): the parameter count from its closed form, a forward that is
the residual stream plus attention only, the setting recorded and read back, and what it refuses."""

import json

import pytest
import torch

from cli_checks import train_refused
from lexkit import GPT
from lexkit.model.gpt import ModelConfig
from lexkit.training import runs
from lexkit.training.loop import train
from lexkit.training.settings import configs


def test_parameter_count_is_embedding_attention_and_norms_only():
    d, layers, vocab = 32, 3, 257
    cfg = ModelConfig(scheme="learned", n_layers=layers, d_model=d, n_heads=4, train_len=16, mlp=False)
    model = GPT(cfg)
    # embedding (tied head) + learned positions [16, d] + per block: ln1 (2d) + qkv (3d^2) + proj (d^2) + ln_f (2d)
    expected = vocab * d + 16 * d + layers * (2 * d + 4 * d * d) + 2 * d
    assert sum(p.numel() for p in model.parameters()) == expected
    with_mlp = GPT(ModelConfig(scheme="learned", n_layers=layers, d_model=d, n_heads=4, train_len=16))
    assert sum(p.numel() for p in with_mlp.parameters()) - expected == layers * (2 * d + 8 * d * d)


def test_forward_is_residual_plus_attention():
    """NoPE logits written out: h = E[t]; h += W_o·softmax-causal(q k^T/sqrt(hd))·v of LN1(h); LN_f(h)·E^T."""
    torch.manual_seed(0)
    b, n, d, heads = 2, 8, 16, 2
    model = GPT(ModelConfig(scheme="none", n_layers=2, d_model=d, n_heads=heads, train_len=n, mlp=False)).eval()
    tokens = torch.randint(0, 256, (b, n))
    h = model.embed(tokens)
    for block in model.blocks:
        q, k, v = block.qkv(block.ln1(h)).view(b, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4).unbind(0)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # [b, heads, n, hd]
        h = h + block.proj(y.transpose(1, 2).reshape(b, n, d))
    expected = model.ln_f(h) @ model.embed.weight.T
    assert all(block.mlp is None and block.ln2 is None for block in model.blocks)
    assert torch.allclose(model(tokens), expected, atol=1e-5)
    with_mlp = GPT(ModelConfig(scheme="none", n_layers=2, d_model=d, n_heads=heads, train_len=n)).eval()
    with_mlp.load_state_dict(model.state_dict(), strict=False)
    assert not torch.allclose(with_mlp(tokens), expected, atol=1e-3)  # the MLP is gone, not zeroed


def test_recorded_and_read_back(tmp_path):
    from lexkit.data.corpus import Corpus
    from toy_corpus import DOCS

    corpus = Corpus("toy", DOCS[:-3], DOCS[-3:], {"source": "toy", "files": len(DOCS), "bytes": 1})
    model_cfg, train_cfg = configs("tiny", "learned", mlp=False, steps=2, save_every=2, eval_every=2, warmup=1)
    train(tmp_path / "run", model_cfg, train_cfg, progress=False, corpus=corpus)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["model"]["mlp"] is False
    model = runs.load(tmp_path / "run")[0]
    assert model.cfg.mlp is False and all(block.mlp is None for block in model.blocks)
    # a config written before the setting existed reads as with an MLP
    assert ModelConfig(**{k: v for k, v in json.loads((tmp_path / "run" / "config.json").read_text())["model"].items()
                          if k != "mlp"}).mlp is True


def test_refusals(tmp_path, capsys):
    with pytest.raises(ValueError, match="mlp must be true or false"):
        ModelConfig(mlp="no")
    with pytest.raises(ValueError, match=r"layer 0.s \+conv:at=ff .*\(--no-mlp\)"):
        ModelConfig(layout="rope@causal+conv:4,at=ff", n_layers=1, mlp=False)
    line = train_refused(tmp_path, capsys, ["--no-mlp", "--layout", "rope@causal+conv:4,at=ff"])
    assert line.startswith("error: ") and "at=ff" in line
