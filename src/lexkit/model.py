"""A pre-LN GPT decoder over bytes (nanoGPT-sized), parameterised by a position scheme.

Vocabulary: the 256 byte values plus BOS (id 256), which starts every document. One scheme
module is shared by every layer (KERPLE and T5 share their parameters across layers, as their
reference code does). ``forward(tokens, pattern=..., offset=...)`` runs any attention pattern at
any length; ``offset`` is the position of the first token. ``forward(tokens, cache=...)`` feeds one
piece of a longer sequence through a :class:`KVCache` (``new_cache``): streaming evaluation and
generation. With ``random_positions=L_max`` a training forward puts its tokens at a sorted random
subset of [0, L_max) (Ruoss et al. 2023, :mod:`lexkit.positions.randomized`); evaluation at 0..n-1.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import Tensor, nn

from . import checks, positions
from .attention import Attention, KVCache, Pattern
from .attention import create as create_pattern
from .attention.cache import refusal
from .attention.kernels import ScoreHook
from .positions import randomized

VOCAB = 257
BOS = 256


@dataclasses.dataclass
class ModelConfig:
    """Everything that defines the network (the run's ``config.json`` keeps it verbatim)."""

    scheme: str = "rope"
    n_layers: int = 4
    d_model: int = 128
    n_heads: int = 4
    dropout: float = 0.0
    train_len: int = 128
    max_len: int | None = None  # table size of `learned` (default: train_len)
    vocab_size: int = VOCAB
    logn: bool = False  # log-n attention scaling, λ_m = max(1, ln(m+1)/ln train_len) (attention/logn.py)
    random_positions: int | None = None  # L_max: train at sorted random positions below it (positions/randomized.py)

    def __post_init__(self) -> None:
        for key in ("n_layers", "d_model", "n_heads", "train_len"):
            checks.number(key, getattr(self, key))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        self.scheme = positions.canonical(self.scheme)
        checks.number("random_positions", self.random_positions, maximum=checks.MAX_EVAL_LENGTH)  # what eval reaches
        randomized.check(self.random_positions, self.train_len)
        if self.random_positions is not None and self.logn:
            raise ValueError("random_positions and logn: log-n scales positions past the training length, which "
                             "randomized training reaches; give one of them")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=False),
            nn.GELU(),
            nn.Linear(4 * cfg.d_model, cfg.d_model, bias=False),
        )
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, attend: Attention, layer: int) -> Tensor:
        b, n, d = x.shape
        h = self.cfg.n_heads
        a = self.ln1(x)
        qkv = self.qkv(a).view(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4)  # [3, b, h, n, hd]
        y = attend(qkv[0], qkv[1], qkv[2], layer, x=a)  # [b, h, n, hd]; x: a data-dependent scheme's input
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, n, d)))
        return x + self.drop(self.mlp(self.ln2(x)))


class GPT(nn.Module):
    """Decoder-only byte LM. ``forward(tokens [b, n]) -> logits [b, n, vocab]``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.scheme = positions.create(
            cfg.scheme, n_heads=cfg.n_heads, head_dim=cfg.head_dim,
            max_len=cfg.max_len or cfg.random_positions or cfg.train_len,  # the positions training reaches
        )
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.head.weight = self.embed.weight  # tied, as GPT-2
        self.apply(self._init)
        for block in self.blocks:  # GPT-2: residual projections scaled by 1/sqrt(2L)
            nn.init.normal_(block.proj.weight, std=0.02 / math.sqrt(2 * cfg.n_layers))
            nn.init.normal_(block.mlp[2].weight, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def pattern(self, spec: str | Pattern = "causal") -> Pattern:
        """A pattern spec resolved against this model (W defaults to the training length)."""
        return create_pattern(spec, default_window=self.cfg.train_len)

    def forward(
        self,
        tokens: Tensor,
        pattern: str | Pattern = "causal",
        offset: int = 0,
        *,
        kernel: str = "auto",
        hook: ScoreHook | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """tokens: [b, n] int64 -> logits [b, n, vocab]. ``offset`` is the first token's position.
        ``hook`` observes every layer's scores and probabilities (the instruments' path).

        With ``cache`` (from :meth:`new_cache`), ``tokens`` continue the sequence the cache has
        seen: their positions follow on from it and they attend to its kept keys (the cache's
        own offset and pattern apply; ``pattern`` must resolve to the same one)."""
        n = tokens.shape[1]
        extent = n
        if cache is None and self.training and self.cfg.random_positions:
            pos = randomized.sample(n, self.cfg.random_positions) + offset  # [n] sorted, on the CPU
            extent = int(pos[-1] - pos[0]) + 1
            pos = pos.to(tokens.device)
        elif cache is None:
            pos = torch.arange(offset, offset + n, device=tokens.device)  # [n]
        else:
            pat = self.pattern(pattern)
            if pat != cache.pattern or offset or hook is not None or self.cache_refusal(pat, kernel):
                raise ValueError(
                    f"a cached forward runs the cache's pattern ({cache.pattern.spec}) from its own offset on the "
                    f"chunked block kernel, without a hook; got pattern {pat.spec}, offset {offset}, "
                    f"kernel {kernel!r}{', a hook' if hook is not None else ''}"
                )
            pos, attend = cache.extend(n, tokens.device)
        x = self.embed(tokens)  # [b, n, d]
        table = self.scheme.embed(pos)
        if table is not None:
            x = x + table.to(x.dtype)
        x = self.drop(x)
        if cache is None:
            attend = Attention(
                self.scheme,
                self.pattern(pattern),
                pos,
                kernel=kernel,
                hook=hook,
                training=torch.is_grad_enabled() and self.training,
                extent=extent,
                logn=self.cfg.train_len if self.cfg.logn else None,
            )
        for layer, block in enumerate(self.blocks):
            x = block(x, attend, layer)
        return self.head(self.ln_f(x))  # [b, n, vocab]

    unit = "bytes"  # what a length counts (a tokenizer model: tokens)

    def cache_refusal(self, pattern: str | Pattern = "causal", kernel: str = "auto") -> str | None:
        """Why this model cannot run ``pattern`` on ``kernel`` through a KV cache exactly, or None
        when it can (:func:`lexkit.attention.cache.refusal`): the question evaluation's
        streaming, generation, the cached forward and the cache itself all ask here."""
        return refusal(self.scheme, self.pattern(pattern), kernel)

    def new_cache(self, pattern: str | Pattern = "causal", offset: int = 0) -> KVCache:
        """An empty per-layer KV cache for one sequence starting at position ``offset``, trimmed to
        what ``pattern`` can reach (inference only)."""
        return KVCache(self.scheme, self.pattern(pattern), self.cfg.n_layers, offset=offset,
                       logn=self.cfg.train_len if self.cfg.logn else None)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
