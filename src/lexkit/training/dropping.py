"""Position dropping (DroPE: Gelberg, Eguchi, Akiba and Cetin 2025, "Extending the Context of
Pretrained LLMs by Dropping Their Positional Embeddings", arXiv 2512.12167): a training schedule that
takes the position scheme of some layers away for the last part of training.

The paper's recipe: train with RoPE for most of the budget (it makes attention learn fast), then
remove the positional embeddings, which leaves NoPE layers, and keep training briefly at the same
context length (its "recalibration"); the model is used as it ended, without positions, and
generalises past the training length zero-shot, paired at long lengths with a softmax temperature
(beta = 1 + c ln(n/L), lexkit's ``fitted:c=C`` layer modifier).

lexkit's schedule (:class:`~lexkit.training.settings.TrainConfig` ``drop_positions_at`` = F and
``drop_layers``, ``lexkit train --drop-positions-at F --drop-layers SELECTOR``): the steps with index
t >= D = ceil(F · steps) (F read as the decimal it is written as: 0.875 of 40 steps is 35) train
with the selected layers' schemes replaced by ``none``; every other part of those layers (their
pattern, their modifiers, every weight) stays. SELECTOR is a layer selector of the layout grammar
(``local``, ``global``, ``L3``, ``L0-2``), all layers when not given; the selected layers must have a
scheme to drop. At step D the trainer builds the model of the final config (:attr:`Drop.model`) and
carries every tensor and its AdamW state over to it (:func:`carry`); a dropped scheme's own learned
parameters, if it has any (KERPLE's slopes), go with it.

What the run directory means: config.json keeps the model as configured (``model``, with
positions) and the schedule (``train``), and records the model after the drop under ``drop``
(:func:`record`: its step, layers, model section and resolved layers, so a later change of a
registered default cannot change it). Every weight file records the model it holds (its ``model``
metadata); :func:`lexkit.training.runs.load` builds that one: a finished run evaluates as it ended, with no
positions on the dropped layers, and a checkpoint written before step D as the model it was then. A
run with a drop cannot be resumed with another ``--steps`` (D moves with the total).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import torch
from torch import nn

from .. import layouts
from ..model.gpt import ModelConfig
from .runs.config import layout_values
from .settings import TrainConfig

__all__ = ["Drop", "carry", "drop_step", "record", "schedule"]


@dataclasses.dataclass(frozen=True)
class Drop:
    """A run's position drop: from step index ``step`` on, ``layers`` have no positions and the
    network is ``model``."""

    step: int
    layers: tuple[int, ...]
    model: ModelConfig


def drop_step(at: float, steps: int) -> int:
    """D = ceil(F · steps), F read as the decimal it is written as (``repr``), not its binary float."""
    return math.ceil(Fraction(repr(float(at))) * steps)


def schedule(model_cfg: ModelConfig, train_cfg: TrainConfig) -> Drop | None:
    """The drop of these settings (None: no ``drop_positions_at``); ValueError naming what is wrong:
    a step D that leaves no step with positions or none without, a selector this model does not
    have, selected layers with no scheme to drop, a final model that cannot be built (an absolute
    scheme dropped from some layers only)."""
    at = train_cfg.drop_positions_at
    if at is None:
        return None
    step = drop_step(at, train_cfg.steps)
    if not 0 < step < train_cfg.steps:
        raise ValueError(f"--drop-positions-at {at:g} of {train_cfg.steps} steps drops at step {step}: "
                         f"{'no step would train without positions' if step else 'no step would train with them'}"
                         f"; give a fraction with 0 < F·steps < steps")
    stack = model_cfg.stack
    selector = train_cfg.drop_layers
    try:
        chosen = (list(range(len(stack))) if selector in (None, "all")
                  else layouts.select(selector, stack.selector_names))
    except ValueError as exc:
        raise ValueError(f"--drop-layers: {exc}") from None
    layers = tuple(i for i in chosen if stack[i].scheme_class.name != "none")
    if not layers:
        raise ValueError(f"--drop-layers {selector or 'all'}: the selected layers "
                         f"({', '.join(f'L{i}' for i in chosen)}) have no positions to drop (scheme none); "
                         "select layers with a scheme")
    if model_cfg.layout is None and len(layers) == len(stack):
        final = dataclasses.replace(model_cfg, scheme="none")  # every layer: a NoPE model, its flags kept
    else:
        dropped = [layer.replace(scheme="none") if i in layers else layer for i, layer in enumerate(stack)]
        new_stack = stack.with_layers(dropped)
        try:
            final = ModelConfig(**{**dataclasses.asdict(model_cfg), **layout_values(model_cfg, new_stack)})
        except ValueError as exc:
            raise ValueError(f"--drop-layers {selector}: {exc}") from None
    return Drop(step, layers, final)


def record(drop: Drop) -> dict:
    """What config.json keeps under ``drop``: the step, the layers and the model after the drop."""
    return {"step": drop.step, "layers": list(drop.layers), "model": dataclasses.asdict(drop.model),
            "resolved": drop.model.resolved()}


def _names(model: nn.Module) -> dict[int, str]:
    """Each module of ``model`` by identity -> its first dotted name."""
    out: dict[int, str] = {}
    for name, module in model.named_modules():
        out.setdefault(id(module), name)
    return out


def sources(old: nn.Module, new: nn.Module) -> dict[str, str]:
    """Each state-dict key of ``new`` -> the key of ``old`` it continues. Keys outside the position
    schemes are the same; a kept layer's scheme module may sit at another index of ``schemes`` (a
    ``none`` module now comes first), so scheme keys are matched layer by layer."""
    out: dict[str, str] = {}
    old_at, new_at = _names(old), _names(new)
    for a, b in zip(old.layer_schemes, new.layer_schemes):
        if type(a) is not type(b):  # a dropped layer: its scheme's tensors go
            continue
        for key in b.state_dict():
            out.setdefault(f"{new_at[id(b)]}.{key}", f"{old_at[id(a)]}.{key}")
    for key in new.state_dict():
        out.setdefault(key, key)
    return out


def carry(old: nn.Module, old_weights: dict[str, torch.Tensor], old_optimizer: dict,
          old_params: list[nn.Parameter], new: nn.Module, new_optimizer: torch.optim.Optimizer) -> None:
    """Put the drop's model ``new`` where ``old`` was: every tensor of ``old_weights`` (old's whole
    state dict) that ``new`` has, and the AdamW state of each parameter (``old_optimizer``: a
    whole-tensor optimizer state dict over ``old_params``, in its order) onto the same parameter of
    ``new_optimizer``. ``old`` and ``new`` are plain models (not wrapped)."""
    keys = sources(old, new)
    state = new.state_dict()
    missing = [k for k in state if keys[k] not in old_weights or old_weights[keys[k]].shape != state[k].shape]
    if missing:  # pragma: no cover - a scheme whose kept layers change their tensors
        raise ValueError(f"the model after the drop has tensors the model before it lacks: {', '.join(missing[:4])}")
    new.load_state_dict({k: old_weights[keys[k]] for k in state})
    name_of = {id(p): n for n, p in old.named_parameters()}
    old_index = {name_of[id(p)]: i for i, p in enumerate(old_params)}
    slots = {}
    new_params = [p for group in new_optimizer.param_groups for p in group["params"]]
    new_names = {id(p): n for n, p in new.named_parameters()}
    for j, p in enumerate(new_params):
        i = old_index.get(keys[new_names[id(p)]])
        if i is not None and i in old_optimizer["state"]:
            slots[j] = old_optimizer["state"][i]
    new_optimizer.load_state_dict({"state": slots, "param_groups": new_optimizer.state_dict()["param_groups"]})
