"""The empirical measure, from a model on real text: the paper's s_hat[n] = mean over texts and query
positions i >= n of e(i, i - n), per layer and head, accumulated through the model's score hook one query
block at a time (:class:`~.accumulator.Accumulator`); the same pass measures the attention entropy per
layer and head (:func:`empirical`). R is computed per head, then the mean over heads per layer, then
over layers. Under a pattern, s_hat[n] averages over exactly the (text, query) pairs that see distance
n; a distance no pair sees counts as -inf. The texts are the first tokens of long documents
(:func:`texts`); :func:`empirical_run` measures a run, an ``hf:`` model or a subject at several lengths
as one document."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import Tensor, nn

from ...attention import Pattern
from ...core import checks
from ...core.device import device_of, eval_mode
from ...core.specs import parse_lengths
from .. import identity
from .accumulator import Accumulator
from .document import header
from .formula import resolution


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

    ``curve`` and ``count`` are tensors; :func:`~.document.to_json` drops them.
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
    :func:`~.document.to_json` drops them). A length a model cannot run (``learned`` past its table)
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
