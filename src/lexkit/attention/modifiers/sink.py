"""A learned sink logit per head (GPT-OSS; OpenAI 2025, transformers' ``gpt_oss`` ``sinks``): a
virtual key with value 0 and logit s_h beside the visible keys, which takes probability mass so a
head can attend to nothing:

    p_mn = exp(e_mn) / (exp(s_h) + sum_j exp(e_mj)),    y_m = sum_n p_mn v_n

The temperature does not scale it. Its state is one parameter per head, ``blocks.i.sink``, zero at
initialization. The dense and chunked kernels and the KV cache run it; compiled FlexAttention cannot
(no virtual key in a block mask)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .base import Modifier, Shape


class Sink(Modifier):
    """A learned sink logit per head (GPT-OSS)."""

    name = "sink"
    place = "scores"
    summary = "a learned logit per head of a virtual key with value 0 (GPT-OSS)"
    source = "OpenAI 2025, gpt-oss model card (transformers' gpt_oss: sinks)"
    slot = "sink"
    flex_refusal = "kernel 'flex' cannot run a learned sink logit (a virtual key); use 'dense' or 'chunked'"

    def state(self, shape: Shape) -> nn.Parameter:
        return nn.Parameter(torch.zeros(shape.n_heads))

    def sink_logit(self, state: Tensor | None) -> Tensor | None:
        return state  # [heads]
