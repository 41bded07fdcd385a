"""The wrapper: a transformers causal LM called like lexkit's own :class:`~lexkit.model.gpt.GPT`.

``model(tokens [b, n], pattern=..., kernel=..., hook=...) -> logits [b, n, vocab]``, with a
``cfg`` (layers, heads, head dim, training length, the label and layout tables print),
``pattern(spec)``, ``cache_refusal`` and ``unit = "tokens"``, so :func:`lexkit.evaluate.evaluate`,
:mod:`lexkit.retrieval` and :mod:`lexkit.resolution` take it as it is. ``stack`` holds every layer in
lexkit's words (a :class:`~lexkit.layouts.LayerStack`, as a byte run's), ``selector_names`` the names selectors
use (its transformers layer type, ``local`` or ``global``). Its text is tokens, not bytes:
:meth:`HFModel.encode` gives the bytes each token covers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ... import positions
from ...attention import Layered, Pattern, layer_patterns
from ...attention import create as create_pattern
from ...attention.kernels import ScoreHook
from ...attention.modifiers import Scoring
from ...core.device import device_of
from ...core.errors import LexkitError
from ...core.specs import spec_number
from ...layouts import Layer, LayerStack
from .interface import CALL, Call
from .model_types import ModelType, layers_of, layout_text, per_type_rope, rope_parameters


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
    rope: dict | None  # rope_type, theta, rotary dims, scaling parameters (of the first layer with RoPE)
    max_positions: int | None  # learned tables: positions 0 .. max_positions - 1
    vocab_size: int | None = None  # logits per token
    #: every layer as lexkit writes a layout (``(rope:base=10000@window:8)x5;rope:base=1000000@causal``),
    #: when the layers differ or a layer has more than its positions under causal attention; else None
    layout: str | None = None
    layer_types: list[str] | None = None  # transformers' type of each layer

    @property
    def label(self) -> str:
        """A label for tables (not a lexkit scheme spec): ``llama: rope (theta 10000, yarn x4)``, ``bloom: alibi``,
        ``gemma3_text: rope (theta 10000/1000000 by layer type)``."""
        text = f"{self.model_type}: {self.positions}"
        if self.rope:
            thetas = self.rope.get("thetas") or [self.rope["theta"]]
            extra = ["theta " + "/".join(map(spec_number, thetas)) + (" by layer type" if len(thetas) > 1 else "")]
            if self.rope["rotary_dims"] != self.head_dim:
                extra.append(f"{self.rope['rotary_dims']} of {self.head_dim} dims rotated")
            if self.rope["type"] != "default":
                extra.append(f"{self.rope['type']} x{self.rope.get('factor', 1):g}")
            text += f" ({', '.join(extra)})"
        return text


def describe_config(config, mtype: ModelType, train_len: int | None, layers: Sequence[Layer]) -> HFConfig:
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    rope = None
    rotated = [layer for layer in layers if layer.scheme.startswith("rope")]
    if rotated:
        params = rope_parameters(config, rotated[0].type)
        factor = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None)
                            or getattr(config, "rotary_pct", 1.0))
        rope = {"type": params.get("rope_type", params.get("type", "default")), "theta": float(params["rope_theta"]),
                "rotary_dims": int(head_dim * factor)}
        rope.update({k: v for k, v in params.items() if k not in ("rope_type", "type", "rope_theta")})
        if per_type_rope(config):
            types = list(dict.fromkeys(layer.type for layer in rotated))
            rope["thetas"] = list(dict.fromkeys(float(rope_parameters(config, t)["rope_theta"]) for t in types))
    if train_len is None:
        original = (rope or {}).get("original_max_position_embeddings")
        train_len = original or getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    plain = len({layer.spec for layer in layers}) == 1 and layers[0].spec.endswith("@causal")
    return HFConfig(
        model_type=config.model_type, n_layers=config.num_hidden_layers, n_heads=heads,
        n_kv_heads=getattr(config, "num_key_value_heads", None) or heads, head_dim=head_dim,
        train_len=train_len, positions=mtype.positions, rope=rope,
        max_positions=getattr(config, "n_positions", None) if mtype.positions == "learned" else None,
        vocab_size=getattr(config, "vocab_size", None),
        layout=None if plain else layout_text(list(layers)), layer_types=[layer.type for layer in layers],
    )


class HFModel(nn.Module):
    """A transformers causal LM run through lexkit's attention (see the module docstring)."""

    def __init__(self, model: nn.Module, tokenizer, mtype: ModelType, source: str,
                 train_len: int | None = None) -> None:
        super().__init__()
        self.hf = model
        self.tokenizer = tokenizer
        self.mtype = mtype
        self.source = source
        layers = layers_of(model.config, mtype)  # read once, then pinned at the length the config gives
        self.cfg = describe_config(model.config, mtype, train_len, layers)
        self.stack = LayerStack(layers, train_len=self.cfg.train_len)  # W of an evaluation pattern: its length
        self.layers = self.stack.layers
        self._own = self.stack.own  # each layer's own mask
        self.selector_names = self.stack.selector_names  # (layer type, local/global) per layer
        self.verify_layout()

    unit = "tokens"  # what a length counts (lexkit.GPT: bytes)

    def pattern(self, spec: str | Pattern = "causal") -> Pattern:
        """An evaluation pattern resolved against this model's layers as a byte run's layout is
        (:func:`lexkit.layouts.resolve_pattern`): unqualified, inside each layer's own mask;
        ``SELECTOR=PATTERN`` (a layer type, ``local``, ``global``, ``L3``, ``L0-2``) replacing the
        selected layers'. W defaults to the training length. ``sinks:...,pos=cache`` is refused:
        transformers rotates q and k before lexkit sees them, so sinks keep their text positions; so
        is a pattern per layer on a model type whose attention is its own (Bloom: one mask for all)."""
        pattern = self.stack.resolve(spec)
        if isinstance(pattern, Layered) and not self.mtype.interface:
            raise ValueError(f"{self.cfg.model_type} computes attention in its own module: lexkit's patterns reach it "
                             f"as one mask for every layer, so a pattern per layer ({pattern.spec}) cannot")
        if pattern.cache_positions:
            raise ValueError(f"pattern {pattern.spec} assigns positions within the cache, but {self.cfg.model_type} "
                             "applies its positions before lexkit's attention; use pos=text")
        return pattern

    def cache_refusal(self, pattern: str | Pattern = "causal", kernel: str = "auto") -> str:
        """Why this model cannot run through lexkit's KV cache (always: see :meth:`GPT.cache_refusal`)."""
        return (f"{self.source} runs whole sequences through transformers (lexkit's KV cache is for "
                "lexkit's own models)")

    def verify_layout(self) -> None:
        """Two forward passes of one token, at positions 0 and 5, check :attr:`layers` against the
        model itself: every layer's mask, sink logits and soft cap as transformers hands them to
        attention, and its RoPE (a lone token's query is the same at both positions on a layer
        without RoPE, rotated on one with it: nothing before attention depends on the position
        otherwise). The token is :meth:`probe_token` (a zero embedding row would give a zero query,
        unrotated by any RoPE). A LexkitError names the first layer lexkit read wrong (a rule of
        this model type it does not know)."""
        if not self.mtype.interface:
            return
        device = device_of(self)
        token = torch.full((1, 1), self.probe_token(), dtype=torch.int64, device=device)
        calls = [Call(create_pattern("causal"), probe=True) for _ in range(2)]
        with torch.no_grad():
            for call, offset in zip(calls, (0, 5)):
                self._run(token, call, offset)
        for i, layer in enumerate(self.layers):
            if i not in calls[0].layers:
                raise LexkitError(f"{self.source}: layer {i} never reached lexkit's attention; lexkit cannot run it")
            rotated = self.cfg.positions == "rope" and not torch.equal(calls[0].queries[i], calls[1].queries[i])
            got = (*calls[0].layers[i], rotated)
            cap = layer.find("softcap")
            want = (layer.pattern.spec, cap and cap.values["C"], layer.find("sink") is not None,
                    layer.scheme.startswith("rope"))
            if got != want:
                raise LexkitError(f"{self.source}: layer {i} reaches attention as (mask, softcap, sink, RoPE) = {got}, "
                                  f"but lexkit read {want} from its {self.cfg.model_type} config; lexkit cannot run it")

    def probe_token(self) -> int:
        """The first token id that is no special token (pad, BOS, EOS of the config; every special
        id of the tokenizer) and whose input embedding row is not zero: transformers zeroes the row
        of ``padding_idx = pad_token_id`` and it never gets a gradient, so the pad token (id 0 in
        Gemma's and Cohere's configs) reaches attention as a zero query at every position."""
        config = self.hf.config
        specials = set(getattr(self.tokenizer, "all_special_ids", None) or [])
        for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
            ids = getattr(config, key, None)
            specials.update(ids if isinstance(ids, (list, tuple)) else [] if ids is None else [ids])
        usable = self.hf.get_input_embeddings().weight.detach().ne(0).any(dim=1)  # [vocab]
        usable[[i for i in specials if 0 <= i < len(usable)]] = False
        if not usable.any():
            raise LexkitError(f"{self.source}: every token's embedding row is zero or a special token's; "
                              "lexkit cannot check how its layers reach attention")
        return int(usable.nonzero()[0])

    def reset_positions(self) -> None:
        """Put every rotary embedding back to its frequencies at the training length (per layer
        type where the model has one per type), so that a dynamic RoPE scaling (which transformers
        recomputes only when a call is longer than every earlier one) runs at the length of the
        next call, whatever ran before."""
        for module in self.hf.modules():
            if not hasattr(module, "max_seq_len_cached"):
                continue
            prefixes = [""] + [f"{t}_" for t in getattr(module, "layer_types", None) or []]
            for prefix in prefixes:
                original = getattr(module, f"{prefix}original_inv_freq", None)
                if original is None:
                    continue
                module.register_buffer(f"{prefix}inv_freq", original.clone(), persistent=False)
                setattr(module, f"{prefix}max_seq_len_cached", module.original_max_seq_len)
            if hasattr(module, "lexkit_scaling"):
                module.attention_scaling = module.lexkit_scaling
            else:
                module.lexkit_scaling = getattr(module, "attention_scaling", 1.0)

    def rope_frequencies(self, length: int, layer: int = 0) -> tuple[Tensor, float]:
        """(inverse frequencies float64 [r/2], attention factor) of layer ``layer``'s rotary
        embedding at a call of ``length`` tokens (its theta, rotated dims and scaling; its layer
        type's on a model with RoPE per type); no frequencies for a layer without RoPE."""
        if not self.layers[layer].scheme.startswith("rope"):
            return torch.zeros(0, dtype=torch.float64), 1.0
        rotary = next(m for name, m in self.hf.named_modules() if name.split(".")[-1] == "rotary_emb")
        device = device_of(self)
        self.reset_positions()
        typed = isinstance(getattr(rotary, "rope_type", None), dict)  # one rotary per layer type (Gemma 3)
        kind = self.layers[layer].type if typed else None
        with torch.no_grad():  # a dynamic scaling adapts to the length here
            args = (kind,) if typed else ()
            rotary(torch.zeros(1, dtype=torch.float32, device=device), torch.arange(length, device=device)[None], *args)
        prefix = f"{kind}_" if typed else ""
        freqs = getattr(rotary, f"{prefix}inv_freq").detach().to(torch.float64).cpu()
        return freqs, float(getattr(rotary, f"{prefix}attention_scaling", 1.0))

    def scoring(self, layer: int) -> Scoring:
        """The query temperature the model applies on layer ``layer`` before attention, as lexkit's
        (Llama 4's NoPE layers: ``llama4``), for the instruments; the model itself applies it."""
        temperature = self.layers[layer].temperature
        return Scoring((temperature,) if temperature is not None else ())

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
        """ValueError when this model type cannot run the request (evaluation reports it per cell)."""
        name = self.cfg.model_type  # (a kernel name is checked where it runs: lexkit's Attention)
        top = self.cfg.max_positions
        if top is not None and offset + n > top:
            raise ValueError(f"{name} has learned positions 0..{top - 1}; length {offset + n} runs past them")
        if offset and any(layer.temperature for layer in self.layers):
            raise ValueError(f"{name} computes its query temperature from the index in the input, not the position: "
                             f"lexkit runs it from position 0 only (offset {offset})")
        refused = next((m for layer in self.layers for m in layer.modifiers if m.flex_refusal), None)
        if kernel == "flex" and refused is not None:
            raise ValueError(f"{name} has {refused.spec} on its layers: {refused.flex_refusal}")
        if not self.mtype.interface:
            if kernel not in ("auto", "dense"):
                raise ValueError(f"{name} computes attention in its own module ({self.cfg.positions} added there): "
                                 "lexkit patterns reach it as a dense mask, so kernel must be auto or dense, "
                                 f"not {kernel}")
            if hooked:
                raise ValueError(self.hook_refusal())

    def hook_refusal(self) -> str | None:
        """Why lexkit's score hook (the empirical resolution) cannot observe this model, or None."""
        if self.mtype.interface:
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
        layer_patterns(pat, self.cfg.n_layers)  # a layered pattern has one pattern per layer
        b, n = tokens.shape
        self.check(n, offset, kernel, hook is not None)
        return self._run(tokens, Call(pat, self._own, kernel, hook), offset).logits

    def _run(self, tokens: Tensor, call: Call, offset: int = 0):
        """transformers' forward pass with ``call`` current; a model that never reached lexkit's
        mask (and, for interface model types, attention) function is an error, never a silent run."""
        b, n = tokens.shape
        extra = {}
        if self.mtype.positions != "alibi":
            extra["position_ids"] = torch.arange(offset, offset + n, device=tokens.device)[None].expand(b, n)
        self.reset_positions()  # dynamic RoPE: at this call's length, whatever ran before
        token = CALL.set(call)
        try:
            out = self.hf(input_ids=tokens, use_cache=False, **extra)
        finally:
            CALL.reset(token)
        needed = {"mask", "attention"} if self.mtype.interface else {"mask"}
        if not needed <= call.seen:  # never silently drop the pattern
            raise ValueError(f"this transformers version's {self.cfg.model_type} did not call lexkit's "
                             f"{' and '.join(sorted(needed - call.seen))} function: lexkit cannot run it")
        return out

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
