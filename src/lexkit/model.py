"""A pre-LN GPT decoder over bytes (nanoGPT-sized), parameterised by a position scheme per layer.

Vocabulary: the 256 byte values plus BOS (id 256), which starts every document. Every layer has a
scheme, a pattern it trains under, optionally a temperature and a learned sink logit (its
:class:`lexkit.layouts.Layer`); without a ``layout`` every layer has the model's one scheme under
causal attention (one scheme module shared by every layer: KERPLE and T5 share their parameters
across layers, as their reference code does). ``forward(tokens, pattern=..., offset=...)`` runs
any attention pattern at any length (on a layered model, inside each layer's own: see
:meth:`GPT.pattern`); ``offset`` is the position of the first token. ``forward(tokens, cache=...)``
feeds one piece of a longer sequence through a :class:`KVCache` (``new_cache``): streaming
evaluation and generation.
With ``random_positions=L_max`` a training forward puts its tokens at a sorted random subset of
[0, L_max) (Ruoss et al. 2023, :mod:`lexkit.positions.randomized`); evaluation at 0..n-1.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import Tensor, nn

from . import checks, layouts, positions
from .attention import Attention, KVCache, Layered, Pattern, layer_patterns
from .attention import create as create_pattern
from .attention import temperature as temperatures
from .attention.cache import LayerRule, refusal
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
    #: a scheme, pattern and temperature per layer (lexkit.layouts), as typed; None: every layer
    #: ``scheme`` under causal attention (log-n on every layer with ``logn``)
    layout: str | None = None
    #: the fraction of each position's features replaced by the previous position's at the input of
    #: every attention and feed-forward block (x-transformers' ``shift_tokens``; 0.5 is its 1)
    token_shift: float = 0.0
    random_positions: int | None = None  # L_max: train at sorted random positions below it (positions/randomized.py)

    def __post_init__(self) -> None:
        for key in ("n_layers", "d_model", "n_heads", "train_len"):
            checks.number(key, getattr(self, key))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if not (isinstance(self.token_shift, (int, float)) and 0.0 <= self.token_shift < 1.0):
            raise ValueError(f"token_shift must be a fraction in [0, 1), got {self.token_shift!r}")
        self.scheme = positions.canonical(self.scheme)
        checks.number("random_positions", self.random_positions, maximum=checks.MAX_EVAL_LENGTH)  # what eval reaches
        randomized.check(self.random_positions, self.train_len)
        if self.random_positions is not None and self.logn:
            raise ValueError("random_positions and logn: log-n scales positions past the training length, which "
                             "randomized training reaches; give one of them")
        if self.layout is not None:
            if self.logn:
                raise ValueError("--logn applies to every layer; with --layout put +logn on the layers that take it "
                                 "(e.g. none@causal+logn)")
            layers = self.layers()  # checked once, naming the layer at fault
            if self.token_shift and any(layer.shift for layer in layers):
                raise ValueError("--token-shift applies to every layer and the layout shifts some itself (+shift); "
                                 "give one of them")

    def layers(self) -> list[layouts.Layer]:
        """What every layer is (:mod:`lexkit.layouts`): the layout's layers, or the uniform model."""
        if self.layout is None:
            return layouts.uniform(self.scheme, self.n_layers, logn=self.logn)
        return layouts.parse(self.layout, n_layers=self.n_layers, train_len=self.train_len, scheme=self.scheme,
                             max_len=self.position_len)

    def resolved(self) -> str:
        """Every layer with every parameter written out (:func:`lexkit.layouts.resolved`): what a run
        records as ``resolved`` in config.json and the study keys its cache on."""
        return layouts.resolved(self.layers(), train_len=self.train_len, max_len=self.position_len)

    def identity(self) -> dict:
        """What identifies this network for a cache: every field, and every parameter of every layer
        (:meth:`resolved`), so a change of a registered default is a different network."""
        return {**dataclasses.asdict(self), "resolved": self.resolved()}

    @property
    def label(self) -> str:
        """How reports name the model: its layout (as typed) when it has one, else its scheme."""
        return self.layout.strip() if self.layout is not None else self.scheme

    @property
    def position_len(self) -> int:
        """How many positions training reaches: ``max_len`` when given, else ``random_positions``
        (randomized training), else ``train_len``. A learned table's size and the length every
        training-length default of a scheme takes (FIRE's L, ReRoPE's w, a scaling's original_len)."""
        return self.max_len or self.random_positions or self.train_len

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


def token_shift(h: Tensor, width: int, previous: Tensor | None = None) -> Tensor:
    """h [b, n, d] with its last ``width`` features at each position replaced by those of the
    position before: zeros before the first, or ``previous`` [b, 1, width] (the last position of
    the piece before, through a KV cache). x-transformers' ``ShiftTokens`` with shifts (0, 1)."""
    before = h.new_zeros(h.shape[0], 1, width) if previous is None else previous.to(h.dtype)
    shifted = torch.cat((before, h[:, :-1, -width:]), dim=1)  # [b, n, width]
    return torch.cat((h[..., :-width], shifted), dim=-1)


class Block(nn.Module):
    """One pre-LN layer. ``temperature`` (a learned one's parameters live here) and ``sink`` (a
    learned logit per head, GPT-OSS) come from the layer's entry in the layout."""

    def __init__(self, cfg: ModelConfig, layer: layouts.Layer | None = None) -> None:
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
        self.shift = int(cfg.d_model * (layer.shift if layer is not None and layer.shift else cfg.token_shift))
        temp = None if layer is None else layer.temperature
        self.temperature = None if temp is None else temperatures.create(temp, cfg.n_heads, cfg.train_len)
        self.sink = nn.Parameter(torch.zeros(cfg.n_heads)) if layer is not None and layer.sink else None

    def _shifted(self, h: Tensor, part: str, layer: int, cache: KVCache | None) -> Tensor:
        if not self.shift:
            return h
        carried = None if cache is None else cache.shifted[layer]
        out = token_shift(h, self.shift, None if carried is None else carried.get(part))
        if carried is not None:
            carried[part] = h[:, -1:, -self.shift:].detach()
        return out

    def forward(self, x: Tensor, attend: Attention, layer: int, cache: KVCache | None = None) -> Tensor:
        b, n, d = x.shape
        h = self.cfg.n_heads
        a = self._shifted(self.ln1(x), "attn", layer, cache)
        qkv = self.qkv(a).view(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4)  # [3, b, h, n, hd]
        y = attend(qkv[0], qkv[1], qkv[2], layer, sink=self.sink, x=a)  # [b, h, n, hd]
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, n, d)))
        return x + self.drop(self.mlp(self._shifted(self.ln2(x), "ff", layer, cache)))


class GPT(nn.Module):
    """Decoder-only byte LM. ``forward(tokens [b, n]) -> logits [b, n, vocab]``.

    Its layers follow ``cfg.layers()`` (:mod:`lexkit.layouts`). Scheme modules: layers with the same
    scheme spec share one module (KERPLE and T5 share their parameters across layers, as their
    reference code does), unless the scheme class sets ``per_layer`` (one module per layer). A
    model with one scheme module keeps it as ``scheme`` (today's state-dict keys); several are kept
    in ``schemes``, in order of first use, and ``scheme`` is None. ``layer_schemes[i]`` is layer
    i's module either way."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.layers = cfg.layers()  # [n_layers] layouts.Layer
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layer_schemes = self._schemes()
        distinct = list({id(m): m for m in self.layer_schemes}.values())
        if len(distinct) == 1:
            self.scheme = distinct[0]
        else:
            self.schemes = nn.ModuleList(distinct)
            self.scheme = None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg, layer) for layer in self.layers)
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.head.weight = self.embed.weight  # tied, as GPT-2
        self.apply(self._init)
        for block in self.blocks:  # GPT-2: residual projections scaled by 1/sqrt(2L)
            nn.init.normal_(block.proj.weight, std=0.02 / math.sqrt(2 * cfg.n_layers))
            nn.init.normal_(block.mlp[2].weight, std=0.02 / math.sqrt(2 * cfg.n_layers))
        self._own = [create_pattern(layer.pattern) for layer in self.layers]  # each layer's own pattern
        self.kinds = [layer.kind for layer in self.layers]  # local / global

    def _schemes(self) -> list[positions.Scheme]:
        """Layer i's scheme module for every i: one module per distinct spec, or one per layer for a
        scheme class that sets ``per_layer``."""
        cfg, shared, out = self.cfg, {}, []
        for layer in self.layers:
            per_layer = getattr(positions.get(layer.scheme.split(":")[0]), "per_layer", False)
            if per_layer or layer.scheme not in shared:
                module = positions.create(layer.scheme, n_heads=cfg.n_heads, head_dim=cfg.head_dim,
                                          max_len=cfg.position_len)
                if not per_layer:
                    shared[layer.scheme] = module
            out.append(module if per_layer else shared[layer.scheme])
        return out

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    @property
    def uniform(self) -> bool:
        """Every layer the same (today's model: one scheme, causal, one temperature)."""
        return layouts.is_uniform(self.layers)

    def pattern(self, spec: str | Pattern = "causal") -> Pattern:
        """An evaluation pattern resolved against this model: W defaults to the training length; on
        a layered model, per layer inside each layer's own (:func:`lexkit.layouts.resolve_pattern`)."""
        return layouts.resolve_pattern(self._own, self.kinds, spec, default_window=self.cfg.train_len)

    def constrain_(self) -> None:
        """Every scheme's learnable parameters clamped into range (after an optimizer step)."""
        for scheme in {id(m): m for m in self.layer_schemes}.values():
            scheme.constrain_()

    def embed_positions(self, pos: Tensor) -> Tensor | None:
        """The absolute scheme's table [n, d] for positions ``pos`` (None: no absolute scheme; a
        layout allows one only on every layer)."""
        return self.layer_schemes[0].embed(pos)

    def positions(self, n: int, offset: int, device: torch.device) -> tuple[Tensor, int]:
        """The positions [n] of a one-pass forward and their extent: offset .. offset + n - 1, or in a
        training forward with ``random_positions`` a sorted random subset of [0, L_max) (Ruoss et al.
        2023; drawn on the CPU, so the extent needs no device sync)."""
        if self.training and self.cfg.random_positions:
            pos = randomized.sample(n, self.cfg.random_positions) + offset
            return pos.to(device), int(pos[-1] - pos[0]) + 1
        return torch.arange(offset, offset + n, device=device), n

    def _attentions(self, patterns, pos: Tensor, kernel: str, hook: ScoreHook | None,
                    extent: int | None = None) -> list[Attention]:
        """One Attention per layer; layers with the same scheme module, pattern, temperature and
        sink kind share one (its dense mask and bias table are built once per forward)."""
        built: dict[tuple, Attention] = {}
        out = []
        training = torch.is_grad_enabled() and self.training
        for scheme, pattern, block in zip(self.layer_schemes, patterns, self.blocks):
            temp = block.temperature
            key = (id(scheme), pattern.spec, id(temp) if temp is not None and temp.learned else
                   (temp.spec if temp is not None else None), block.sink is not None)
            if key not in built:
                built[key] = Attention(scheme, pattern, pos, kernel=kernel, hook=hook, training=training,
                                       extent=len(pos) if extent is None else extent, temperature=temp,
                                       sink=block.sink is not None)
            out.append(built[key])
        return out

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
        pat = self.pattern(pattern)
        if cache is None:
            pos, extent = self.positions(n, offset, tokens.device)  # [n]: randomized in training
            attends = self._attentions(layer_patterns(pat, self.cfg.n_layers), pos, kernel, hook, extent)
        else:
            if pat != cache.pattern or offset or hook is not None or self.cache_refusal(pat, kernel):
                raise ValueError(
                    f"a cached forward runs the cache's pattern ({cache.pattern.spec}) from its own offset on the "
                    f"chunked block kernel, without a hook; got pattern {pat.spec}, offset {offset}, "
                    f"kernel {kernel!r}{', a hook' if hook is not None else ''}"
                )
            pos, attends = cache.extend(n, tokens.device)
        x = self.embed(tokens)  # [b, n, d]
        table = self.embed_positions(pos)
        if table is not None:
            x = x + table.to(x.dtype)
        x = self.drop(x)
        for layer, block in enumerate(self.blocks):
            x = block(x, attends[layer], layer, cache)
        return self.head(self.ln_f(x))  # [b, n, vocab]

    unit = "bytes"  # what a length counts (a tokenizer model: tokens)

    def cache_refusal(self, pattern: str | Pattern = "causal", kernel: str = "auto") -> str | None:
        """Why this model cannot run ``pattern`` on ``kernel`` through a KV cache exactly, or None
        when it can (:func:`lexkit.attention.cache.refusal`, asked of every layer): the question
        evaluation's streaming, generation, the cached forward and the cache itself all ask here."""
        patterns = layer_patterns(self.pattern(pattern), self.cfg.n_layers)
        for layer, (scheme, pat) in enumerate(zip(self.layer_schemes, patterns)):
            reason = refusal(scheme, pat, kernel)
            if reason is not None:
                return reason if self.uniform and not isinstance(pat, Layered) else f"layer {layer}: {reason}"
        return None

    def new_cache(self, pattern: str | Pattern = "causal", offset: int = 0) -> KVCache:
        """An empty per-layer KV cache for one sequence starting at position ``offset``, each layer
        trimmed to what its pattern can reach (inference only)."""
        pat = self.pattern(pattern)
        rules = [LayerRule(scheme, p, block.temperature, block.sink is not None)
                 for scheme, p, block in zip(self.layer_schemes, layer_patterns(pat, self.cfg.n_layers), self.blocks)]
        return KVCache(rules, offset=offset, pattern=pat)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
