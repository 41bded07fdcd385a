"""The attention and mask functions lexkit registers with transformers under the name ``lexkit``
(its supported extension points; no model code is patched).

* ``AttentionMaskInterface.register("lexkit", mask)``: a model's mask factory calls :func:`mask`
  once per layer type with its own predicate (causal, a sliding window, Llama 4's chunks).
  :func:`own_mask` reads that predicate back as a lexkit :class:`~lexkit.attention.Pattern`
  (``causal``, ``window:W``, ``chunk:C``, checked on probe rows, anything else an error), and
  :func:`mask` returns it: the model hands it unchanged to each layer of that type.
* ``AttentionInterface.register("lexkit", attention)``: query [b, Hq, n, d] and key/value
  [b, Hkv, n, d] arrive with the model's positions already applied (RoPE on the layers that have
  it, Llama 4's query temperature); :func:`attention` checks the layer's own mask against what
  lexkit read from the config, takes the layer's pattern of the current call (its own, inside an
  evaluation pattern, or a ``SELECTOR=PATTERN`` replacing it: :func:`lexkit.layouts.resolve_pattern`),
  repeats GQA heads, folds the model's scaling into the query (lexkit's kernels divide by sqrt(d)),
  and runs lexkit's :class:`~lexkit.attention.Attention` with position scheme ``none``, the model's
  sink logits (``s_aux``) and soft cap (``softcap``), on the kernel asked for.
* Families whose attention module does not call the interface (Bloom: ALiBi is added inside
  ``BloomAttention``) still build their mask through the mask interface: there :func:`mask` returns
  the call's pattern as a dense additive mask (the model's own eager attention runs, ALiBi kept).

An argument a model passes to attention that lexkit does not know is an error naming it, never
dropped. The pattern of a call travels in a context variable set by ``HFModel.forward``: a mask
function receives no arguments of the call, only the config.
"""

from __future__ import annotations

import contextvars
import dataclasses
import math

import torch
from torch import Tensor

from ... import positions
from ...attention import Attention, Layered, Pattern, intersect
from ...attention import create as create_pattern
from ...attention.kernels import ScoreHook
from ...attention.modifiers import Scoring, Sink, SoftCap
from ...attention.patterns import Chunk, Window
from ...core.errors import LexkitError
from .model_types import MODEL_TYPES

ATTN = "lexkit"  # the name registered with transformers' attention and mask interfaces
EXTRA = "pip install -e '.[hf]'"
#: arguments models pass to attention that do not change what it computes
HARMLESS = frozenset({"position_ids", "cache_position", "use_cache", "output_attentions", "output_hidden_states",
                      "output_router_logits", "return_dict", "is_causal"})


def require():
    """transformers, or a LexkitError naming the extra."""
    try:
        import transformers
    except ImportError as exc:
        raise LexkitError(f"Hugging Face models need the optional extra `hf` (transformers): {EXTRA}") from exc
    return transformers


@dataclasses.dataclass
class Call:
    """What one forward pass asks of attention: the pattern (one, or one per layer), each layer's
    own mask as lexkit reads the config (None: unknown, then the pattern applies inside the mask the
    model gives), the kernel and the score hook; and what reached attention, per layer."""

    pattern: Pattern
    own: tuple[Pattern, ...] | None = None
    kernel: str = "auto"
    hook: ScoreHook | None = None
    attentions: dict = dataclasses.field(default_factory=dict)
    seen: set = dataclasses.field(default_factory=set)  # which of mask / attention this call reached
    #: layer index -> (its own mask's spec, its soft cap, whether it passed a sink logit)
    layers: dict = dataclasses.field(default_factory=dict)
    #: layer index -> the query of the first token as it reached attention (kept when ``probe``)
    queries: dict = dataclasses.field(default_factory=dict)
    probe: bool = False

    def layer_pattern(self, layer: int, own: Pattern) -> Pattern:
        """The pattern layer ``layer`` runs, given the mask the model gave it (``own``)."""
        if isinstance(self.pattern, Layered):
            return self.pattern.layers[layer]
        return self.pattern if self.own is not None else intersect(own, self.pattern)

    def attention(self, heads: int, head_dim: int, n: int, pattern: Pattern, device, sink: Tensor | None,
                  softcap: float | None) -> Attention:
        """One :class:`Attention` per (shape, pattern, sink logits, soft cap) and forward: its dense mask
        is shared by every layer that has them. The model's sink logits and soft cap reach lexkit's
        kernels as lexkit's own modifiers (``sink``, ``softcap``); the model applies its temperature
        itself, before attention."""
        key = (heads, head_dim, n, pattern.spec, str(device), None if sink is None else id(sink), softcap)
        if key not in self.attentions:
            modifiers = ((Sink(),) if sink is not None else ()) + ((SoftCap(C=softcap),) if softcap is not None else ())
            scoring = Scoring.of(*modifiers, states={"sink": sink})
            scheme = _nope(heads, head_dim, device)
            pos = torch.arange(n, device=device)
            self.attentions[key] = Attention(scheme, pattern, pos, kernel=self.kernel, hook=self.hook, extent=n,
                                             scoring=scoring)
        return self.attentions[key]


CALL: contextvars.ContextVar[Call | None] = contextvars.ContextVar("lexkit_hf_call", default=None)
_NOPE: dict = {}


def _nope(heads: int, head_dim: int, device) -> positions.Scheme:
    key = (heads, head_dim, str(device))
    if key not in _NOPE:
        _NOPE[key] = positions.create("none", n_heads=heads, head_dim=head_dim).to(device)
    return _NOPE[key]


def current() -> Call:
    call = CALL.get()
    return call if call is not None else Call(create_pattern("causal"))


def own_mask(mask_function, local_size: int | None) -> Pattern:
    """The model's own mask predicate as a lexkit pattern: ``causal``, ``window:W`` (0 <= m - n < W)
    or ``chunk:W`` (n <= m in the same chunk of W), W the ``local_size`` transformers passes beside a
    sliding or chunked mask; checked on probe rows. Anything else is a ValueError."""
    from transformers.masking_utils import causal_mask_function

    if mask_function is None or mask_function is causal_mask_function:
        return create_pattern("causal")
    w = int(local_size) if local_size is not None else 4
    candidates = ([Window(W=w), Chunk(W=w)] if local_size is not None else []) + [create_pattern("causal")]
    q = torch.tensor([0, w - 1, w, w + 1, 2 * w + 1])[:, None]
    k = torch.arange(2 * w + 2)[None, :]
    theirs = torch.as_tensor(mask_function(0, 0, q, k)).expand(q.shape[0], k.shape[1])
    for pattern in candidates:
        if torch.equal(theirs, pattern.visible(q, k)):
            return pattern
    raise ValueError("this model's own attention mask is neither causal, a causal sliding window nor causal "
                     "chunks; lexkit cannot combine it with its patterns")


def mask(batch_size, q_length=None, kv_length=None, q_offset=0, kv_offset=0, mask_function=None,
         attention_mask=None, local_size=None, config=None, dtype=torch.float32, device="cpu",
         cache_position=None, **kwargs):
    """The mask interface function (see the module docstring): the layer type's own mask as a
    Pattern for interface model types, the call's pattern as a dense additive mask otherwise."""
    if q_length is None:  # transformers 4.x passes the query positions instead (written from its source)
        q_length, q_offset, device = cache_position.shape[0], int(cache_position[0]), cache_position.device
    if q_length != kv_length or q_offset or kv_offset:
        raise ValueError("lexkit attention runs whole sequences without a KV cache (pass use_cache=False)")
    if attention_mask is not None and not bool(attention_mask.all()):
        raise ValueError("lexkit attention takes no padding mask: evaluate unpadded windows")
    call = current()
    call.seen.add("mask")
    own = own_mask(mask_function, local_size)
    mtype = MODEL_TYPES.get(getattr(config, "model_type", None))
    if mtype is None or mtype.interface:
        return own
    idx = torch.arange(q_length, device=device)
    visible = call.layer_pattern(0, own).visible(idx[:, None], idx[None, :])  # [n, n]
    additive = torch.zeros(visible.shape, dtype=dtype, device=device).masked_fill(~visible, float("-inf"))
    return additive[None, None].expand(batch_size, 1, q_length, kv_length)


def attention(module, query: Tensor, key: Tensor, value: Tensor, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The attention interface function: lexkit's kernels on the model's q, k, v (see the module
    docstring). query [b, Hq, n, d], key/value [b, Hkv, n, d] -> (output [b, n, Hq, d], None)."""
    if not isinstance(attention_mask, Pattern):
        raise ValueError("lexkit attention takes its pattern from lexkit.model.hf (HFModel.forward), not "
                         "attention_mask")
    if dropout:
        raise ValueError("lexkit attention is for evaluation: put the model in eval mode (dropout > 0)")
    b, heads, n, d = query.shape
    if key.shape[-2] != n:
        raise ValueError("lexkit attention runs whole sequences without a KV cache (pass use_cache=False)")
    layer = getattr(module, "layer_idx", 0) or 0
    call = current()
    call.seen.add("attention")
    sink, softcap = _extras(module, layer, attention_mask, kwargs)
    if call.own is not None and call.own[layer] != attention_mask:
        raise ValueError(f"layer {layer}: transformers masks it as {attention_mask.spec}, but lexkit read "
                         f"{call.own[layer].spec} from the config (was the config changed after loading?)")
    call.layers[layer] = (attention_mask.spec, softcap, sink is not None)
    if call.probe:
        call.queries[layer] = query[0, :, 0].detach().clone()  # [heads, d]
    if key.shape[1] != heads:  # GQA: each key/value head serves heads / Hkv query heads
        key = key.repeat_interleave(heads // key.shape[1], dim=1)
        value = value.repeat_interleave(heads // value.shape[1], dim=1)
    if scaling is not None:  # lexkit's kernels divide by sqrt(d); the model's factor may differ
        query = query * (scaling * math.sqrt(d))
    attend = call.attention(heads, d, n, call.layer_pattern(layer, attention_mask), query.device, sink, softcap)
    out = attend(query, key, value, layer)  # [b, h, n, d]
    return out.transpose(1, 2).contiguous(), None


def _extras(module, layer: int, own: Pattern, kwargs: dict) -> tuple[Tensor | None, float | None]:
    """(sink logits [heads] or None, soft cap or None) from what the model passed to attention;
    a ``sliding_window`` that disagrees with the layer's mask, or any argument lexkit does not
    know, is a ValueError naming it."""
    window = kwargs.pop("sliding_window", None)
    if window is not None and own != Window(W=int(window)):
        raise ValueError(f"layer {layer}: its module says sliding_window={window} but its mask is {own.spec}")
    softcap = kwargs.pop("softcap", None)
    sink = kwargs.pop("s_aux", None)
    unknown = sorted(k for k, v in kwargs.items() if k not in HARMLESS and v is not None and v is not False)
    if unknown:
        raise ValueError(f"{type(module).__name__} passes {', '.join(unknown)} to its attention function; lexkit "
                         "does not know what that changes, so it refuses to run rather than drop it")
    return sink, None if softcap is None else float(softcap)


def register() -> None:
    """Register :func:`attention` and :func:`mask` under the name ``lexkit`` (idempotent)."""
    tf = require()
    tf.AttentionInterface.register(ATTN, attention)
    tf.AttentionMaskInterface.register(ATTN, mask)
