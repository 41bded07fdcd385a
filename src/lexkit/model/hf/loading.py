"""Loading a Hugging Face causal LM for lexkit: its config, a RoPE scaling on the layers that
rotate (per layer type where the model has one RoPE per type), the weights with attention through
lexkit, and its tokenizer. Nothing is downloaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from ...core.errors import LexkitError
from ...layouts import select, split_overrides
from .interface import ATTN, register, require
from .model import HFModel
from .model_types import ModelType, layers_of, per_type_rope, require_model_type


def parse_rope_scaling(text: str | dict | None) -> dict | None:
    """``yarn:4``, ``yarn:factor=4,original_max_position_embeddings=2048``, ``linear:2`` or a
    JSON object -> the dict transformers reads as ``rope_scaling``/``rope_parameters``."""
    if text is None or isinstance(text, dict):
        return text
    if text.strip().startswith("{"):
        try:
            out = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--rope-scaling {text!r}: not valid JSON ({exc.msg})") from None
        if not isinstance(out, dict):
            raise ValueError(f"--rope-scaling {text!r}: expected a JSON object")
        return out
    rope_type, _, rest = text.partition(":")
    out: dict[str, Any] = {"rope_type": rope_type.strip()}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        key, value = (key, value) if eq else ("factor", key)
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"--rope-scaling {text!r}: {value!r} is not a number") from None
    return out


def parse_rope_scalings(text: str | dict | None) -> list[tuple[str | None, dict]]:
    """``--rope-scaling`` in the grammar of evaluation patterns: ``yarn:4`` (every layer with RoPE),
    ``global=yarn:4``, ``full_attention=linear:8;local=yarn:2`` (the layers a selector names), a
    JSON object or a dict (every layer) -> [(selector or None, scaling dict)]."""
    if text is None:
        return []
    if isinstance(text, dict) or text.strip().startswith("{"):
        return [(None, parse_rope_scaling(text))]
    plain, pairs = split_overrides(text)
    out = [] if plain is None else [(None, parse_rope_scaling(plain))]
    return out + [(selector, parse_rope_scaling(spec)) for selector, spec in pairs]


def _checked(config, scaling: dict) -> dict:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope_type = scaling.get("rope_type", scaling.get("type"))
    valid = sorted({"default", *ROPE_INIT_FUNCTIONS})
    if rope_type not in valid:
        raise ValueError(f"unknown rope scaling type {rope_type!r}; valid: {', '.join(valid)}")
    if rope_type != "default" and "factor" not in scaling:
        raise ValueError(f"rope scaling {rope_type} needs a factor, e.g. {rope_type}:4")
    return {k: v for k, v in scaling.items() if k != "type"} | {"rope_type": rope_type}


def apply_rope_scaling(config, scalings: list[tuple[str | None, dict]], mtype: ModelType) -> None:
    """Merge each scaling into the RoPE parameters of the layers it selects, before the model is
    built (so transformers' own scaling runs). Only layers with RoPE are scaled; a selector that
    names none is an error, and so is one that splits what the model shares: one rotary
    embedding for all its RoPE layers, or (Gemma 3) one per layer type."""
    if not scalings:
        return
    if mtype.positions != "rope":
        raise ValueError(f"{config.model_type} has {mtype.positions} positions, not RoPE: rope scaling does not apply")
    layers = layers_of(config, mtype)
    rope = [i for i, layer in enumerate(layers) if layer.scheme.startswith("rope")]
    for selector, scaling in scalings:
        scaling = _checked(config, scaling)
        label = f"--rope-scaling {selector}=..." if selector else "--rope-scaling"
        chosen = [i for i in (select(selector, [x.names for x in layers]) if selector else range(len(layers)))
                  if i in rope]
        if not chosen:
            raise ValueError(f"{label}: the layers {selector} selects have no RoPE (RoPE is on layers "
                             f"{_span(rope)})")
        if per_type_rope(config):  # one rotary embedding per layer type
            params = dict(config.rope_parameters)
            for kind in dict.fromkeys(layers[i].type for i in chosen):
                whole = [i for i in rope if layers[i].type == kind]
                if not set(whole) <= set(chosen):
                    raise ValueError(f"{label}: {config.model_type} keeps one RoPE per layer type, and {selector} "
                                     f"selects some of its {kind} layers ({_span(whole)}); select the type "
                                     f"({kind}=...)")
                params[kind] = {**params[kind], **scaling}
            config.rope_parameters = params
        elif chosen != rope:
            raise ValueError(f"{label}: {config.model_type} shares one rotary embedding across its RoPE layers "
                             f"({_span(rope)}); it scales all of them or none")
        elif getattr(config, "rope_parameters", None) is not None:  # transformers 5
            config.rope_parameters = {**config.rope_parameters, **scaling}
        else:  # transformers 4.x
            config.rope_scaling = scaling


def _span(layers: list[int]) -> str:
    return ", ".join(f"L{i}" for i in layers)


def load(
    path: str | Path,
    *,
    rope_scaling: dict | str | None = None,
    dtype: torch.dtype | str = torch.float32,
    device: str | torch.device = "cpu",
    train_len: int | None = None,
) -> HFModel:
    """A causal LM (and its tokenizer, when one is saved beside it) from a local directory or
    the local hub cache (``hf:`` prefix allowed), attention through lexkit, in eval mode.

    ``rope_scaling``: a dict, or :func:`parse_rope_scalings` text (``yarn:4``, ``global=yarn:4``),
    merged into the config's ``rope_parameters`` (transformers 5; per layer type where the model
    has them) or set as ``rope_scaling`` (4.x) before the model is built, so transformers' own RoPE
    scaling runs (linear, dynamic, yarn, longrope, llama3), on the layers with RoPE only.
    ``train_len``: the length the model was trained at (default: the config's
    ``original_max_position_embeddings``, ``max_position_embeddings`` or ``n_positions``)."""
    tf = require()
    register()
    tf.utils.logging.set_verbosity_error()
    tf.utils.logging.disable_progress_bar()
    source = str(path)
    name = source[3:] if source.startswith("hf:") else source
    if isinstance(dtype, str):
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise ValueError(f"unknown dtype {dtype!r}; e.g. float32, bfloat16, float16")
        dtype = getattr(torch, dtype)
    try:
        config = tf.AutoConfig.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise LexkitError(f"cannot load a model config from {name!r} (a save_pretrained directory, or a hub name "
                          f"in the local cache): {str(exc).splitlines()[0]}") from exc
    try:
        mtype = require_model_type(config)
    except LexkitError as exc:
        raise LexkitError(f"{name}: {exc}") from None
    apply_rope_scaling(config, parse_rope_scalings(rope_scaling), mtype)
    try:
        model = tf.AutoModelForCausalLM.from_pretrained(
            name, config=config, attn_implementation=ATTN, local_files_only=True)
    except (OSError, ValueError, SafetensorError) as exc:  # a truncated or corrupt weights file included
        raise LexkitError(f"cannot load the model from {name!r}: {(str(exc).splitlines() or [repr(exc)])[0]} "
                          "(is model.safetensors complete?)") from exc
    try:
        tokenizer = tf.AutoTokenizer.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError, TypeError):
        tokenizer = None  # logits still work; text needs one (HFModel.encode says so)
    model = model.to(device=device, dtype=dtype)
    # the wrapper too: an instrument's eval_mode restores the mode it finds (a wrapper left in training mode
    # put the transformers model into training mode after the first evaluate)
    return HFModel(model, tokenizer, mtype, source if source.startswith("hf:") else f"hf:{source}", train_len).eval()
