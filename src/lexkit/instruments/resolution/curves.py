"""The analytic curves, before any training: a scheme's expected score s[n] at each distance n, no
model and no text (:func:`analytic_curve`), and a loaded model's own positions' (:func:`model_curve`).

s[n] is the score the scheme's own :meth:`~lexkit.positions.Scheme.scores` gives to q = k = the all-ones
vector of each head, for a query at N-1 and a key at N-1-n (absolute schemes: the mean of
p_m . p_(m-n) / sqrt(d_model) over queries m, from the scheme's ``embed`` table). Learnable schemes use
their initial values under ``seed``, or a trained scheme object's values. Under a pattern, a distance
no query sees is -inf (:func:`visible_counts`). ``docs/resolution.md`` has the closed forms per scheme
and why ``window:W`` and ``bca:W`` share the analytic R of causal at length W.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ... import positions
from ...attention import Pattern, layer_patterns
from ...attention import create as create_pattern
from ...attention.kernels import choose_kernel
from ...attention.modifiers import Scoring, logn_scale
from ...attention.patterns import Causal
from ...core import checks
from ...core.device import device_of
from ...positions import Scheme
from .accumulator import Accumulator

#: Query block of the analytic accumulation for absolute schemes (the empirical pass uses the
#: chunked kernel's own blocks).
BLOCK = 256


def make_scheme(
    spec: str | Scheme,
    *,
    heads: int = 16,
    head_dim: int = 64,
    seed: int = 0,
    max_len: int | None = None,
    train_len: int | None = None,
) -> Scheme:
    """A scheme from its spec, its learnable values drawn under ``seed`` (the global RNG is left
    as it was). A :class:`Scheme` object is returned as it is (its own heads and values).
    ``train_len`` fills the spec's training-length defaults (``learned``'s table, a scaled RoPE's
    ``original_len``, ReRoPE's ``w``); ``max_len``, if given, takes its place for them."""
    if isinstance(spec, Scheme):
        return spec
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        table = max_len if max_len is not None else train_len
        return positions.create(spec, n_heads=heads, head_dim=head_dim, max_len=table)


def pattern_of(pattern: str | Pattern | None, train_len: int | None = None) -> Pattern:
    """The pattern of a spec (None: causal; W defaulting to ``train_len``) or the pattern given."""
    return create_pattern("causal" if pattern is None else pattern, default_window=train_len)


def visible_counts(pattern: str | Pattern | None, length: int, *, block: int = 1024) -> Tensor:
    """int64 ``[length]``: how many (query, key) pairs at each distance the pattern makes visible
    in an input of ``length`` tokens. Blockwise over queries (keys bounded by ``pattern.reach``);
    causal has the closed form ``length - n``."""
    pattern = pattern_of(pattern)
    if type(pattern) is Causal:
        return length - torch.arange(length)
    counts = torch.zeros(length, dtype=torch.int64)
    for start in range(0, length, block):
        stop = min(start + block, length)
        q_idx = torch.arange(start, stop)
        k_idx = pattern.keys(start, stop)  # sinks, then keys within reach
        vis = pattern.visible(q_idx[:, None], k_idx[None, :])
        dist = (q_idx[:, None] - k_idx[None, :])[vis]
        counts += torch.bincount(dist, minlength=length)[:length]
    return counts


def analytic_curve(
    scheme: str | Scheme,
    length: int,
    pattern: str | Pattern | None = None,
    *,
    heads: int = 16,
    head_dim: int = 64,
    seed: int = 0,
    max_len: int | None = None,
    train_len: int | None = None,
    logn: bool = False,
    scoring: Scoring | None = None,
) -> Tensor:
    """The analytic s[n], float64 ``[heads, length]`` (-inf at distances the pattern never shows).

    ``scheme``: a spec (built with ``heads`` x ``head_dim`` and learnable values drawn under
    ``seed``; ``train_len`` fills its training-length defaults) or a scheme object (its own heads
    and values, e.g. a trained model's ``scheme``).
    ``pattern``: ``None``/``"causal"``, ``"window:W"``, ``"bca:W"``, ``"sinks:W,K=4"`` (W must be given).
    ``logn``: log-n scaling at training length ``train_len``: the query at N-1 scales its scores
    by λ = max(1, ln N / ln L) (absolute schemes: each query m by its λ_m). ``scoring``: a layer's
    score modifiers (:class:`~lexkit.attention.modifiers.Scoring`): their factor per query (a
    temperature), applied the same way (one of the two).

    Context extension: a scaled RoPE or ReRoPE enters through its own :meth:`Scheme.scores` (YaRN's
    attention factor included). Under ``sinks:...,pos=cache`` the curve is the query at N-1's view:
    its sink keys scored at their cache distance and placed at their text distance, distances it
    does not see -inf.
    """
    checks.number("length", int(length))
    check_logn(logn, train_len)
    length = int(length)
    scheme = make_scheme(scheme, heads=heads, head_dim=head_dim, seed=seed, max_len=max_len, train_len=train_len)
    pattern = pattern_of(pattern, train_len)
    scale = _query_scale(length, train_len if logn else None, scoring)  # [N] or [H, N], or None
    if scheme.family != "absolute":  # relative, or FIRE's bias of the query too: the query at N-1's view
        s, seen = _relative_scores(scheme, pattern, length)  # [H, N] by distance, [N]
        return (s if scale is None else s * scale[..., -1:]).masked_fill(~seen, -math.inf)
    return _absolute_curve(scheme, pattern, length, scale)


def _query_scale(length: int, logn: int | None, scoring: Scoring | None) -> Tensor | None:
    """The factor on each query's scores, float64 [N] or [H, N]: log-n at training length ``logn``, or
    ``scoring``'s (one of the two), or None."""
    if scoring and logn is not None:
        raise ValueError("give logn or a scoring, not both")
    if logn is not None:
        return logn_scale(torch.arange(length), logn).to(torch.float64)  # [N] λ_m
    with torch.no_grad():
        scale = None if scoring is None else scoring.query_scale(torch.arange(length))
    return None if scale is None else scale.to(torch.float64).cpu()  # [N] or [H, N]


def _absolute_curve(scheme: Scheme, pattern: Pattern, length: int, scale: Tensor | None) -> Tensor:
    """An absolute scheme's s[n]: q = k = p, one curve for all heads, the mean over the visible pairs
    at each distance, each query's scores times its ``scale`` [N]."""
    refuse_cache_positions(scheme, pattern, length)
    if scale is not None and scale.dim() == 2:
        raise ValueError(f"{scheme.spec}: the analytic curve of an absolute scheme is one curve for every head; a "
                         "per-head temperature has none")
    with torch.no_grad():
        table = scheme.embed(torch.arange(length, device=device_of(scheme)))
    if table is None:
        raise ValueError(f"{scheme.spec}: an absolute scheme without an embedding table")
    table = table.to(torch.float64).cpu()  # [N, d_model]
    acc = Accumulator(1, 1, length, pattern)
    for start in range(0, length, BLOCK):
        stop = min(start + BLOCK, length)
        k_idx = pattern.keys(start, stop)  # sinks, then keys within reach
        block = table[start:stop] @ table[k_idx].T / math.sqrt(table.shape[1])  # [n_q, n_k]
        if scale is not None:
            block = block * scale[start:stop, None]
        acc(0, torch.arange(start, stop), k_idx, block[None, None], None)
    return acc.curve()[0].expand(scheme.n_heads, length).clone()


def _relative_scores(scheme: Scheme, pattern: Pattern, length: int) -> tuple[Tensor, Tensor]:
    """(s [H, N] float64 by distance, seen [N] bool) of one query at N-1 against keys 0..N-1
    (score at distance n = scores[..., N-1-n]); under ``sinks:...,pos=cache`` its sink keys are
    scored at their cache slots and ``seen`` is that query's own view."""
    device = device_of(scheme)
    q = torch.ones(1, scheme.n_heads, 1, scheme.head_dim, dtype=torch.float64, device=device)
    k = torch.ones(1, scheme.n_heads, length, scheme.head_dim, dtype=torch.float64, device=device)
    q_pos = torch.tensor([length - 1], device=device)
    k_pos = torch.arange(length, device=device)
    with torch.no_grad():
        s = scheme.scores(q, k, q_pos, k_pos)[0, :, 0, :].to(torch.float64).cpu()  # [H, N] by key
        seen = visible_counts(pattern, length) > 0
        if pattern.cache_positions and pattern.sinks:  # StreamingLLM: sinks at their cache distance
            n_s = min(pattern.sinks, length)
            slot = pattern.sink_query_index(q_pos.cpu()).to(device)
            s[:, :n_s] = scheme.scores(q, k[..., :n_s, :], slot, k_pos[:n_s])[0, :, 0, :].to(torch.float64).cpu()
            seen = pattern.visible(torch.tensor(length - 1), torch.arange(length)).flip(-1)
    return s.flip(-1), seen


def check_logn(logn: bool, train_len: int | None) -> None:
    """Log-n scaling needs the training length it scales from."""
    if logn and train_len is None:
        raise ValueError("--logn needs --train-len L, the training length (log-n scales by ln(m+1)/ln L)")


def refuse_cache_positions(scheme: Scheme, pattern: Pattern, length: int) -> None:
    """Sinks at their cache slots need a relative scheme: the kernels' own rule and message."""
    if pattern.cache_positions and not scheme.relative:
        choose_kernel("chunked", scheme, pattern, length, torch.device("cpu"), False, False)


def model_curve(model: nn.Module, length: int, pattern: str | Pattern | None = None, layer: int = 0) -> Tensor:
    """The analytic s[n] of a loaded model's own positions, float64 [heads, length], -inf where
    the pattern never shows distance n; of ``layer`` on a model whose layers differ (its scheme,
    its pattern under ``pattern``, its temperature).

    * A lexkit model, or an hf: model whose positions lexkit has as a scheme (Bloom's ALiBi with
      its own slopes, GPT-2's learned table: ``position_scheme()``): :func:`analytic_curve` of it.
    * An hf: RoPE model: q = k = all ones through the layer's own rotary embedding at positions
      0..length-1 (its theta, rotary dims and scaling, dynamic at this length; YaRN's attention
      factor a): s[n] = (a^2 sum_i 2 cos(n f_i) + (h - r)) / sqrt(h), f_i its inverse
      frequencies, r the rotated dims of h (a layer without RoPE: r = 0, times the temperature the
      model gives the query at N-1, as for a lexkit layer)."""
    cfg = model.cfg
    pattern = model.pattern(pattern or "causal")
    if getattr(cfg, "layout", None) is not None and hasattr(model, "layer_schemes"):  # a lexkit layout: the layer's
        return analytic_curve(model.layer_schemes[layer], length, layer_patterns(pattern, cfg.n_layers)[layer],
                              scoring=model.layer_blocks[layer].scoring())
    pattern = layer_patterns(pattern, cfg.n_layers)[layer]
    own = getattr(model, "position_scheme", None)
    scheme = own() if own is not None else getattr(model, "scheme", None)
    if scheme is None and getattr(model, "layer_schemes", None):  # one module per layer (FIRE, CoPE, fox)
        scheme = model.layer_schemes[layer]
    if scheme is not None:
        logn = bool(getattr(cfg, "logn", False))
        return analytic_curve(scheme, length, pattern, train_len=cfg.train_len if logn else None, logn=logn)
    freqs, factor = model.rope_frequencies(length, layer)  # [r/2], a
    n = torch.arange(length, dtype=torch.float64)
    rotated = 2 * torch.cos(n[:, None] * freqs[None, :]).sum(-1)  # [N]
    s = (factor**2 * rotated + (cfg.head_dim - 2 * freqs.numel())) / math.sqrt(cfg.head_dim)
    scale = _query_scale(length, None, model.scoring(layer))  # the query temperature the model gives N-1
    if scale is not None:
        s = s * scale[..., -1]
    seen = visible_counts(pattern, length) > 0
    return s.masked_fill(~seen, -math.inf).expand(cfg.n_heads, length).clone()
