"""A run's config.json: written from its settings, read back checked, the trained model it describes
loaded, and the settings that continue it (a fine-tune's, :func:`configs_from_run`; the run's own on
resume, :func:`configs_to_resume`)."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import torch

from ... import layouts, positions
from ...core.errors import RunError
from ...core.version import __version__
from ...data.corpus import Corpus
from ...model.gpt import GPT, ModelConfig
from ..settings import TrainConfig, flags, same_layers, split_settings
from .files import CONFIG, RUN_DIR_VERSION, WEIGHTS, RunWarning
from .integrity import model_differences
from .weights import load_weights, recorded_model


def read_config(run_dir: str | Path, *, training: bool = False) -> dict:
    """A run's config.json, checked: its model section (and data spec) always, its train section
    and data fingerprint too when ``training`` (resuming or listing needs them)."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise RunError(f"run directory {run_dir} does not exist")
    if not run_dir.is_dir():
        raise RunError(f"{run_dir} is not a directory")
    path = run_dir / CONFIG
    if not path.is_file():
        raise RunError(f"{run_dir} is not a lexkit run (no {CONFIG}; train one with `lexkit train`)")
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunError(f"{path} is not a valid lexkit run config (not JSON: {exc})") from exc
    except OSError as exc:
        raise RunError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not isinstance(config, dict):
        raise RunError(f"{path} is not a valid lexkit run config (not a JSON object)")
    for section, keys in (TRAINING_SECTIONS if training else SECTIONS).items():
        if not isinstance(config.get(section), dict):
            raise RunError(f"{path} is not a valid lexkit run config (no {section!r} section; "
                           f"a run's config.json has {', '.join(TRAINING_SECTIONS)})")
        missing = [k for k in keys if k not in config[section]]
        if missing:
            raise RunError(f"{path} is not a valid lexkit run config ({section!r} lacks {', '.join(missing)})")
    try:
        ModelConfig(**config["model"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RunError(unregistered(path, config["model"]) or f"{path} is not a valid lexkit run config ({exc})") \
            from exc
    return config


def unregistered(path: Path, model: dict) -> str | None:
    """Why a run's scheme is unknown here when it is a name no module registered (a scheme of the
    user's, registered by a module not imported now), else None."""
    from ...core.specs import split_spec

    scheme = model.get("scheme")
    try:
        name = split_spec(scheme)[0] if isinstance(scheme, str) else None
    except ValueError:
        return None
    if not name or name in positions.names():
        return None
    return (f"{path}: the run's position scheme {name!r} is not registered here (a scheme of your own?): load the "
            f"module that registers it with --import MODULE (Python: import it first)")


#: the sections of config.json and the keys each must have (to use a run; to continue or list it)
SECTIONS = {"model": ("scheme",), "data": ("spec",)}
TRAINING_SECTIONS = {"model": ("scheme",), "train": ("steps", "data"), "data": ("spec", "fingerprint")}


def build_model(config: dict) -> GPT:
    return GPT(ModelConfig(**config["model"]))


def load(
    run_dir: str | Path, *, device: str = "cpu", scheme: str | None = None, logn: bool | None = None,
    add: str | None = None,
) -> tuple[GPT, dict]:
    """The trained model of a run directory (eval mode) and its config dict.

    ``scheme`` / ``logn`` evaluate it under another scheme with the same tensors or with log-n
    scaling switched, without retraining (``lexkit eval --scheme rope:scaling=yarn,factor=4``):
    the returned config's ``model`` then holds the overrides, ``"overrides"`` lists them and
    ``"trained"`` is the run's own model section (the weights are verified against it). A
    scheme's training-length defaults (``original_len``, ReRoPE's ``w``) take the run's length.
    On a run with a layout, ``scheme`` may select layers (``global=rerope:w=64``; unqualified: the
    layers of its family, :meth:`lexkit.layouts.LayerStack.replace_schemes`) and becomes the layout's. A run
    whose weights are past its position drop is the model after the drop (:func:`trained_section`)."""
    run_dir = Path(run_dir)
    config = read_config(run_dir)
    trained, resolved = trained_section(config, run_dir)
    section = {**trained, **as_recorded({**config, "model": trained, "resolved": resolved}, run_dir)}
    overrides = evaluation_overrides(section, scheme, logn, add)
    if logn is not None and section.get("layout") is not None:
        raise ValueError(f"--logn switches log-n on every layer; {run_dir} has a layout "
                         f"({section['layout']}), whose temperatures are per layer")
    if overrides or section != config["model"]:
        config = {**config, "model": {**section, **overrides}, "overrides": overrides, "trained": trained}
    model = build_model(config)
    load_weights(run_dir, model, recorded=config.get("trained"), scheme=scheme)
    return model.to(device).eval(), config


def trained_section(config: dict, run_dir: str | Path, name: str = WEIGHTS) -> tuple[dict, str | None]:
    """The model section a run's weights (``name``: or its checkpoint) hold and the layers it
    recorded for it (``resolved``): config.json's ``model``, or, once the file holds the model after
    the run's position drop (:mod:`lexkit.training.dropping`: the file's recorded model is config.json's
    ``drop.model``), that one."""
    drop = config.get("drop")
    if isinstance(drop, dict) and isinstance(drop.get("model"), dict):
        written = recorded_model(run_dir, name)
        if written is not None and not model_differences(written, drop["model"]):
            return drop["model"], drop.get("resolved")
    return config["model"], config.get("resolved")


def as_recorded(config: dict, run_dir: Path) -> dict:
    """The model settings that rebuild a run as it trained: nothing when today's defaults resolve its
    layers to what it recorded (config.json's ``resolved``; runs written before it was recorded
    cannot be checked), else its recorded layers as the layout, with a warning naming both."""
    recorded = config.get("resolved")
    if recorded is None:
        return {}
    cfg = ModelConfig(**config["model"])
    if cfg.matches(recorded):
        return {}
    warnings.warn(f"{run_dir} trained with {recorded}; today's defaults would make it {cfg.resolved()}: it runs as "
                  "it trained", RunWarning, stacklevel=3)
    return {"layout": recorded, "logn": False, "token_shift": 0.0 if cfg.token_shift and _shifts(recorded, cfg)
            else cfg.token_shift}


def _shifts(recorded: str, cfg: ModelConfig) -> bool:
    """Whether the recorded layers shift tokens themselves (:attr:`lexkit.layouts.LayerStack.shifts_tokens`;
    layers that no longer read are refused when the run is rebuilt from them, naming them)."""
    try:
        stack = layouts.parse(recorded, n_layers=cfg.n_layers, train_len=cfg.train_len, scheme=cfg.scheme,
                             max_len=cfg.position_len)
    except ValueError:
        return False
    return stack.shifts_tokens


def scheme_overrides(model_section: dict, scheme: str) -> dict:
    """The model-config keys an evaluation ``--scheme`` changes: ``scheme`` on a uniform run given
    one unqualified spec, else the run's ``layout`` with the selected layers' schemes replaced."""
    cfg = ModelConfig(**model_section)
    plain, pairs = layouts.split_overrides(scheme)
    if cfg.layout is None and not pairs:
        return {"scheme": positions.canonical(plain)}
    return layout_values(cfg, cfg.stack.replace_schemes(scheme))


def evaluation_overrides(model_section: dict, scheme: str | None, logn: bool | None, add: str | None = None) -> dict:
    """The model-config keys an evaluation under ``scheme``, ``logn`` and ``add`` changes (None: as
    trained): ``logn``, :func:`scheme_overrides`, then the modifiers ``add`` puts on the layers
    (the layout written out: :meth:`lexkit.layouts.LayerStack.add_modifiers`)."""
    out = {} if logn is None else {"logn": logn}
    if scheme is not None:
        out.update(scheme_overrides(model_section, scheme))
    if add is not None:
        cfg = ModelConfig(**{**model_section, **out})
        out.update(layout_values(cfg, cfg.stack.add_modifiers(add)))
    return out


def overridden(model_cfg: ModelConfig, scheme: str | None = None, logn: bool | None = None) -> ModelConfig:
    """The model config a run of ``model_cfg`` is evaluated as under ``scheme`` and ``logn``, as
    :func:`load` applies them (:func:`evaluation_overrides`; None: as trained)."""
    return dataclasses.replace(model_cfg, **evaluation_overrides(dataclasses.asdict(model_cfg), scheme, logn))


def layout_values(cfg: ModelConfig, stack: layouts.LayerStack) -> dict:
    """The model-config keys that make ``cfg`` run ``stack`` (written out, every length pinned): its
    layout, log-n and token shift now each layer's."""
    return {"layout": stack.canonical(), "logn": False, "token_shift": 0.0}


def run_config(model_cfg: ModelConfig, train_cfg: TrainConfig, corpus: Corpus) -> dict:
    """The config.json of a run of these settings on ``corpus`` (the trainer adds its provenance)."""
    return {
        "version": RUN_DIR_VERSION,
        "lexkit": __version__,
        "torch": torch.__version__,
        "model": dataclasses.asdict(model_cfg),
        "resolved": model_cfg.resolved(),  # every parameter of every layer, defaults included
        "train": train_cfg.recorded(),
        "data": {"spec": corpus.spec, "fingerprint": corpus.fingerprint,
                 **({"mix": train_cfg.mix} if train_cfg.mix else {})},
    }


#: a parent's training settings that a fine-tune does not inherit (a drop happened once, to the parent)
ONCE = ("drop_positions_at", "drop_layers")


def configs_from_run(run_dir: str | Path, scheme: str | None = None, **overrides) -> tuple[ModelConfig, TrainConfig]:
    """Configs that continue a trained run (``lexkit train --init RUN``): its architecture and
    training settings, ``scheme`` (default: its own) and explicit overrides (None = the run's).
    The shape is the parent's: a layer count, width or head count equal to the run's is accepted,
    another one refused by name (the one rule of ``lexkit train --init``). A parent past its position
    drop is continued as it ended (:func:`trained_section`), and its drop schedule is not inherited.

    The short fine-tune of position interpolation and YaRN: e.g. ``scheme="rope:scaling=yarn,factor=4"``
    with ``train_len`` 4x the run's. Every parameter of the new scheme that defaults to the
    training length (a scaled RoPE's ``original_len``, ReRoPE's ``w``, ``learned``'s table) and is
    not in its spec is pinned to the *run's* length, written into the spec, so that the new,
    longer ``train_len`` does not move it.
    """
    old = read_config(run_dir, training=True)
    old = {**old, "model": trained_section(old, run_dir)[0]}  # a parent past its position drop: as it ended
    fixed = [f"{flags()[key]} {overrides[key]} ({old['model'][key]} in {run_dir})"
             for key in ("n_layers", "d_model", "n_heads")
             if overrides.get(key) is not None and overrides[key] != old["model"].get(key)]
    if fixed:
        raise ValueError(f"--init fine-tunes the weights of {run_dir}, whose shape is fixed: {', '.join(fixed)} "
                         "cannot load them")
    values = {**old["model"], **{k: v for k, v in old["train"].items() if k not in ONCE}}
    values.update({k: v for k, v in overrides.items() if v is not None})
    length = ModelConfig(**old["model"]).position_len
    if old["model"].get("layout") is not None and overrides.get("layout") is None:
        # the parent's layers as they were at its length (every length default written out)
        parent = ModelConfig(**old["model"])
        values.update(layout_values(parent, parent.stack if scheme is None else parent.stack.replace_schemes(scheme)))
        return split_settings(values.pop("scheme"), values)
    values.pop("scheme", None)
    return split_settings(positions.pin(scheme if scheme is not None else old["model"]["scheme"], length), values)


def configs_to_resume(old: dict, scheme: str | None = None, **overrides) -> tuple[ModelConfig, TrainConfig]:
    """Configs that continue the run whose config.json is ``old`` (``lexkit train --resume``): its own
    settings, with the ones given (``scheme``, ``overrides``; None: the run's) in their place. The trainer
    then compares them with the run's (:func:`lexkit.training.runs.lifecycle.check_resume`): only a larger
    ``steps`` (extending the run), the corpus at a new place and the runtime keys may differ. A layout
    given that builds the same layers is the run's own text."""
    given = {key: value for key, value in overrides.items() if value is not None}
    if scheme is not None:
        given["scheme"] = scheme
    if "layout" in given and same_layers(old["model"], {**old["model"], "layout": given["layout"]}):
        given["layout"] = old["model"]["layout"]  # the same layers written another way: the run's own text
    values = {**old["model"], **old["train"], **given}
    try:
        return split_settings(values.pop("scheme"), values)
    except ValueError as exc:
        raise ValueError(f"run config: {exc}") from exc
