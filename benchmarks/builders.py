"""The models the benchmarks build, one builder per library: lexkit's :class:`~lexkit.model.gpt.GPT` at a
preset (:func:`lexkit_model`) and x-transformers' ``TransformerWrapper`` built to the same network
(:func:`xt_model`), so that every benchmark compares the same two things."""

from __future__ import annotations

import torch

from lexkit.model.gpt import GPT, VOCAB, ModelConfig
from lexkit.training.settings import TrainConfig, configs


def lexkit_model(preset: str, scheme: str = "rope", *, seed: int | None = 0, device: torch.device | str | None = None,
                 **settings) -> tuple[GPT, TrainConfig]:
    """lexkit's model at ``preset`` with ``settings`` (:func:`lexkit.training.settings.configs` keywords: a
    layout, a batch, a token shift ...), untrained, its weights drawn after ``torch.manual_seed(seed)``
    (None: from the generator as it stands), on ``device``; and the training config it trains with."""
    model_cfg, train_cfg = configs(preset, scheme, **settings)
    if seed is not None:
        torch.manual_seed(seed)
    model = GPT(model_cfg)
    return (model if device is None else model.to(device)), train_cfg


#: x-transformers' flag for each scheme it has; ``rotary_emb_dim`` is added for a rotary one when the
#: rotation covers the whole head (lexkit's)
XT_POSITION = {"alibi": dict(alibi_pos_bias=True), "rope": dict(rotary_pos_emb=True), "xpos": dict(rotary_xpos=True)}
XT_SCHEMES = tuple(XT_POSITION)


def xt_model(cfg: ModelConfig, scheme: str | None = None, *, matched: bool = True, full_rotary: bool = True,
             flash: bool = False, max_attend_past: int | None = None, shift_tokens: int | None = None):
    """x-transformers at ``cfg``'s width, depth, heads and training length with ``scheme``'s position flag
    (default: ``cfg.scheme``). ``matched`` (the default) makes it lexkit's network: heads of
    ``cfg.head_dim``, a bias-free feed-forward, the embedding tied, no absolute position table (alibi
    would otherwise add one) and, with ``full_rotary``, rotary over the whole head (x-transformers'
    default: half of it); ``matched=False`` is its README configuration at the same width, depth and
    heads (a bigger network). ``flash``: ``attn_flash=True`` (SDPA); ``max_attend_past``: its local
    mask (distance <= that); ``shift_tokens``: its token shift."""
    from x_transformers import Decoder, TransformerWrapper

    scheme = scheme or cfg.scheme
    layer_args = dict(dim=cfg.d_model, depth=cfg.n_layers, heads=cfg.n_heads, **XT_POSITION[scheme])
    if matched:
        layer_args.update(attn_dim_head=cfg.head_dim, ff_no_bias=True)
        if full_rotary and scheme in ("rope", "xpos"):
            layer_args["rotary_emb_dim"] = cfg.head_dim
    if flash:
        layer_args["attn_flash"] = True
    if max_attend_past is not None:
        layer_args["attn_max_attend_past"] = max_attend_past
    if shift_tokens is not None:
        layer_args["shift_tokens"] = shift_tokens
    wrapper_args = dict(use_abs_pos_emb=False, tie_embedding=True) if matched else {}
    return TransformerWrapper(num_tokens=VOCAB, max_seq_len=cfg.train_len, attn_layers=Decoder(**layer_args),
                              **wrapper_args)


def count_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
