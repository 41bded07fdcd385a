"""A pre-LN GPT decoder over bytes (nanoGPT-sized), parameterised by a position scheme per layer.

Vocabulary: the 256 byte values plus BOS (id 256), which starts every document. Every layer has a
scheme, a pattern it trains under and its modifiers (a temperature, a learned sink logit, token
shift, ...: its :class:`lexkit.layouts.Layer` in the config's :class:`~lexkit.layouts.LayerStack`,
built once); without a ``layout`` every layer has the model's one scheme under causal attention (one
scheme module shared by every layer: KERPLE and T5 share their parameters across layers, as their
reference code does). ``forward(tokens, pattern=..., offset=...)`` runs
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
from collections import OrderedDict

import torch
from torch import Tensor, nn

from .. import layouts, positions
from ..attention import Attention, KVCache, Pattern, layer_patterns
from ..attention import modifiers as mods
from ..attention.cache import LayerRule, kernel_refusal, refusal_of
from ..attention.kernels import ScoreHook
from ..core import checks, registry
from ..core.options import setting
from ..positions import randomized

VOCAB = 257
BOS = 256
INIT_STD = 0.02  # every linear and embedding weight starts N(0, INIT_STD^2) (GPT-2)
#: layer stacks by what builds them (stacks are immutable): a run that loads parses its layout once,
#: however many configs of it are made (validation, overrides, the model); keyed on the registries'
#: generation, so a replaced scheme, pattern or modifier class is never served stale
_STACKS: OrderedDict[tuple, layouts.LayerStack] = OrderedDict()
_STACKS_KEPT = 64


def check_token_shift(value) -> None:
    """ValueError unless ``value`` is a fraction of the channels in [0, 1) (the token shift's width)."""
    if not (isinstance(value, (int, float)) and 0.0 <= value < 1.0):
        raise ValueError(f"token_shift must be a fraction in [0, 1), got {value!r}")


@dataclasses.dataclass
class ModelConfig:
    """Everything that defines the network (the run's ``config.json`` keeps it verbatim)."""

    #: the position scheme of every layer (of the layers a ``layout`` names none for); ``lexkit train --scheme``
    scheme: str = setting("rope", flag=False)
    n_layers: int = setting(4, "layers", flag="--layers", maximum=1 << 16)
    d_model: int = setting(128, "model width d_model", flag="--dim", maximum=1 << 16)
    n_heads: int = setting(4, "attention heads", flag="--heads", maximum=1 << 16)
    dropout: float = setting(0.0, flag=False)
    train_len: int = setting(128, "training length in bytes", maximum=checks.MAX_TRAIN_LEN)
    max_len: int | None = setting(None, type=int, flag=False)  # table size of `learned` (default: train_len)
    vocab_size: int = setting(VOCAB, flag=False)
    #: log-n scaling on every layer, λ_m = max(1, ln(m+1)/ln train_len) (modifiers/temperature.py)
    logn: bool = setting(False, "log-n attention scaling, q_m <- max(1, ln(m+1)/ln train_len) q_m, recorded with the "
                         "run: it changes nothing in training (the scale is 1 at every position up to the training "
                         "length, so the weights are the same) and applies when the run is evaluated longer "
                         "(default: off; under --init: the parent's)")
    #: a scheme, pattern and modifiers per layer (lexkit.layouts), as typed; None: every layer
    #: ``scheme`` under causal attention (log-n on every layer with ``logn``)
    layout: str | None = setting(None, "a scheme, pattern and temperature per layer: a named design (hwfa, hwfa2, "
                                 "rnope-swa, irope, gemma, gpt-oss; see `lexkit layouts`) or written out, e.g. "
                                 "\"rope@window:16 ; none@causal+logn\"; (...)xN repeats, (...)^N loops with the same "
                                 "weights (docs/layouts.md)", type=str)
    #: the fraction of each position's features replaced by the previous position's at the input of
    #: every attention and feed-forward block (x-transformers' ``shift_tokens``; 0.5 is its 1)
    token_shift: float = setting(0.0, "shift this fraction of each position's features from the position before, at "
                                 "the input of every attention and feed-forward block (x-transformers' "
                                 "shift_tokens=1 is 0.5; default 0)", metavar="FRACTION")
    #: L_max: train at sorted random positions below it (positions/randomized.py)
    random_positions: int | None = setting(None, "train at a sorted random subset of the positions 0..L_MAX-1 (Ruoss "
                                           "et al. 2023; L_MAX at least --train-len), evaluate at 0..n-1; recorded "
                                           "with the run (default: off)", type=int, metavar="L_MAX",
                                           maximum=checks.MAX_EVAL_LENGTH)
    #: the output head its own matrix; False (a config without the key): tied to the embedding, as
    #: GPT-2 (one tensor, saved once as ``embed.weight``)
    untied_head: bool = setting(False, "give the output head a matrix of its own instead of the embedding's "
                                "(default: tied, as GPT-2); recorded with the run")
    #: False: every block is attention only, no feed-forward part (Sanford, Hsu and Telgarsky 2024's
    #: MLP-free transformers, arXiv 2402.09268 Section 5; a config without the key has one)
    mlp: bool = setting(True, "--no-mlp: blocks of attention only, no feed-forward part (Sanford et al. 2024's "
                        "MLP-free transformers; default: with); recorded with the run")

    def __post_init__(self) -> None:
        for key in ("n_layers", "d_model", "n_heads", "train_len"):
            checks.number(key, getattr(self, key))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        for key in ("untied_head", "mlp"):
            if not isinstance(getattr(self, key), bool):
                raise ValueError(f"{key} must be true or false, got {getattr(self, key)!r}")
        check_token_shift(self.token_shift)
        self.scheme = positions.canonical(self.scheme)
        checks.number("random_positions", self.random_positions, maximum=checks.MAX_EVAL_LENGTH)  # what eval reaches
        randomized.check(self.random_positions, self.train_len)
        if self.random_positions is not None and self.logn:
            raise ValueError("random_positions and logn: log-n scales positions past the training length, which "
                             "randomized training reaches; give one of them")
        if self.layout is not None and self.logn:
            raise ValueError("--logn applies to every layer; with --layout put +logn on the layers that take it "
                             "(e.g. none@causal+logn)")
        key = (registry.generation(), self.scheme, self.layout, self.n_layers, self.d_model, self.n_heads,
               self.train_len, self.position_len, self.logn, self.token_shift, self.random_positions)
        if key not in _STACKS:
            _STACKS[key] = self._build_stack()  # parsed and checked once, naming the layer at fault
            while len(_STACKS) > _STACKS_KEPT:
                _STACKS.popitem(last=False)
        self._stack = _STACKS[key]
        if not self.mlp:
            for i, layer in enumerate(self._stack.layers):
                for modifier in layer.modifiers:
                    if getattr(modifier, "values", {}).get("at") == "ff":
                        raise ValueError(f"layer {i}'s +{modifier.name}:at=ff acts on the feed-forward block, which "
                                         "mlp=false (--no-mlp) removes; give at=attn or at=qkv, or keep the MLP")

    def matches(self, recorded: str) -> bool:
        """Whether the layers a run recorded (config.json's ``resolved``) are what this config builds
        today, compared as resolved stacks, not as text (a recording from before token shift was a
        layer's modifier is read with this config's ``token_shift``)."""
        if recorded == self.resolved():
            return True
        try:
            stack = layouts.parse(recorded, n_layers=self.n_layers, train_len=self.train_len, scheme=self.scheme,
                                 max_len=self.position_len)
        except ValueError:
            return False
        if self.token_shift and not stack.shifts_tokens:
            stack = stack.with_modifier(mods.Shift(F=float(self.token_shift)))
        return stack.resolved() == self.resolved()

    def _build_stack(self) -> layouts.LayerStack:
        if self.layout is None:
            stack = layouts.uniform(self.scheme, self.n_layers, train_len=self.train_len, max_len=self.position_len,
                                   logn=self.logn)
        else:
            stack = layouts.parse(self.layout, n_layers=self.n_layers, train_len=self.train_len, scheme=self.scheme,
                                 max_len=self.position_len)
        if self.token_shift:
            if stack.shifts_tokens:
                raise ValueError("--token-shift applies to every layer and the layout shifts some itself (+shift); "
                                 "give one of them")
            mods.check_width(self.token_shift, self.d_model, "--token-shift")
            stack = stack.with_modifier(mods.Shift(F=float(self.token_shift)))
        stack.check(mods.Shape(self.d_model, self.n_heads, self.train_len))
        if self.layout is not None:
            self._check_schemes(stack)
        if self.random_positions is not None:
            for i, layer in enumerate(stack):
                grows = next((m for m in layer.modifiers if m.global_only), None)
                if grows is not None:
                    raise ValueError(f"random_positions and layer {i}'s {grows.spec}: it grows with the position past "
                                     "the training length, which randomized training reaches; give one of them")
        return stack

    def _check_schemes(self, stack: layouts.LayerStack) -> None:
        """Every scheme of a layout built once at this shape (on the meta device, the random state
        untouched), so a value a scheme refuses names its layer, here, not when the model is built."""
        seen: set[str] = set()
        for i, layer in enumerate(stack):
            if layer.scheme in seen:
                continue
            seen.add(layer.scheme)
            try:
                with torch.random.fork_rng(devices=[]), torch.device("meta"):
                    positions.create(layer.scheme, n_heads=self.n_heads, head_dim=self.head_dim,
                                     max_len=self.position_len)
            except ValueError as exc:
                where = f"layout {self.layout!r}" if stack.uniform else f"layout layer {i} ({layer.spec})"
                raise layouts.LayoutError(f"{where}: {exc}") from None

    @property
    def stack(self) -> layouts.LayerStack:
        """What every layer is (:class:`lexkit.layouts.LayerStack`): the layout's layers, or the
        uniform model, with ``token_shift`` on every layer; built once, when the config is made."""
        return self._stack

    def resolved(self) -> str:
        """Every layer with every parameter written out (:meth:`lexkit.layouts.LayerStack.resolved`):
        what a run records as ``resolved`` in config.json and the study keys its cache on."""
        return self._stack.resolved()

    def identity(self) -> dict:
        """What identifies this network for a cache: every field, the layout as its stack writes it
        (:meth:`lexkit.layouts.LayerStack.canonical`: ``hwfa`` and the layers it names, or modifiers in
        another order, are one network), and every parameter of every layer (:meth:`resolved`), so a
        change of a registered default is a different network."""
        fields = dataclasses.asdict(self)
        if self.layout is not None:
            fields["layout"] = self._stack.canonical()
        return {**fields, "resolved": self.resolved()}

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


class Block(nn.Module):
    """One pre-LN layer (nanoGPT's), with the modifiers of its :class:`~lexkit.layouts.Layer` at their
    places (:mod:`lexkit.attention.modifiers`): ``inputs`` on the normalized input of the attention and
    the feed-forward block, ``qkv`` on the projections, ``scores`` inside the kernels (through
    :meth:`scoring`), ``attention`` around and inside them (an attention variant: what the kernel
    holds, its weights, what becomes of its output), ``output`` on the attention output. A
    modifier's learned state is registered under its ``slot`` (``blocks.i.sink``,
    ``blocks.i.temperature.s``); ``index`` is the layer's place in the model (0-based), which a
    modifier's state may depend on (differential attention's λ_init)."""

    def __init__(self, cfg: ModelConfig, layer: layouts.Layer, index: int = 0) -> None:
        super().__init__()
        self.cfg, self.layer = cfg, layer
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        # the feed-forward part, absent in an attention-only model (cfg.mlp False: no ln2, no weights)
        self.ln2 = nn.LayerNorm(cfg.d_model) if cfg.mlp else None
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=False),
            nn.GELU(),
            nn.Linear(4 * cfg.d_model, cfg.d_model, bias=False),
        ) if cfg.mlp else None
        self.drop = nn.Dropout(cfg.dropout)
        shape = mods.Shape(cfg.d_model, cfg.n_heads, cfg.train_len, layer=index)
        for modifier in layer.modifiers:
            state = modifier.state(shape)
            if state is not None:
                setattr(self, modifier.slot, state)

    def state(self, modifier: mods.Modifier):
        """A modifier's learned state on this layer (None: it has none)."""
        return getattr(self, modifier.slot) if modifier.slot is not None else None

    def scoring(self) -> mods.Scoring:
        """What this layer's score modifiers hand the kernels."""
        return mods.Scoring(self.layer.modifiers, self.state)

    def _inputs(self, h: Tensor, part: str, carry: dict | None) -> Tensor:
        for modifier in self.layer.at("inputs"):
            h = modifier.inputs(h, self.state(modifier), part, carry)
        return h

    def forward(self, x: Tensor, attend: Attention, layer: int, cache: KVCache | None = None) -> Tensor:
        b, n, d = x.shape
        h = self.cfg.n_heads
        carry = None if cache is None else cache.carried[layer]
        a = self._inputs(self.ln1(x), "attn", carry)
        # [3, b, h, n, hd]; unbind, not indexing: its backward stacks the three gradients instead of
        # zero-filling a [3, b, h, n, hd] buffer per part
        q, k, v = self.qkv(a).view(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4).unbind(0)
        for modifier in self.layer.at("qkv"):
            q, k, v = modifier.qkv(q, k, v, self.state(modifier), carry, x=a, pos=attend.q_pos)
        variants = self.layer.at("attention")
        for modifier in variants:
            q, k, v = modifier.prepare(q, k, v, self.state(modifier))
        y = attend(q, k, v, layer, x=a)  # [b, h, n, value dim]
        for modifier in reversed(variants):
            y = modifier.finish(y, a, self.state(modifier))  # [b, h, n, hd]
        for modifier in self.layer.at("output"):
            y = modifier.output(y, a, self.state(modifier))
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, n, d)))
        if self.mlp is None:
            return x
        return x + self.drop(self.mlp(self._inputs(self.ln2(x), "ff", carry)))


class GPT(nn.Module):
    """Decoder-only byte LM. ``forward(tokens [b, n]) -> logits [b, n, vocab]``.

    Its layers follow ``cfg.stack`` (:mod:`lexkit.layouts`). Scheme modules: layers with the same
    scheme spec share one module (KERPLE and T5 share their parameters across layers, as their
    reference code does), unless the scheme class sets ``per_layer`` (one module per layer). A
    model with one scheme module keeps it as ``scheme`` (today's state-dict keys); several are kept
    in ``schemes``, in order of first use, and ``scheme`` is None. ``layer_schemes[i]`` is layer
    i's module either way. The output head is the embedding (tied, as GPT-2) unless
    ``cfg.untied_head`` gives it a matrix of its own (state-dict key ``head.weight``)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.stack = cfg.stack  # [n_layers] layouts.Layer, built once with the config
        self.layers = self.stack.layers
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layer_schemes = self._schemes()
        distinct = list({id(m): m for m in self.layer_schemes}.values())
        if len(distinct) == 1:
            self.scheme = distinct[0]
        else:
            self.schemes = nn.ModuleList(distinct)
            self.scheme = None
        self.drop = nn.Dropout(cfg.dropout)
        # one block per layer that runs its own weights; a pass of a loop (...)^N runs its first pass's
        own = [i for i, source in enumerate(self.stack.weights) if source == i]
        self.blocks = nn.ModuleList(Block(cfg, self.layers[i], i) for i in own)
        index = {layer: k for k, layer in enumerate(own)}
        self.block_of = [index[source] for source in self.stack.weights]  # [n_layers]: layer -> its block
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if not cfg.untied_head:
            self.head.weight = self.embed.weight  # tied, as GPT-2
        self.apply(self._init)
        for block in self.blocks:  # GPT-2: residual projections scaled by 1/sqrt(2L)
            nn.init.normal_(block.proj.weight, std=INIT_STD / math.sqrt(2 * cfg.n_layers))
            if block.mlp is not None:
                nn.init.normal_(block.mlp[2].weight, std=INIT_STD / math.sqrt(2 * cfg.n_layers))
        self.selector_names = self.stack.selector_names  # what selectors call each layer: (local,) or (global,)

    def _schemes(self) -> list[positions.Scheme]:
        """Layer i's scheme module for every i: one module per distinct spec, or one per layer for a
        scheme class that sets ``per_layer``."""
        cfg, shared, out = self.cfg, {}, []
        for i, layer in enumerate(self.layers):
            if self.stack.weights[i] != i:  # a pass of a loop: its first pass's module (a learned bias is a weight)
                out.append(out[self.stack.weights[i]])
                continue
            per_layer = getattr(layer.scheme_class, "per_layer", False)
            if per_layer or layer.scheme not in shared:
                module = positions.create(layer.scheme, n_heads=cfg.n_heads, head_dim=cfg.head_dim,
                                          max_len=cfg.position_len)
                if not per_layer:
                    shared[layer.scheme] = module
            out.append(module if per_layer else shared[layer.scheme])
        return out

    @property
    def layer_blocks(self) -> list[Block]:
        """The block each layer runs, in depth order [n_layers] (``blocks`` holds each block once: a
        loop's passes run the same block)."""
        return [self.blocks[k] for k in self.block_of]

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=INIT_STD)

    def token_tables(self) -> list[nn.Parameter]:
        """The matrices with one row per token [vocab, d]: the embedding, and the output head when
        it is untied (tied, the head is the embedding: one tensor)."""
        return [self.embed.weight] if self.head.weight is self.embed.weight else [self.embed.weight, self.head.weight]

    @property
    def uniform(self) -> bool:
        """Every layer the same (today's model: one scheme, causal, one temperature)."""
        return self.stack.uniform

    def pattern(self, spec: str | Pattern = "causal") -> Pattern:
        """An evaluation pattern resolved against this model: W defaults to the training length; on
        a layered model, per layer inside each layer's own (:meth:`lexkit.layouts.LayerStack.resolve`,
        once per spec)."""
        return self.stack.resolve(spec)

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
        """One Attention per layer; layers with the same scheme module, pattern and scoring (their
        score modifiers' specs and learned state) share one (its dense mask and bias table are
        built once per forward)."""
        built: dict[tuple, Attention] = {}
        out = []
        training = torch.is_grad_enabled() and self.training
        for scheme, pattern, block in zip(self.layer_schemes, patterns, self.layer_blocks):
            scoring = block.scoring()
            key = (id(scheme), pattern.spec, scoring.key)
            if key not in built:
                built[key] = Attention(scheme, pattern, pos, kernel=kernel, hook=hook, training=training,
                                       extent=len(pos) if extent is None else extent, scoring=scoring)
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
        else:  # the cache was built for its pattern (KVCache refused what it cannot run): no re-check
            if pat != cache.pattern or offset or hook is not None or kernel_refusal(kernel):
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
        for layer, block in enumerate(self.layer_blocks):
            x = block(x, attends[layer], layer, cache)
        return self.head(self.ln_f(x))  # [b, n, vocab]

    unit = "bytes"  # what a length counts (a tokenizer model: tokens)

    def cache_rules(self, pattern: str | Pattern = "causal") -> list[LayerRule]:
        """What each layer's attention is under ``pattern``, for a KV cache (:mod:`lexkit.attention.cache`:
        :func:`~lexkit.attention.cache.refusal_of` asks whether the model can stream from these)."""
        patterns = layer_patterns(self.pattern(pattern), self.cfg.n_layers)
        return [LayerRule(scheme, p, block.scoring(), block.layer.modifiers)
                for scheme, p, block in zip(self.layer_schemes, patterns, self.layer_blocks)]

    def cache_refusal(self, pattern: str | Pattern = "causal", kernel: str = "auto") -> str | None:
        """Why this model cannot run ``pattern`` on ``kernel`` through a KV cache exactly, or None
        (:func:`lexkit.attention.cache.refusal_of`, the one answer)."""
        return refusal_of(self, pattern, kernel)

    def new_cache(self, pattern: str | Pattern = "causal", offset: int = 0) -> KVCache:
        """An empty per-layer KV cache for one sequence starting at position ``offset``, each layer
        trimmed to what its pattern can reach (inference only)."""
        return KVCache(self.cache_rules(pattern), offset=offset, pattern=self.pattern(pattern))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
