"""Attention resolution (*A Length-Extrapolatable Transformer*, Sec. 2.2, Eq. 11): how well
attention tells near from far.

For a curve s over token distances 0 .. N-1 (the expected pre-softmax score at each distance)

    R(s) = sum_i e^{s[i]} (e^{s[i]} - e^{s[i+1]}) / (sum_i e^{s[i]})^2,

with e^{s[N]} = 0 past the end and e^{-inf} = 0 for a distance never visible; computed stably
(shifted by the max). 0 <= R <= 1 for every curve (proof in ``docs/resolution.md``).

* **analytic** (:func:`analytic_curve`, :func:`analytic`), before any training: s[n] is the score
  the scheme's own :meth:`~lexkit.positions.Scheme.scores` gives to q = k = the all-ones vector of
  each head, for a query at N-1 and a key at N-1-n (absolute schemes: the mean of
  p_m . p_(m-n) / sqrt(d_model) over queries m, from the scheme's ``embed`` table). Learnable
  schemes use their initial values under ``seed``, or a trained scheme object's values.
* **empirical** (:func:`empirical`, :func:`empirical_run`), from a model on real text: the
  paper's s_hat[n] = mean over texts and query positions i >= n of e(i, i - n), per layer and
  head, accumulated through the model's score hook one query block at a time (memory O(n *
  block), never O(n^2)); the same pass measures the attention entropy per layer and head.

R is computed per head; ``resolution`` is the mean over heads (empirically per layer, then the
mean over layers). Under a pattern, s_hat[n] averages over exactly the (text, query) pairs that
see distance n; a distance no pair sees counts as -inf. ``docs/resolution.md`` has the closed
forms per scheme and why ``window:W`` and ``bca:W`` share the analytic R of causal at length W.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ... import positions
from ...attention import Pattern, layer_patterns
from ...attention import create as create_pattern
from ...attention.kernels import choose_kernel
from ...attention.modifiers import Scoring, logn_scale
from ...attention.patterns import Causal
from ...core import checks
from ...core.device import device_of, eval_mode
from ...core.specs import parse_lengths
from ...core.version import header as report_header
from ...positions import Scheme
from .. import identity
from .rows import ResolutionRow

#: Version of the JSON document written by :func:`analytic`, :func:`empirical_run` and the CLI.
REPORT, REPORT_VERSION = "lexkit.resolution", 3  # the report's header (lexkit.core.version.header)
#: Query block of the analytic accumulation for absolute schemes (the empirical pass uses the
#: chunked kernel's own blocks).
BLOCK = 256


# -- the formula --------------------------------------------------------------------------------
def resolution(s: Tensor | Sequence[float]) -> Tensor:
    """R(s) over the last dimension: ``[..., N] -> [...]`` (float64).

    ``-inf`` entries (never-visible distances) contribute e^{-inf} = 0; e^{s[N]} = 0 past the end.
    A curve with no finite entry gives NaN.
    """
    s = torch.as_tensor(s).to(torch.float64)
    if s.ndim == 0 or s.shape[-1] == 0:
        raise ValueError("resolution needs a curve with at least one distance")
    top = s.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)  # [..., N], in [0, 1], -inf -> 0
    nxt = torch.cat((e[..., 1:], torch.zeros_like(e[..., :1])), dim=-1)  # e^{s[i+1]}, 0 past the end
    return (e * (e - nxt)).sum(-1) / e.sum(-1).square()


# -- inputs -------------------------------------------------------------------------------------
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


def _pattern(pattern: str | Pattern | None, train_len: int | None = None) -> Pattern:
    return create_pattern("causal" if pattern is None else pattern, default_window=train_len)


def visible_counts(pattern: str | Pattern | None, length: int, *, block: int = 1024) -> Tensor:
    """int64 ``[length]``: how many (query, key) pairs at each distance the pattern makes visible
    in an input of ``length`` tokens. Blockwise over queries (keys bounded by ``pattern.reach``);
    causal has the closed form ``length - n``."""
    pattern = _pattern(pattern)
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


# -- blockwise accumulation of s_hat and entropy ------------------------------------------------
def diagonal_sums(a: Tensor, dtype: torch.dtype = torch.float64) -> Tensor:
    """Sums along the diagonals of ``a`` ``[..., n_q, n_k]``: ``[..., n_q + n_k + 1]`` (in ``dtype``)
    whose column c holds the sum of a[i, j] over j - i = c - n_q (columns 0 and n_q + n_k are 0).

    The skew trick: ``a`` is copied into a zeroed ``[..., n_q, n_q + n_k + 1]`` buffer through a
    strided view that puts a[i, j] at column j - i + n_q, so each diagonal lands in one column and
    a sum over rows finishes it. O(n_q·n_k), no gather, no index tensors.
    """
    n_q, n_k = a.shape[-2:]
    lead = a.shape[:-2]
    row = n_q + n_k + 1
    buf = torch.empty(*lead, n_q, row, dtype=dtype, device=a.device)
    outer = buf.stride()[:-2]
    # flat, each [n_q, row] matrix is: n_q zeros, then n_q runs of (n_k values, n_q zeros)
    buf.as_strided((*lead, n_q), (*outer, 1), 0).zero_()
    buf.as_strided((*lead, n_q, n_q), (*outer, row - 1, 1), n_q + n_k).zero_()
    buf.as_strided((*lead, n_q, n_k), (*outer, row - 1, 1), n_q).copy_(a)  # [i, j] -> [i, j - i + n_q]
    return buf.sum(-2)


def entropy(probs: Tensor) -> Tensor:
    """The attention entropy of each query, in nats: -sum_k p_k ln p_k over the last dimension
    (keys), 0 ln 0 = 0: ``[..., n_k] -> [...]``. ln(n) for uniform attention over n keys."""
    return -torch.special.xlogy(probs, probs).sum(-1)


def _contiguous(idx: Tensor) -> bool:
    return idx.numel() > 0 and int(idx[-1]) - int(idx[0]) == idx.numel() - 1 and bool((idx.diff() == 1).all())


class Accumulator:
    """A score hook (``hook(layer, q_idx, k_idx, scores, probs)``) that accumulates, per layer
    and head, the sum of visible scores at each distance and their count, and the attention
    entropy of every query. Memory: ``[layers, heads, length]`` plus one block.

    ``curve()`` is s_hat ``[layers, heads, length]`` (float64, -inf where nothing was visible);
    ``entropy()`` the mean entropy per query ``[layers, heads]`` (nats).
    """

    def __init__(self, layers: int, heads: int, length: int, pattern: Pattern) -> None:
        self.patterns, self.length = layer_patterns(pattern, layers), length  # each layer's (a layered model's differ)
        self.sums = torch.zeros(layers, heads, length, dtype=torch.float64)
        self.counts = torch.zeros(layers, length, dtype=torch.float64)
        self.ent = torch.zeros(layers, heads, dtype=torch.float64)
        self.queries = torch.zeros(layers, dtype=torch.float64)
        self._blocks: dict[tuple[str, int, int, int, int], tuple[Tensor, Tensor, Tensor]] = {}

    def __call__(self, layer: int, q_idx: Tensor, k_idx: Tensor, scores: Tensor, probs: Tensor | None) -> None:
        q_idx, k_idx = q_idx.cpu(), k_idx.cpu()
        vis = self.patterns[layer].visible(q_idx[:, None], k_idx[None, :])  # [n_q, n_k]
        batch = scores.shape[0]
        values = torch.where(vis.to(scores.device), scores, 0.0)  # [b, heads, n_q, n_k]
        values = (values.sum(0) if batch > 1 else values[0]).cpu()
        if _contiguous(q_idx) and _contiguous(k_idx):
            # diagonals -> columns: no gather; d = q0 - k0 + n_q - column
            key = (self.patterns[layer].spec, int(q_idx[0]), q_idx.numel(), int(k_idx[0]), k_idx.numel())
            if key not in self._blocks:  # depends on the layer's pattern and the block: once per pair
                d = key[1] - key[3] + key[2] - torch.arange(key[2] + key[4] + 1)
                keep = (d >= 0) & (d < self.length)
                self._blocks[key] = (d[keep], keep, diagonal_sums(vis)[keep])
            d, keep, count = self._blocks[key]
            self.sums[layer].index_add_(1, d, diagonal_sums(values)[:, keep])
            self.counts[layer].index_add_(0, d, batch * count)
        else:
            dist = (q_idx[:, None] - k_idx[None, :])[vis]  # [n_vis]
            self.sums[layer].index_add_(1, dist, values[:, vis].to(torch.float64))
            self.counts[layer].index_add_(0, dist, torch.full(dist.shape, float(batch), dtype=torch.float64))
        if probs is not None:
            p = probs.float()  # float32 terms, float64 totals
            self.ent[layer] += entropy(p).to(torch.float64).sum((0, 2)).cpu()  # [heads]
            self.queries[layer] += batch * q_idx.numel()

    def curve(self) -> Tensor:
        counts = self.counts[:, None, :]
        return torch.where(counts > 0, self.sums / counts.clamp_min(1), torch.full_like(self.sums, -math.inf))

    def count(self) -> Tensor:
        """Visible (text, query) pairs per distance ``[length]`` of layer 0 (every layer's when the
        layers share a pattern; ``counts[layer]`` otherwise)."""
        return self.counts[0]

    def entropy(self) -> Tensor:
        return self.ent / self.queries[:, None].clamp_min(1)


# -- analytic -----------------------------------------------------------------------------------
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
    _logn_needs_train_len(logn, train_len)
    length = int(length)
    scheme = make_scheme(scheme, heads=heads, head_dim=head_dim, seed=seed, max_len=max_len, train_len=train_len)
    pattern = _pattern(pattern, train_len)
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
    _refuse_cache_positions(scheme, pattern, length)
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


def _logn_needs_train_len(logn: bool, train_len: int | None) -> None:
    if logn and train_len is None:
        raise ValueError("--logn needs --train-len L, the training length (log-n scales by ln(m+1)/ln L)")


def _refuse_cache_positions(scheme: Scheme, pattern: Pattern, length: int) -> None:
    """Sinks at their cache slots need a relative scheme: the kernels' own rule and message."""
    if pattern.cache_positions and not scheme.relative:
        choose_kernel("chunked", scheme, pattern, length, torch.device("cpu"), False, False)


def header(source: str, **named: Any) -> dict:
    """The first keys of every resolution document: the report's header, the ``source`` (analytic,
    empirical, model) and what it measured (``named``: a ``scheme`` spec, or a model's ``label`` and the
    rest of :func:`lexkit.instruments.identity`)."""
    return {**report_header(REPORT, REPORT_VERSION), "source": source, **named}


def _named(cfg) -> dict:
    """What a loaded model's analytic document measured: its ``label`` (its layout as typed, an hf: model's
    description) and, where one scheme runs on every layer of a lexkit model, its ``scheme``."""
    one = getattr(cfg, "layout", None) is None and isinstance(getattr(cfg, "scheme", None), str)
    return {"label": cfg.label, **({"scheme": cfg.scheme} if one else {})}


def analytic(
    spec: str | Scheme | nn.Module,
    lengths: Iterable[int] | str,
    pattern: str | Pattern | None = None,
    *,
    heads: int = 16,
    head_dim: int = 64,
    seed: int = 0,
    max_len: int | None = None,
    train_len: int | None = None,
    logn: bool = False,
) -> dict:
    """Analytic R of one scheme at several lengths, as a JSON-ready document::

        {"report": "lexkit.resolution", "report_version": 3, "lexkit_version": ..., "source": "analytic",
         "scheme": SPEC, "heads": H,
         "head_dim": D, "seed": S, "results": [{"scheme", "length", "pattern", "resolution",
         "per_head": [H values], "per_layer": null, "entropy": null}, ...]}

    An absolute scheme that is undefined at a length (``learned`` past its table) gets
    ``"resolution": null`` and a ``"note"`` with the reason instead of stopping the others.
    ``train_len`` (the training length the scheme assumes: a scaled RoPE's ``original_len``,
    ReRoPE's ``w``, a pattern's W, log-n's L) and ``logn`` are recorded when given.

    ``spec`` may also be a loaded model (a :class:`lexkit.GPT`, or an ``hf:`` model whose
    positions are its own: :func:`model_curve`); then the document names it (``run``, its
    ``heads``, ``head_dim``, ``train_len``) and every length it cannot run gets a ``note``.
    """
    lengths = parse_lengths(lengths)
    if isinstance(spec, nn.Module):
        return _analytic_model(spec, lengths, pattern)
    _logn_needs_train_len(logn, train_len)
    scheme = make_scheme(spec, heads=heads, head_dim=head_dim, seed=seed, max_len=max_len, train_len=train_len)
    pat = _pattern(pattern, train_len)
    _refuse_cache_positions(scheme, pat, lengths[-1])
    doc = header("analytic", scheme=scheme.spec)
    doc.update(heads=scheme.n_heads, head_dim=scheme.head_dim, seed=seed, pattern=pat.spec)
    if train_len is not None or logn:
        doc.update(train_len=train_len, logn=logn)
    curve = lambda n: analytic_curve(scheme, n, pat, train_len=train_len, logn=logn)  # noqa: E731
    doc["results"] = analytic_rows(scheme.spec, lengths, pat, curve, raises=scheme.relative)
    return doc


def analytic_rows(label: str, lengths: list[int], pattern: Pattern, curve, *, raises: bool = False) -> list[dict]:
    """One :class:`~lexkit.instruments.resolution.rows.ResolutionRow` per length: R of ``curve(n)`` [H], or a ``note``
    where the curve raises ValueError (learned positions past their table) unless ``raises``."""
    out = []
    for n in lengths:
        try:
            r = resolution(curve(n))  # [H]
        except ValueError as exc:
            if raises:
                raise
            row = ResolutionRow(label, n, pattern.spec, None, None, None, None, note=str(exc))
        else:
            row = ResolutionRow(label, n, pattern.spec, float(r.mean()), [float(x) for x in r], None, None)
        out.append(row.to_json())
    return out


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


def _analytic_model(model: nn.Module, lengths: list[int], pattern: str | Pattern | None) -> dict:
    """The analytic document of a loaded model; a lexkit model with a layout gets one set of rows
    per group of layers that are the same (scheme, pattern under ``pattern``, temperature),
    labelled ``L0-2 rope@window:16``."""
    cfg = model.cfg
    pat = model.pattern(pattern or "causal")
    doc = header("analytic", **_named(cfg))
    doc.update(run=getattr(model, "source", None), heads=cfg.n_heads, head_dim=cfg.head_dim, pattern=pat.spec,
               train_len=cfg.train_len)
    if getattr(cfg, "layout", None) is None:
        doc["results"] = analytic_rows(cfg.label, lengths, pat, lambda n: model_curve(model, n, pat))
        return doc
    doc["results"] = []
    for label, first in layer_groups(model, pat):
        doc["results"] += analytic_rows(label, lengths, layer_patterns(pat, cfg.n_layers)[first],
                                        lambda n, i=first: model_curve(model, n, pat, layer=i))
    return doc


def layer_groups(model: nn.Module, pattern: Pattern) -> list[tuple[str, int]]:
    """(label, first layer) of each group of a lexkit model's layers that are the same under
    ``pattern``: scheme, pattern and temperature (``L0-2 rope@window:16``, ``L3 none@causal+logn``)."""
    patterns = layer_patterns(pattern, model.cfg.n_layers)
    groups: dict[tuple, list[int]] = {}
    for i, (layer, pat) in enumerate(zip(model.layers, patterns)):
        temperature = layer.temperature
        groups.setdefault((layer.scheme, pat.spec, temperature and temperature.spec), []).append(i)
    out = []
    for (scheme, pat, temp), members in groups.items():
        where = f"L{members[0]}" + (f"-{members[-1]}" if len(members) > 1 else "")
        if len(members) > 1 and members != list(range(members[0], members[-1] + 1)):
            where = ",".join(f"L{i}" for i in members)
        out.append((f"{where} {scheme}@{pat}" + (f"+{temp}" if temp else ""), members[0]))
    return out


# -- empirical ----------------------------------------------------------------------------------
def empirical(
    model,
    tokens: Tensor,
    pattern: str | Pattern = "causal",
    *,
    batch_size: int = 1,
    progress=None,
) -> dict:
    """Empirical s_hat, R and entropy of ``model`` on ``tokens`` ``[texts, n]`` (one length).

    Runs the model (eval mode, no grad) through the chunked kernel with an :class:`Accumulator`
    as score hook, ``batch_size`` texts at a time. ``pattern`` W defaults to the model's
    training length. ``progress``: an object with ``advance(n)`` (see :mod:`lexkit.core.progress`),
    advanced once per batch. Returns::

        {"length": n, "pattern": spec, "texts": b, "resolution": mean over layers,
         "per_layer": [L], "per_head": [[H] per layer], "entropy": mean over layers,
         "entropy_per_layer": [L], "entropy_per_head": [[H] per layer],
         "curve": Tensor[L, H, n] (s_hat, -inf where never visible), "count": Tensor[n]}

    ``curve`` and ``count`` are tensors; :func:`to_json` drops them.
    """
    if tokens.ndim != 2 or tokens.shape[0] == 0 or tokens.shape[1] == 0:
        raise ValueError(f"tokens must be [texts, length] with both positive, got {tuple(tokens.shape)}")
    checks.number("batch_size", batch_size)
    pat = model.pattern(pattern)
    cfg = model.cfg
    n = tokens.shape[1]
    acc = Accumulator(cfg.n_layers, cfg.n_heads, n, pat)
    device = device_of(model)
    with eval_mode(model), torch.no_grad():
        for start in range(0, tokens.shape[0], batch_size):
            model(tokens[start : start + batch_size].to(device), pattern=pat, kernel="chunked", hook=acc)
            if progress is not None:
                progress.advance(1)
    curve = acc.curve()  # [L, H, n]
    r = resolution(curve)  # [L, H]
    ent = acc.entropy()  # [L, H]
    per_layer = r.mean(-1)
    ent_layer = ent.mean(-1)
    return {
        "length": n,
        "pattern": pat.spec,
        "texts": int(tokens.shape[0]),
        "resolution": float(per_layer.mean()),
        "per_layer": per_layer.tolist(),
        "per_head": r.tolist(),
        "entropy": float(ent_layer.mean()),
        "entropy_per_layer": ent_layer.tolist(),
        "entropy_per_head": ent.tolist(),
        "curve": curve,
        "count": acc.count(),
    }


def texts(docs: Sequence[bytes], length: int, count: int, *, model: nn.Module | None = None) -> Tensor:
    """``[b, length]`` int64: the first ``length`` tokens (BOS + bytes; a tokenizer model's BOS
    and tokens, :func:`lexkit.evaluate.token_documents`) of each of the first ``count``
    documents at least that long (the paper's protocol reads long documents from their start).
    ValueError when none is long enough."""
    from ...data.corpus import encode, require_long

    checks.number("--texts", count)
    if getattr(model, "unit", "bytes") == "tokens":
        from ..evaluate.measure import token_documents

        return token_documents(model, docs, length - 1, max_docs=count)[0]
    # ``length`` tokens are BOS and the first length - 1 bytes
    return torch.stack([encode(d)[:length] for d in require_long(docs, length - 1)[:count]])


def resolution_lengths(subject) -> list[int]:
    """The default lengths of a model's resolution: its training length and twice it."""
    if not subject.train_len:
        raise ValueError(f"{subject.source}: the config gives no training length; pass --lengths")
    return [subject.train_len, 2 * subject.train_len]


def empirical_run(
    target,
    lengths: Iterable[int] | str | None = None,
    pattern: str = "causal",
    *,
    texts_per_length: int = 8,
    batch_size: int = 1,
    progress: bool = False,
    scheme: str | None = None,
    logn: bool | None = None,
    data: str | None = None,
    documents: Sequence[bytes] | None = None,
    rope_scaling: dict | str | None = None,
) -> dict:
    """Empirical R of a run directory, an ``hf:PATH`` model or a loaded subject
    (:func:`lexkit.load`) on its default documents (a run: its validation text; an hf: model:
    stdlib's), ``data`` (a data spec) or ``documents`` (bytes), at each length (default: the
    training length and twice it). Each result is :func:`empirical`'s dict (with tensors;
    :func:`to_json` drops them). A length a model cannot run (``learned`` past its table)
    gets ``"resolution": null`` and a ``"note"``. ``scheme`` / ``logn`` measure a run's
    weights under another scheme or log-n setting (:func:`lexkit.training.runs.load`);
    ``rope_scaling`` applies to hf: models."""
    from ...core.progress import bar
    from ..subject import load

    subject = target if hasattr(target, "documents") else load(target, scheme=scheme, logn=logn,
                                                                rope_scaling=rope_scaling)
    model, train_len = subject.model, subject.train_len
    lengths = parse_lengths(lengths if lengths is not None else resolution_lengths(subject))
    pat = model.pattern(pattern)  # validates the spec before any work
    refusal = getattr(model, "hook_refusal", lambda: None)()
    if refusal is not None:
        raise ValueError(refusal)
    if documents is None:
        documents, described = subject.documents(data)
    else:
        described = {"spec": "documents given"}
    batches = {n: texts(documents, n, texts_per_length, model=model) for n in lengths}
    doc = header("empirical", **identity(subject.describe()))
    doc.update(
        run=subject.source, data=described["spec"], train_len=train_len, layers=model.cfg.n_layers,
        heads=model.cfg.n_heads, head_dim=model.cfg.head_dim, pattern=pat.spec, results=[],
        logn=bool(getattr(model.cfg, "logn", False)),
    )
    schemes = getattr(model, "layer_schemes", None) or [getattr(model, "scheme", None)]
    relative = all(getattr(scheme, "relative", False) for scheme in schemes)
    total = sum(-(-b.shape[0] // batch_size) for b in batches.values())
    with bar(total, "resolution", enabled=progress, unit="batch") as b:
        for n, toks in batches.items():
            try:
                row = empirical(model, toks, pat, batch_size=batch_size, progress=b)
            except ValueError as exc:
                if relative:
                    raise
                row = {"length": n, "pattern": pat.spec, "texts": int(toks.shape[0]), "resolution": None,
                       "per_layer": None, "per_head": None, "entropy": None, "note": str(exc)}
            row["label"] = model.cfg.label
            doc["results"].append(row)
    return doc


def check_options(lengths: Iterable[int] | str | None = None, **options: Any) -> None:
    """ValueError naming the flag of a setting out of range: ``lengths`` (each at most
    :data:`lexkit.core.checks.MAX_RESOLUTION_LENGTH`) and those keywords of :func:`analytic` and
    :func:`empirical_run` that are settings of :class:`lexkit.instruments.resolution.ResolutionOptions`
    (``texts_per_length`` its texts, ``batch_size`` its batch), checked by its :meth:`check`."""
    from . import ResolutionOptions

    names = {"texts_per_length": "texts", "batch_size": "batch"}
    fields = {field.name for field in dataclasses.fields(ResolutionOptions)}
    ResolutionOptions(lengths=lengths, **{names.get(key, key): value for key, value in options.items()
                                          if names.get(key, key) in fields and value is not None}).check()


def to_json(doc: dict) -> dict:
    """A copy of a document (or result row) without its tensors (``curve``, ``count``)."""
    if isinstance(doc, dict):
        return {k: to_json(v) for k, v in doc.items() if not isinstance(v, Tensor)}
    if isinstance(doc, list):
        return [to_json(v) for v in doc]
    return doc


def measure(target, lengths: Iterable[int] | str | None = None, pattern: str = "causal", **options) -> dict:
    """Attention resolution of anything lexkit measures (``lexkit.resolution(...)`` calls it): a scheme
    spec or :class:`Scheme` gives the analytic document (:func:`analytic`, default lengths 1024
    and 2048); a run directory, ``hf:PATH`` or a loaded subject (:func:`lexkit.load`) the
    empirical one (:func:`empirical_run`). ``options`` go to that function, checked first as ``lexkit
    resolution`` checks them (:func:`check_options`: lengths at most 65,536, ...)."""
    import os

    check_options(lengths, **options)
    if isinstance(target, (str, os.PathLike)) and (str(target).startswith("hf:") or os.path.isdir(target)):
        return empirical_run(target, lengths, pattern, **options)
    if hasattr(target, "documents"):
        return empirical_run(target, lengths, pattern, **options)
    return analytic(target, lengths if lengths is not None else [1024, 2048], pattern, **options)


