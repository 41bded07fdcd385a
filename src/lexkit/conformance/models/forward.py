"""A decoder of the model families the model cases use, from a checkpoint's own ``config.json`` and
weights: the float64 reference of every model case (:meth:`Decoder.prefill` at ``torch.float64``), and,
in float32 with a KV cache of its own (a ring of W slots on a windowed layer), the toy runtime whose
planted bugs check that the harness catches each class of whole-model bug (:mod:`.runtimes`).

What is under test comes from lexkit's own definitions, never from the runtime's: each layer's RoPE is
the conformance reference's (:class:`lexkit.conformance.Reference`, float64, from the layer type's
``rope_parameters`` read as a :class:`~lexkit.conformance.RopeConfig`), and each layer's mask is the
lexkit pattern of its layer type (``window:W``: W keys including the query, HF's ``sliding_window``;
``chunk:C``) read by :mod:`lexkit.model.hf.model_types`. What is around attention (norms, MLPs, the
projections) follows each family's modelling code in transformers 5, stated in :data:`FAMILIES`.

Shapes: ids [n]; hidden [n, d]; q [Hq, n, hd], k and v [Hkv, n, hd]; logits [n, V].
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import Tensor

from ...attention import Pattern
from ...attention import create as create_pattern
from ...model.hf.model_types import MODEL_TYPES, layer_types, own_pattern, rope_parameters, uses_rope
from ...positions.scaling import HF_KEYS, lexkit_method
from ..adapter import from_interleaved, to_interleaved
from ..config import RopeConfig
from ..reference import Reference


@dataclasses.dataclass(frozen=True)
class Family:
    """What a model type does around attention (transformers 5's modelling code)."""

    fused: bool = False  # qkv_proj and gate_up_proj in one matrix each (Phi-3)
    bias: bool = False  # q, k and v projections with biases (Qwen2, GPT-OSS)
    qk_norm: str | None = None  # RMSNorm of q and k: per head ("head": Qwen3) or over all heads ("all": OLMo 2/3)
    post_norm: bool = False  # norms after attention and MLP outputs, none before (OLMo 2/3)
    out_bias: bool = False  # o_proj with a bias (GPT-OSS)
    sinks: bool = False  # a learned sink logit per head in every softmax, its weight dropped (GPT-OSS)
    moe: bool = False  # a top-k router over experts with GPT-OSS's clamped SwiGLU (gate_up interleaved)
    #: Gemma's recipe: embeddings times √d, RMSNorm weights as (1 + w), a norm before and after attention and
    #: the MLP each, GELU (tanh) MLP, scores scaled by query_pre_attn_scalar^-1/2, soft-capping where set
    gemma: bool = False
    #: Cohere's: LayerNorm (mean removed, a weight, no bias) in place of RMSNorm, attention and the MLP in
    #: parallel from one norm, the logits times ``logit_scale``, RoPE pairs interleaved (2i, 2i + 1)
    cohere: bool = False


FAMILIES = {
    "llama": Family(),
    "mistral": Family(),
    "qwen2": Family(bias=True),
    "qwen3": Family(qk_norm="head"),
    "phi3": Family(fused=True),
    "olmo3": Family(qk_norm="all", post_norm=True),
    "gpt_oss": Family(bias=True, out_bias=True, sinks=True, moe=True),
    "gemma3_text": Family(qk_norm="head", gemma=True),
    "cohere2": Family(cohere=True),
}


def rope_config(params: dict, head_dim: int, config: dict, pairs: str = "half") -> RopeConfig:
    """One layer type's HF ``rope_parameters`` as a :class:`RopeConfig` (the inverse of the HF adapter's
    map; HF's conventions: dynamic NTK reads ``max_position_embeddings`` as L, LongRoPE's factor is
    ``max_position_embeddings / original_max_position_embeddings`` unless given)."""
    ours = {key: params[hf] for key, hf in HF_KEYS.items() if params.get(hf) is not None}
    scaling = lexkit_method(params.get("rope_type", params.get("type", "default")))
    fraction = ours.pop("fraction", None) or config.get("partial_rotary_factor") or 1.0
    original = ours.get("original_len") or config.get("original_max_position_embeddings")
    if scaling == "dynamic":
        ours["original_len"] = config["max_position_embeddings"]
    elif scaling in ("yarn", "llama3", "longrope"):
        ours["original_len"] = int(original or config["max_position_embeddings"])
    if scaling == "longrope":
        ours.setdefault("factor", config["max_position_embeddings"] / ours["original_len"])
        ours["short_factor"], ours["long_factor"] = tuple(ours["short_factor"]), tuple(ours["long_factor"])
    return RopeConfig(head_dim=head_dim, scaling=scaling, fraction=float(fraction), dtype=torch.float64, pairs=pairs,
                      **ours)


@dataclasses.dataclass
class Layer:
    """One layer as the decoder runs it: its layer type, mask, RoPE (None: no rotation)."""

    type: str
    pattern: Pattern
    rope: RopeConfig | None


def decoder_layers(config: dict) -> list[Layer]:
    """Every layer's type, mask and RoPE (None on a layer its model does not rotate), as lexkit reads the
    config (:mod:`lexkit.model.hf.model_types`)."""
    view = SimpleNamespace(**config)
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    types = layer_types(view)
    rotated = uses_rope(view, MODEL_TYPES[config["model_type"]], types)
    pairs = "interleaved" if FAMILIES[config["model_type"]].cohere else "half"
    return [Layer(t, create_pattern(own_pattern(view, t)),
                  rope_config(rope_parameters(view, t), head_dim, config, pairs) if rotate else None)
            for t, rotate in zip(types, rotated)]


def read(directory: str | Path) -> tuple[dict, dict[str, Tensor]]:
    """(config.json, the weights as float64 tensors) of a checkpoint directory."""
    from safetensors.torch import load_file

    directory = Path(directory)
    config = json.loads((directory / "config.json").read_text())
    weights = {}
    for path in sorted(directory.glob("*.safetensors")):
        weights.update({k: v.to(torch.float64) for k, v in load_file(str(path)).items()})
    return config, weights


def _rms(x: Tensor, weight: Tensor, eps: float, offset: float = 0.0) -> Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (offset + weight)


def _cap(x: Tensor, cap: float | None) -> Tensor:
    """Soft-capping, cap·tanh(x/cap) (Gemma's), or x where none is set."""
    return x if not cap else torch.tanh(x / cap) * cap


class Decoder:
    """A checkpoint's decoder at ``dtype`` (float64: the reference); ``layers`` overrides
    :func:`decoder_layers` (a planted bug's)."""

    def __init__(self, config: dict, weights: dict[str, Tensor], dtype: torch.dtype = torch.float64,
                 layers: list[Layer] | None = None) -> None:
        mtype = config["model_type"]
        if mtype not in FAMILIES:
            raise ValueError(f"model type {mtype!r}: the reference decoder runs {', '.join(FAMILIES)}")
        self.config, self.family, self.dtype = config, FAMILIES[mtype], dtype
        self.w = {k: v.to(dtype) for k, v in weights.items()}
        self.layers = layers if layers is not None else decoder_layers(config)
        self.heads, self.kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
        self.head_dim = config.get("head_dim") or config["hidden_size"] // self.heads
        self.eps = config.get("rms_norm_eps", 1e-6)
        self.refs = [Reference(layer.rope) if layer.rope is not None else None for layer in self.layers]
        self.sinks = self.family.sinks  # (a planted bug turns them off)
        gemma = self.family.gemma
        self.scale = (config.get("query_pre_attn_scalar") or self.head_dim) ** -0.5 if gemma else self.head_dim ** -0.5
        self.offset = 1.0 if gemma else 0.0  # RMSNorm's weight is (offset + w)
        self.eps = config.get("layer_norm_eps", self.eps) if self.family.cohere else self.eps

    # -- the pieces around attention -------------------------------------------------------------
    def _qkv(self, i: int, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """[n, d] -> q [Hq, n, hd], k, v [Hkv, n, hd] (before RoPE; q/k norms applied)."""
        p, f, hd = f"model.layers.{i}.self_attn.", self.family, self.head_dim
        if f.fused:
            qkv = x @ self.w[p + "qkv_proj.weight"].T
            q, k, v = qkv.split([self.heads * hd, self.kv_heads * hd, self.kv_heads * hd], dim=-1)
        else:
            q, k, v = (x @ self.w[p + f"{n}_proj.weight"].T for n in "qkv")
            if f.bias:
                q, k, v = q + self.w[p + "q_proj.bias"], k + self.w[p + "k_proj.bias"], v + self.w[p + "v_proj.bias"]
        if f.qk_norm == "all":
            q, k = self._norm(q, p + "q_norm.weight"), self._norm(k, p + "k_norm.weight")
        q, k, v = (t.unflatten(-1, (-1, hd)).transpose(0, 1) for t in (q, k, v))
        if f.qk_norm == "head":
            q, k = self._norm(q, p + "q_norm.weight"), self._norm(k, p + "k_norm.weight")
        return q, k, v

    def _norm(self, x: Tensor, name: str) -> Tensor:
        if self.family.cohere:  # LayerNorm without a bias
            x = x - x.mean(-1, keepdim=True)
        return _rms(x, self.w[name], self.eps, self.offset)

    def _mlp(self, i: int, x: Tensor) -> Tensor:
        p = f"model.layers.{i}.mlp."
        if self.family.moe:
            return self._experts(p, x)
        if self.family.fused:
            gate, up = (x @ self.w[p + "gate_up_proj.weight"].T).chunk(2, dim=-1)
        else:
            gate, up = x @ self.w[p + "gate_proj.weight"].T, x @ self.w[p + "up_proj.weight"].T
        act = (lambda g: torch.nn.functional.gelu(g, approximate="tanh")) if self.family.gemma \
            else torch.nn.functional.silu
        return (act(gate) * up) @ self.w[p + "down_proj.weight"].T

    def _experts(self, p: str, x: Tensor) -> Tensor:
        """GPT-OSS's MLP: each token's top-k experts by the router's logits, weighted by the softmax of
        those k logits; an expert is (up + 1)·gate·σ(α·gate) with gate clamped above at the limit and up
        within ±limit (gate and up interleaved in gate_up), then down; biases throughout."""
        w, c = self.w, self.config
        alpha, limit = c.get("swiglu_alpha", 1.702), c.get("swiglu_limit", 7.0)
        top, idx = (x @ w[p + "router.weight"].T + w[p + "router.bias"]).topk(c["num_experts_per_tok"], dim=-1)
        weights = torch.softmax(top, dim=-1)  # [n, k]
        out = torch.zeros_like(x)
        for e in range(c["num_local_experts"]):
            chosen = idx == e  # [n, k]
            rows = chosen.any(-1)
            if not bool(rows.any()):
                continue
            gate_up = x[rows] @ w[p + "experts.gate_up_proj"][e] + w[p + "experts.gate_up_proj_bias"][e]
            gate, up = gate_up[..., ::2].clamp(max=limit), gate_up[..., 1::2].clamp(-limit, limit)
            y = ((up + 1) * gate * torch.sigmoid(gate * alpha)) @ w[p + "experts.down_proj"][e]
            out[rows] += (y + w[p + "experts.down_proj_bias"][e]) * (weights * chosen)[rows].sum(-1, keepdim=True)
        return out

    def rotate(self, i: int, x: Tensor, pos: Tensor) -> Tensor:
        """Layer ``i``'s RoPE of x [H, n, hd] at positions [n] (the current length max(pos) + 1): the
        reference's in float64; below it the reference's frequencies with the angles p·θ and the tables
        at ``dtype``, as a runtime computes them (so the float32 decoder's error is a runtime's)."""
        ref = self.refs[i]
        if ref is None:
            return x
        if self.dtype == torch.float64:
            return ref.rotate(x, pos)
        theta, a = ref.frequencies(pos)
        angle = pos.to(self.dtype)[:, None] * theta.to(self.dtype)  # [n, r/2]
        cos, sin, r = angle.cos() * a, angle.sin() * a, ref.rot_dims
        inter = ref.config.pairs == "interleaved"
        x = from_interleaved(x, r) if inter else x
        x1, x2 = x[..., : r // 2], x[..., r // 2 : r]
        y = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos, x[..., r:]), dim=-1)
        return to_interleaved(y, r) if inter else y

    def attend(self, i: int, q: Tensor, k: Tensor, v: Tensor, q_idx: Tensor, k_idx: Tensor,
               visible: Tensor | None = None) -> Tensor:
        """softmax(q·k/√hd) v over the keys layer ``i``'s pattern shows: [Hq, n, hd] -> [n, Hq·hd]."""
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
        scores = _cap(q @ k.transpose(-1, -2) * self.scale, self.config.get("attn_logit_softcapping"))
        if visible is None:
            visible = self.layers[i].pattern.visible(q_idx[:, None], k_idx[None, :])
        scores = scores.masked_fill(~visible, -math.inf)
        if self.sinks:  # a column of each head's sink logit in the softmax, its weight then dropped
            sink = self.w[f"model.layers.{i}.self_attn.sinks"].view(-1, 1, 1).expand(-1, scores.shape[1], 1)
            weights = torch.softmax(torch.cat((scores, sink), dim=-1), dim=-1)[..., :-1]
        else:
            weights = torch.softmax(scores, dim=-1)
        return (weights @ v).transpose(0, 1).flatten(1)

    def _block(self, i: int, h: Tensor, attention) -> Tensor:
        """One layer on the hidden state h [n, d]; ``attention(i, x)`` -> its output before o_proj."""
        p, f = f"model.layers.{i}.", self.family
        x = h if f.post_norm else self._norm(h, p + "input_layernorm.weight")
        out = attention(i, x) @ self.w[p + "self_attn.o_proj.weight"].T
        if f.out_bias:
            out = out + self.w[p + "self_attn.o_proj.bias"]
        if f.cohere:  # attention and the MLP side by side from one norm
            return h + out + self._mlp(i, x)
        if f.gemma:  # a norm before and after each of attention and the MLP
            h = h + self._norm(out, p + "post_attention_layernorm.weight")
            y = self._mlp(i, self._norm(h, p + "pre_feedforward_layernorm.weight"))
            return h + self._norm(y, p + "post_feedforward_layernorm.weight")
        if f.post_norm:
            h = h + self._norm(out, p + "post_attention_layernorm.weight")
            return h + self._norm(self._mlp(i, h), p + "post_feedforward_layernorm.weight")
        h = h + out
        return h + self._mlp(i, self._norm(h, p + "post_attention_layernorm.weight"))

    def _embed(self, ids: Tensor) -> Tensor:
        h = self.w["model.embed_tokens.weight"][ids]
        return h * math.sqrt(self.config["hidden_size"]) if self.family.gemma else h

    def _logits(self, h: Tensor) -> Tensor:
        head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])  # tied when absent
        logits = self._norm(h, "model.norm.weight") @ head.T
        if self.family.cohere:
            logits = logits * self.config.get("logit_scale", 1.0)
        return _cap(logits, self.config.get("final_logit_softcapping"))

    # -- prefill and decode ------------------------------------------------------------------------
    def prefill(self, ids: list[int] | Tensor) -> Tensor:
        """Logits [n, V] at every position of ids, one forward pass (the reference's definition)."""
        ids = torch.as_tensor(ids, dtype=torch.long)
        pos = torch.arange(len(ids))

        def attention(i, x):
            q, k, v = self._qkv(i, x)
            return self.attend(i, self.rotate(i, q, pos), self.rotate(i, k, pos), v, pos, pos)

        h = self._embed(ids)
        for i in range(len(self.layers)):
            h = self._block(i, h, attention)
        return self._logits(h)

    def session(self, unmasked: bool = False, shift: int = 0) -> Session:
        """A decoding session with a KV cache (see :class:`Session`)."""
        return Session(self, unmasked, shift)


class Session:
    """Decoding through a KV cache: :meth:`feed` takes the next tokens and returns their logits (the
    first feed is the prefill). Keys are rotated once, when written, at their own positions (decoded
    tokens at position + ``shift``: a runtime one position late). A full layer keeps every key; a
    windowed layer (a pattern with a reach W) keeps, as a ring of W slots does, the keys some query of
    the step can still see (the last W - 1 before the step, its sinks) and masks the step's queries by
    the pattern. ``unmasked``: on decode steps of several tokens, a ring that is its own mask (causal
    over what it holds), right for one token a step and not for several (mlx-lm #1914: keys it should
    evict stay visible)."""

    def __init__(self, decoder: Decoder, unmasked: bool = False, shift: int = 0) -> None:
        self.d, self.unmasked, self.shift, self.length = decoder, unmasked, shift, 0
        empty = torch.empty(decoder.kv_heads, 0, decoder.head_dim, dtype=decoder.dtype)
        self.cache = [(empty, empty, torch.empty(0, dtype=torch.long)) for _ in decoder.layers]

    def feed(self, ids: list[int] | Tensor) -> Tensor:
        """Logits [m, V] of the m tokens ``ids`` that follow what was fed before."""
        d = self.d
        ids = torch.as_tensor(ids, dtype=torch.long)
        idx = torch.arange(self.length, self.length + len(ids))
        decoding = self.length > 0
        pos = idx + (self.shift if decoding else 0)
        unmasked = self.unmasked and decoding and len(ids) > 1

        def attention(i, x):
            q, k, v = d._qkv(i, x)
            q, k = d.rotate(i, q, pos), d.rotate(i, k, pos)
            pattern = d.layers[i].pattern
            keys, values, k_idx = self.cache[i]
            if pattern.reach is not None:  # the ring: what a query of this step can still see
                keep = (k_idx > self.length - pattern.reach) | (k_idx < pattern.sinks)
                keys, values, k_idx = keys[:, keep], values[:, keep], k_idx[keep]
            keys, values, k_idx = torch.cat((keys, k), 1), torch.cat((values, v), 1), torch.cat((k_idx, idx))
            self.cache[i] = (keys, values, k_idx)
            visible = idx[:, None] >= k_idx[None, :]
            if not (unmasked and pattern.reach is not None):
                visible = visible & pattern.visible(idx[:, None], k_idx[None, :])
            return d.attend(i, q, keys, values, idx, k_idx, visible)

        h = d._embed(ids)
        for i in range(len(d.layers)):
            h = d._block(i, h, attention)
        self.length += len(ids)
        return d._logits(h)
