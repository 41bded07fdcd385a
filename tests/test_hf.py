"""lexkit.hf: Hugging Face causal LMs through lexkit's attention, offline.

Tiny random models of each family are built from configs and saved to temporary directories
(no download; HF_HUB_OFFLINE=1 in conftest). References are transformers' own eager attention
(its causal mask, its sliding window, its rope scaling) or formulas written out here.
"""

from __future__ import annotations

import math
import sys

import pytest
import torch

from lexkit.errors import LexkitError

VOCAB_TEXT = [
    "def f(x):\n    return x * 2  # doubled\n",
    "The quick brown fox jumps over the lazy dog. ",
    "naïve café — größer 東京 ✓ emoji 🙂 end",
]
CORPUS = ("".join(VOCAB_TEXT) * 30).encode()  # one long document (ASCII and multi-byte text)


# -- fixtures: tiny models and a byte-level BPE tokenizer ---------------------------------------
@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("transformers")


def _tokenizer(tf, bos: bool = True):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>"] if bos else []
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(VOCAB_TEXT * 3, trainer=trainer)
    kwargs = {"bos_token": "<s>", "eos_token": "</s>"} if bos else {}
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok, **kwargs)


VOCAB = 300
SMALL = dict(vocab_size=VOCAB, bos_token_id=0, eos_token_id=1)


def _configs(tf) -> dict:
    rope = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=32, **SMALL)
    return {
        "llama": tf.LlamaConfig(**rope),
        "mistral": tf.MistralConfig(**rope, sliding_window=None),
        "qwen2": tf.Qwen2Config(**rope),
        "gpt_neox": tf.GPTNeoXConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     rotary_pct=0.25, max_position_embeddings=32, **SMALL),
        "gpt2": tf.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=48, **SMALL),
        "bloom": tf.BloomConfig(hidden_size=32, n_layer=2, n_head=4, **SMALL),
    }


@pytest.fixture(scope="module")
def saved(tf, tmp_path_factory):
    """family -> directory holding a tiny random model and a byte-level BPE tokenizer."""
    out = {}
    tokenizer = _tokenizer(tf)
    for name, config in _configs(tf).items():
        torch.manual_seed(0)
        model = tf.AutoModelForCausalLM.from_config(config)
        with torch.no_grad():  # random biases too (several families start them at zero)
            for p in model.parameters():
                p.add_(0.02 * torch.randn_like(p))
        path = tmp_path_factory.mktemp(name)
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        out[name] = path
    return out


def _eager(tf, path, **config_changes):
    config = tf.AutoConfig.from_pretrained(path)
    for key, value in config_changes.items():
        setattr(config, key, value)
    return tf.AutoModelForCausalLM.from_pretrained(path, config=config, attn_implementation="eager").eval()


def _ids(n: int, batch: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randint(2, VOCAB, (batch, n), generator=torch.Generator().manual_seed(seed))


# -- parity with transformers ---------------------------------------------------------------------
FAMILIES = ["llama", "mistral", "qwen2", "gpt_neox", "gpt2", "bloom"]


@pytest.mark.parametrize("family", FAMILIES)
def test_causal_reproduces_transformers_eager(tf, saved, family):
    from lexkit import hf

    x = _ids(40)
    with torch.no_grad():
        theirs = _eager(tf, saved[family])(x).logits
        model = hf.load(saved[family])
        ours = model(x, pattern="causal")
    assert model.hf.config._attn_implementation == "lexkit"
    assert theirs.abs().max() > 0.1  # not a degenerate model
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)
