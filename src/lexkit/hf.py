"""Hugging Face causal LMs behind lexkit's patterns and kernels (optional extra ``hf``): the
transformers adapter, and nothing else (the instruments take the model as they take a run's).

``load(path)`` returns an :class:`HFModel`: a transformers causal LM (a local ``save_pretrained``
directory, or a hub name already in the local cache; nothing is downloaded) whose attention runs
through lexkit. It is called like lexkit's own :class:`~lexkit.model.GPT`,
``model(tokens [b, n], pattern=..., kernel=..., hook=...) -> logits [b, n, vocab]``, and has a
``cfg`` (layers, heads, head dim, training length), ``pattern(spec)``, ``cache_refusal`` and
``unit = "tokens"``, so :func:`lexkit.evaluate.evaluate` and :mod:`lexkit.resolution` take it as
it is; ``lexkit.load("hf:PATH")`` (:mod:`lexkit.subject`) wraps it for the instruments. Its text
is tokens, not bytes: :meth:`HFModel.encode` gives the bytes each token covers.

How attention reaches lexkit (transformers' supported extension points, no model code patched):

* ``AttentionMaskInterface.register("lexkit", mask)``: the model's mask factory calls ``mask``
  with its own predicate (causal, or causal and a sliding window for Mistral/Qwen2 layers that
  have one). ``mask`` intersects it with the lexkit pattern of the current call (a registered
  pattern's ``visible`` predicate: ``causal``, ``window:W``, ``bca:W``, or any pattern a user
  registers) and returns that :class:`~lexkit.attention.Pattern` itself, which the model hands
  unchanged to its attention function.
* ``AttentionInterface.register("lexkit", attention)``: query [b, Hq, n, d] and key/value
  [b, Hkv, n, d] arrive with RoPE already applied; GQA heads are repeated, the model's scaling is
  folded into the query (lexkit's kernels divide by sqrt(d)), and lexkit's
  :class:`~lexkit.attention.Attention` runs with position scheme ``none`` (the model did the
  positions) and the combined pattern, on the kernel asked for (dense, chunked with the score
  hook, flex).
* Families whose attention module does not call the interface (Bloom: ALiBi is added inside
  ``BloomAttention``) still build their mask through the mask interface: there ``mask`` returns
  the pattern as a dense additive mask, so the pattern applies, ALiBi is kept, and the model's own
  eager attention runs (O(n^2); the kernel choice and the score hook are not available).

The pattern of a call travels in a context variable set by :meth:`HFModel.forward`: a mask
function receives no arguments of the call, only the config.

Families verified by the tests (tiny random models against transformers' eager attention):
Llama, Mistral and Qwen2 (RoPE, GQA, native sliding windows), GPT-NeoX (partial rotary),
GPT-2 (learned absolute positions) and Bloom (ALiBi).
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from torch import Tensor, nn

from . import positions
from .attention import Attention, Pattern
from .attention import create as create_pattern
from .attention.kernels import ScoreHook
from .attention.patterns import Both, Window
from .device import device_of
from .errors import LexkitError

ATTN = "lexkit"  # the name registered with transformers' attention and mask interfaces
EXTRA = "pip install 'lexkit[hf]'"


@dataclasses.dataclass(frozen=True)
class Family:
    """How one transformers model type holds positions and runs attention."""

    positions: str  # "rope", "learned" or "alibi"
    interface: bool  # attention goes through AttentionInterface (lexkit's kernels)


FAMILIES = {
    "llama": Family("rope", True),
    "mistral": Family("rope", True),
    "qwen2": Family("rope", True),
    "gpt_neox": Family("rope", True),
    "gpt2": Family("learned", True),
    "bloom": Family("alibi", False),
}


def require():
    """transformers, or a LexkitError naming the extra."""
    try:
        import transformers
    except ImportError as exc:
        raise LexkitError(f"Hugging Face models need the optional extra `hf` (transformers): {EXTRA}") from exc
    return transformers


# -- the attention and mask functions registered with transformers -------------------------------
@dataclasses.dataclass
class _Call:
    """What one forward pass asks of attention: the pattern, the kernel, the score hook."""

    pattern: Pattern
    kernel: str = "auto"
    hook: ScoreHook | None = None
    attentions: dict = dataclasses.field(default_factory=dict)
    seen: set = dataclasses.field(default_factory=set)  # which of mask / attention this call reached

    def attention(self, heads: int, head_dim: int, n: int, pattern: Pattern, device) -> Attention:
        """One :class:`Attention` per (shape, pattern) and forward: its dense mask is shared by
        every layer."""
        key = (heads, head_dim, n, pattern.spec, str(device))
        if key not in self.attentions:
            scheme = _nope(heads, head_dim, device)
            pos = torch.arange(n, device=device)
            self.attentions[key] = Attention(scheme, pattern, pos, kernel=self.kernel, hook=self.hook, extent=n)
        return self.attentions[key]


_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("lexkit_hf_call", default=None)
_NOPE: dict = {}


def _nope(heads: int, head_dim: int, device) -> positions.Scheme:
    key = (heads, head_dim, str(device))
    if key not in _NOPE:
        _NOPE[key] = positions.create("none", n_heads=heads, head_dim=head_dim).to(device)
    return _NOPE[key]


def _current() -> _Call:
    call = _CALL.get()
    return call if call is not None else _Call(create_pattern("causal"))


def native_window(mask_function, local_size: int | None) -> int | None:
    """The model's own mask as a window size: None for plain causal, W for a causal sliding
    window (checked on probe rows against 0 <= m - n < W); anything else is a ValueError."""
    from transformers.masking_utils import causal_mask_function

    if mask_function is None or mask_function is causal_mask_function:
        return None
    if local_size is not None:
        w = int(local_size)
        q = torch.tensor([0, w - 1, w, w + 1, 2 * w + 1])[:, None]
        k = torch.arange(2 * w + 2)[None, :]
        theirs = mask_function(0, 0, q, k)
        if torch.equal(theirs.expand(q.shape[0], k.shape[1]), Window(W=w).visible(q, k)):
            return w
    raise ValueError("this model's own attention mask is neither causal nor a causal sliding window; "
                     "lexkit cannot combine it with its patterns")


def mask(batch_size, q_length=None, kv_length=None, q_offset=0, kv_offset=0, mask_function=None,
         attention_mask=None, local_size=None, config=None, dtype=torch.float32, device="cpu",
         cache_position=None, **kwargs):
    """The mask interface function: the lexkit pattern within the model's own mask (see the
    module docstring). A Pattern for interface families, a dense additive mask otherwise."""
    if q_length is None:  # transformers 4.x passes the query positions instead (written from its source)
        q_length, q_offset, device = cache_position.shape[0], int(cache_position[0]), cache_position.device
    if q_length != kv_length or q_offset or kv_offset:
        raise ValueError("lexkit attention runs whole sequences without a KV cache (pass use_cache=False)")
    if attention_mask is not None and not bool(attention_mask.all()):
        raise ValueError("lexkit attention takes no padding mask: evaluate unpadded windows")
    call = _current()
    call.seen.add("mask")
    own = native_window(mask_function, local_size)
    pattern = call.pattern if own is None else Both(call.pattern, Window(W=own))
    family = FAMILIES.get(getattr(config, "model_type", None))
    if family is None or family.interface:
        return pattern
    idx = torch.arange(q_length, device=device)
    visible = pattern.visible(idx[:, None], idx[None, :])  # [n, n]
    additive = torch.zeros(visible.shape, dtype=dtype, device=device).masked_fill(~visible, float("-inf"))
    return additive[None, None].expand(batch_size, 1, q_length, kv_length)


def attention(module, query: Tensor, key: Tensor, value: Tensor, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The attention interface function: lexkit's kernels on the model's (rotated) q, k, v.
    query [b, Hq, n, d], key/value [b, Hkv, n, d] -> (output [b, n, Hq, d], None)."""
    if not isinstance(attention_mask, Pattern):
        raise ValueError("lexkit attention takes its pattern from lexkit.hf (HFModel.forward), not attention_mask")
    if dropout:
        raise ValueError("lexkit attention is for evaluation: put the model in eval mode (dropout > 0)")
    b, heads, n, d = query.shape
    if key.shape[-2] != n:
        raise ValueError("lexkit attention runs whole sequences without a KV cache (pass use_cache=False)")
    if key.shape[1] != heads:  # GQA: each key/value head serves heads / Hkv query heads
        key = key.repeat_interleave(heads // key.shape[1], dim=1)
        value = value.repeat_interleave(heads // value.shape[1], dim=1)
    if scaling is not None:  # lexkit's kernels divide by sqrt(d); the model's factor may differ
        query = query * (scaling * math.sqrt(d))
    call = _current()
    call.seen.add("attention")
    attend = call.attention(heads, d, n, attention_mask, query.device)
    out = attend(query, key, value, getattr(module, "layer_idx", 0) or 0)  # [b, h, n, d]
    return out.transpose(1, 2).contiguous(), None


def register() -> None:
    """Register :func:`attention` and :func:`mask` under the name ``lexkit`` (idempotent)."""
    tf = require()
    tf.AttentionInterface.register(ATTN, attention)
    tf.AttentionMaskInterface.register(ATTN, mask)


# -- the model -----------------------------------------------------------------------------------
@dataclasses.dataclass
class HFConfig:
    """The shape lexkit's instruments read (``cfg`` of a lexkit GPT has the same fields)."""

    model_type: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    train_len: int | None
    positions: str
    rope: dict | None  # rope_type, theta, rotary dims, scaling parameters
    max_positions: int | None  # learned tables: positions 0 .. max_positions - 1
    vocab_size: int | None = None  # logits per token

    @property
    def scheme(self) -> str:
        """A label for tables: ``llama: rope (theta 10000, yarn x4)``, ``bloom: alibi``."""
        text = f"{self.model_type}: {self.positions}"
        if self.rope:
            extra = [f"theta {self.rope['theta']:g}"]
            if self.rope["rotary_dims"] != self.head_dim:
                extra.append(f"{self.rope['rotary_dims']} of {self.head_dim} dims rotated")
            if self.rope["type"] != "default":
                extra.append(f"{self.rope['type']} x{self.rope.get('factor', 1):g}")
            text += f" ({', '.join(extra)})"
        return text


def _describe(config, family: Family, train_len: int | None) -> HFConfig:
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    rope = None
    if family.positions == "rope":
        # transformers 5: rope_parameters (theta and scaling); 4.x: rope_theta and rope_scaling
        params = dict(getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {})
        theta = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        factor = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None)
                            or getattr(config, "rotary_pct", 1.0))
        rope = {"type": params.get("rope_type", params.get("type", "default")), "theta": float(theta),
                "rotary_dims": int(head_dim * factor)}
        rope.update({k: v for k, v in params.items() if k not in ("rope_type", "type", "rope_theta")})
    if train_len is None:
        original = (rope or {}).get("original_max_position_embeddings")
        train_len = original or getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    return HFConfig(
        model_type=config.model_type, n_layers=config.num_hidden_layers, n_heads=heads,
        n_kv_heads=getattr(config, "num_key_value_heads", None) or heads, head_dim=head_dim,
        train_len=train_len, positions=family.positions, rope=rope,
        max_positions=getattr(config, "n_positions", None) if family.positions == "learned" else None,
        vocab_size=getattr(config, "vocab_size", None),
    )


class HFModel(nn.Module):
    """A transformers causal LM run through lexkit's attention (see the module docstring)."""

    def __init__(self, model: nn.Module, tokenizer, family: Family, source: str, train_len: int | None = None) -> None:
        super().__init__()
        self.hf = model
        self.tokenizer = tokenizer
        self.family = family
        self.source = source
        self.cfg = _describe(model.config, family, train_len)

    unit = "tokens"  # what a length counts (lexkit.GPT: bytes)

    def pattern(self, spec: str | Pattern = "causal") -> Pattern:
        """A pattern spec resolved against this model (W defaults to its training length).
        ``sinks:...,pos=cache`` is refused: transformers rotates q and k before lexkit sees them,
        so sinks can only keep their text positions here."""
        pattern = create_pattern(spec, default_window=self.cfg.train_len)
        if pattern.cache_positions:
            raise ValueError(f"pattern {pattern.spec} assigns positions within the cache, but {self.cfg.model_type} "
                             "applies its positions before lexkit's attention; use pos=text")
        return pattern

    def cache_refusal(self, pattern: str | Pattern = "causal", kernel: str = "auto") -> str:
        """Why this model cannot run through lexkit's KV cache (always: see :meth:`GPT.cache_refusal`)."""
        return (f"{self.source} runs whole sequences through transformers (lexkit's KV cache is for "
                "lexkit's own models)")

    def reset_positions(self) -> None:
        """Put every rotary embedding back to its frequencies at the training length, so that a
        dynamic RoPE scaling (which transformers recomputes only when a call is longer than
        every earlier one) runs at the length of the next call, whatever ran before."""
        for module in self.hf.modules():
            original = getattr(module, "original_inv_freq", None)
            if original is None or not hasattr(module, "max_seq_len_cached"):
                continue
            module.register_buffer("inv_freq", original.clone(), persistent=False)
            module.max_seq_len_cached = module.original_max_seq_len
            if hasattr(module, "lexkit_scaling"):
                module.attention_scaling = module.lexkit_scaling
            else:
                module.lexkit_scaling = getattr(module, "attention_scaling", 1.0)

    def rope_frequencies(self, length: int) -> tuple[Tensor, float]:
        """(inverse frequencies float64 [r/2], attention factor) of the model's own rotary
        embedding at a call of ``length`` tokens (its theta, rotated dims and scaling)."""
        rotary = self.hf.base_model.rotary_emb
        device = device_of(self)
        self.reset_positions()
        with torch.no_grad():  # a dynamic scaling adapts to the length here
            rotary(torch.zeros(1, dtype=torch.float32, device=device), torch.arange(length, device=device)[None])
        return rotary.inv_freq.detach().to(torch.float64).cpu(), float(getattr(rotary, "attention_scaling", 1.0))

    def position_scheme(self) -> positions.Scheme | None:
        """The model's positions as a lexkit scheme where lexkit has one (Bloom: ``alibi`` with
        its head count, the same slopes; GPT-2: ``learned`` holding its position table); None
        for RoPE (see :meth:`rope_frequencies`)."""
        cfg = self.cfg
        if cfg.positions == "alibi":
            return positions.create("alibi", n_heads=cfg.n_heads, head_dim=cfg.head_dim)
        if cfg.positions == "learned":
            weight = self.hf.base_model.wpe.weight.detach().float().cpu()  # [positions, d_model]
            scheme = positions.create("learned", n_heads=cfg.n_heads, head_dim=cfg.head_dim, max_len=weight.shape[0])
            with torch.no_grad():
                scheme.table.copy_(weight)
            return scheme
        return None

    def check(self, n: int, offset: int = 0, kernel: str = "auto", hooked: bool = False) -> None:
        """ValueError when this family cannot run the request (evaluation reports it per cell)."""
        name = self.cfg.model_type  # (a kernel name is checked where it runs: lexkit's Attention)
        top = self.cfg.max_positions
        if top is not None and offset + n > top:
            raise ValueError(f"{name} has learned positions 0..{top - 1}; length {offset + n} runs past them")
        if not self.family.interface:
            if kernel not in ("auto", "dense"):
                raise ValueError(f"{name} computes attention in its own module ({self.cfg.positions} added there): "
                                 "lexkit patterns reach it as a dense mask, so kernel must be auto or dense, "
                                 f"not {kernel}")
            if hooked:
                raise ValueError(self.hook_refusal())

    def hook_refusal(self) -> str | None:
        """Why lexkit's score hook (the empirical resolution) cannot observe this model, or None."""
        if self.family.interface:
            return None
        return (f"{self.cfg.model_type} does not run attention through lexkit's kernels, so the score hook "
                "(empirical resolution) is unavailable; the analytic resolution is")

    def forward(
        self,
        tokens: Tensor,
        pattern: str | Pattern = "causal",
        offset: int = 0,
        *,
        kernel: str = "auto",
        hook: ScoreHook | None = None,
    ) -> Tensor:
        """tokens [b, n] int64 -> logits [b, n, vocab] under ``pattern``; ``offset`` is the first
        token's position; ``hook`` observes every layer's scores (chunked kernel)."""
        pat = self.pattern(pattern)
        b, n = tokens.shape
        self.check(n, offset, kernel, hook is not None)
        extra = {}
        if self.family.positions != "alibi":
            extra["position_ids"] = torch.arange(offset, offset + n, device=tokens.device)[None].expand(b, n)
        self.reset_positions()  # dynamic RoPE: at this call's length, whatever ran before
        call = _Call(pat, kernel, hook)
        token = _CALL.set(call)
        try:
            logits = self.hf(input_ids=tokens, use_cache=False, **extra).logits
        finally:
            _CALL.reset(token)
        needed = {"mask", "attention"} if self.family.interface else {"mask"}
        if not needed <= call.seen:  # never silently drop the pattern
            raise ValueError(f"this transformers version's {self.cfg.model_type} did not call lexkit's "
                             f"{' and '.join(sorted(needed - call.seen))} function: lexkit cannot run it")
        return logits

    # -- text ------------------------------------------------------------------------------------
    def encode(self, doc: bytes | str) -> tuple[Tensor, Tensor]:
        """``(tokens [T], nbytes [T - 1])``: the protocol's token sequence of one document (the
        tokenizer's BOS, else its EOS, when it has one, then the document's tokens) and the bytes
        of text each token after the first covers (summing to the bytes of the text the scored
        tokens span). Bytes are those of the UTF-8 text (invalid bytes decode as U+FFFD)."""
        tok = self.tokenizer
        if tok is None:
            raise LexkitError(f"{self.source} has no tokenizer: save one beside the model (tokenizer.save_pretrained)")
        if not getattr(tok, "is_fast", False):
            raise LexkitError(f"{self.source}: lexkit needs a fast tokenizer "
                              "(its offsets give the bytes each token covers)")
        text = doc.decode("utf-8", errors="replace") if isinstance(doc, (bytes, bytearray)) else doc
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = list(enc["input_ids"])
        ends = torch.tensor([end for _, end in enc["offset_mapping"]], dtype=torch.int64)
        char_bytes = _utf8_lengths(text)
        byte_at = torch.cat((torch.zeros(1, dtype=torch.int64), char_bytes.cumsum(0)))  # [chars + 1]
        covered = torch.cummax(byte_at[ends], 0).values if len(ids) else ends  # bytes of text up to token i
        prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        if prefix is not None:
            ids = [prefix] + ids
            covered = torch.cat((torch.zeros(1, dtype=torch.int64), covered))
        return torch.tensor(ids, dtype=torch.int64), covered.diff()

    def decode(self, tokens: Tensor | Sequence[int]) -> bytes:
        """The UTF-8 bytes of the text of ``tokens`` (special tokens such as BOS left out)."""
        if self.tokenizer is None:
            raise LexkitError(f"{self.source} has no tokenizer: save one beside the model (tokenizer.save_pretrained)")
        ids = tokens.tolist() if isinstance(tokens, Tensor) else list(tokens)
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False).encode("utf-8")


def _utf8_lengths(text: str) -> Tensor:
    """Bytes of each character of ``text`` in UTF-8, int64 [chars]."""
    if text.isascii():
        return torch.ones(len(text), dtype=torch.int64)
    raw = bytearray(text.encode("utf-32-le", errors="surrogatepass"))
    cp = torch.frombuffer(raw, dtype=torch.int32).to(torch.int64)  # code points [chars]
    return 1 + (cp >= 0x80).long() + (cp >= 0x800).long() + (cp >= 0x10000).long()


def parse_rope_scaling(text: str | dict | None) -> dict | None:
    """``yarn:4``, ``yarn:factor=4,original_max_position_embeddings=2048``, ``linear:2`` or a
    JSON object -> the dict transformers reads as ``rope_scaling``/``rope_parameters``."""
    if text is None or isinstance(text, dict):
        return text
    if text.strip().startswith("{"):
        try:
            out = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--rope-scaling {text!r}: not valid JSON ({exc.msg})") from None
        if not isinstance(out, dict):
            raise ValueError(f"--rope-scaling {text!r}: expected a JSON object")
        return out
    kind, _, rest = text.partition(":")
    out: dict[str, Any] = {"rope_type": kind.strip()}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        key, value = (key, value) if eq else ("factor", key)
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"--rope-scaling {text!r}: {value!r} is not a number") from None
    return out


def _apply_rope_scaling(config, scaling: dict, family: Family) -> None:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if family.positions != "rope":
        raise ValueError(f"{config.model_type} has {family.positions} positions, not RoPE: rope scaling does not apply")
    kind = scaling.get("rope_type", scaling.get("type"))
    valid = sorted({"default", *ROPE_INIT_FUNCTIONS})
    if kind not in valid:
        raise ValueError(f"unknown rope scaling type {kind!r}; valid: {', '.join(valid)}")
    if kind != "default" and "factor" not in scaling:
        raise ValueError(f"rope scaling {kind} needs a factor, e.g. {kind}:4")
    scaling = {k: v for k, v in scaling.items() if k != "type"} | {"rope_type": kind}
    if getattr(config, "rope_parameters", None) is not None:  # transformers 5
        config.rope_parameters = {**config.rope_parameters, **scaling}
    else:  # transformers 4.x
        config.rope_scaling = scaling


def load(
    path: str | Path,
    *,
    rope_scaling: dict | str | None = None,
    dtype: torch.dtype | str = torch.float32,
    device: str | torch.device = "cpu",
    train_len: int | None = None,
) -> HFModel:
    """A causal LM (and its tokenizer, when one is saved beside it) from a local directory or
    the local hub cache (``hf:`` prefix allowed), attention through lexkit, in eval mode.

    ``rope_scaling``: a dict (or :func:`parse_rope_scaling` text) merged into the config's
    ``rope_parameters`` (transformers 5) or set as ``rope_scaling`` (4.x) before the model is
    built, so transformers' own RoPE scaling runs (linear, dynamic, yarn, longrope, llama3).
    ``train_len``: the length the model was trained at (default: the config's
    ``original_max_position_embeddings``, ``max_position_embeddings`` or ``n_positions``)."""
    tf = require()
    register()
    tf.utils.logging.set_verbosity_error()
    tf.utils.logging.disable_progress_bar()
    source = str(path)
    name = source[3:] if source.startswith("hf:") else source
    if isinstance(dtype, str):
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise ValueError(f"unknown dtype {dtype!r}; e.g. float32, bfloat16, float16")
        dtype = getattr(torch, dtype)
    try:
        config = tf.AutoConfig.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise LexkitError(f"cannot load a model config from {name!r} (a save_pretrained directory, or a hub name "
                          f"in the local cache): {str(exc).splitlines()[0]}") from exc
    family = FAMILIES.get(config.model_type)
    if family is None:
        raise LexkitError(f"{name}: model type {config.model_type!r} is not supported; "
                          f"supported: {', '.join(FAMILIES)}")
    scaling = parse_rope_scaling(rope_scaling)
    if scaling:
        _apply_rope_scaling(config, scaling, family)
    try:
        model = tf.AutoModelForCausalLM.from_pretrained(
            name, config=config, attn_implementation=ATTN, local_files_only=True)
    except (OSError, ValueError, SafetensorError) as exc:  # a truncated or corrupt weights file included
        raise LexkitError(f"cannot load the model from {name!r}: {(str(exc).splitlines() or [repr(exc)])[0]} "
                          "(is model.safetensors complete?)") from exc
    try:
        tokenizer = tf.AutoTokenizer.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError, TypeError):
        tokenizer = None  # logits still work; text needs one (HFModel.encode says so)
    model = model.to(device=device, dtype=dtype).eval()
    return HFModel(model, tokenizer, family, source if source.startswith("hf:") else f"hf:{source}", train_len)
