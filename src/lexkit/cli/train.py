"""``lexkit train``: train a byte-level LM with one position scheme at one length.

Every setting defaults to the preset's value; on ``--resume`` only the settings given on the
command line are compared with the run's (a larger ``--steps`` extends the run). ``--init RUN``
starts from a trained run's weights and settings (fresh optimizer): the short fine-tune at a longer
``--train-len`` under a RoPE scaling (``--scheme rope:scaling=yarn,factor=4``), recorded in the new
run's config.json.

Under ``torchrun --nproc_per_node N`` it trains with DistributedDataParallel (``--fsdp``: FSDP2)
over N processes; ``--batch`` stays the global batch and must divide by N (docs/distributed.md).
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

from ..core import options, threads
from ..instruments.subject import default_lengths
from ..training import compiled, presets
from ..training.distributed import setup
from ..training.loop import train
from ..training.runs import configs_from_run, read_config
from ..training.settings import configs, inert_modifier, same_layers, split_settings


def _setting(kind: type, help: str, metavar: str | None = None):
    """A run setting that defaults to None (the preset's, the parent's or the run's own)."""
    return dataclasses.field(default=None, metadata={"type": kind, "help": help, "metavar": metavar})


@dataclasses.dataclass
class RunSettings:
    """The run's settings ``lexkit train`` takes besides the preset's sizes (:data:`lexkit.training.presets.FLAGS`),
    declared once: each a flag (:func:`lexkit.core.options.add_flags`; None: the preset's, the parent's under
    ``--init``, the run's own under ``--resume``) and a keyword of :func:`lexkit.training.settings.configs`, checked
    there."""

    layout: str | None = _setting(str, "a scheme, pattern and temperature per layer: a named design (hwfa, hwfa2, "
                                  "rnope-swa, irope, gemma, gpt-oss; see `lexkit layouts`) or written out, e.g. "
                                  "\"rope@window:16 ; none@causal+logn\"; (...)xN repeats, (...)^N loops with the same "
                                  "weights (docs/layouts.md)")
    token_shift: float | None = _setting(float, "shift this fraction of each position's features from the position "
                                         "before, at the input of every attention and feed-forward block "
                                         "(x-transformers' shift_tokens=1 is 0.5; default 0)", "FRACTION")
    logn: bool | None = _setting(bool, "log-n attention scaling, q_m <- max(1, ln(m+1)/ln train_len) q_m, recorded "
                                 "with the run: it changes nothing in training (the scale is 1 at every position up "
                                 "to the training length, so the weights are the same) and applies when the run is "
                                 "evaluated longer (default: off; under --init: the parent's)")
    random_positions: int | None = _setting(int, "train at a sorted random subset of the positions 0..L_MAX-1 (Ruoss "
                                            "et al. 2023; L_MAX at least --train-len), evaluate at 0..n-1; recorded "
                                            "with the run (default: off)", "L_MAX")
    # the token tables (lexkit.training.embedding; docs/runs.md#embedding-options)
    untied_head: bool | None = _setting(bool, "give the output head a matrix of its own instead of the embedding's "
                                        "(default: tied, as GPT-2); recorded with the run")
    mlp: bool | None = _setting(bool, "--no-mlp: blocks of attention only, no feed-forward part (Sanford et al. "
                                "2024's MLP-free transformers; default: with); recorded with the run")
    embedding_decay: float | None = _setting(float, "AdamW weight decay on the embedding, 0 for none (default: the "
                                             "other matrices', 0.1)", "D")
    freeze_embedding: bool | None = _setting(bool, "keep the embedding at its random init (tied: the head too; "
                                             "default: trained)")
    reset_unseen: int | None = _setting(int, "every N steps, draw again the embedding (and untied head) rows of the "
                                        "bytes no training batch has held yet, their AdamW moments zeroed (default: "
                                        "0, never)", "N")
    # position dropping (lexkit.training.dropping; docs/layouts.md#position-dropping)
    drop_positions_at: float | None = _setting(float, "DroPE: from step ceil(F*steps) on, train the --drop-layers "
                                               "without their position scheme (none), and evaluate the run so, e.g. "
                                               "0.875 (default: off)", "F")
    drop_layers: str | None = _setting(str, "the layers --drop-positions-at drops: local, global, L3 or L0-2 "
                                       "(default: every layer)", "SELECTOR")
    data: str | None = _setting(str, "stdlib (default), a file, directory or glob, or hf:NAME[:CONFIG[:SPLIT]]; "
                                "on --resume: the run's corpus at a new place (checked by its fingerprint)")
    mix: list[str] = dataclasses.field(default_factory=list, metadata={
        "metavar": "TASK:FRACTION", "help": "retrieval documents (a task of `lexkit tasks`; docs/retrieval.md) as "
        "this fraction of the training windows, e.g. passkey:0.05; repeatable (default: none)"})
    stop: str | None = _setting(str, "end the run once the mix's probe has converged: probe:exact=E,probes=K,after=S "
                                "stops at the first validation at step S or later ending K in a row with every "
                                "task's probe at E or more (lexkit.training.stopping; recorded in config.json; "
                                "default: none)",
                                "RULE")
    curriculum: float | None = _setting(float, "for the first F of the steps the mix draws each task's easier "
                                        "documents (kvthread: one hop; `lexkit tasks`), then its usual ones, e.g. "
                                        "0.25 (default: 0, none)", "F")
    seed: int | None = _setting(int, "random seed (default: 0)")
    compile: bool | None = _setting(bool, compiled.HELP)


def add_parser(sub):
    p = sub.add_parser("train", help="train a model at a short length", description=__doc__,
                       epilog="Defaults shown are the `small` preset's; `lexkit presets` lists every preset's values.")
    p.add_argument("--scheme", help="position scheme spec, e.g. rope, xpos:gamma=0.5 (see `lexkit schemes`); with "
                   "--layout, the scheme of the layers that name none (default rope)")
    p.add_argument("--out", required=True, help="run directory (must be new or empty, unless --resume)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--init", metavar="RUN", help="start from the weights and settings of trained run RUN "
                   "(e.g. a longer --train-len with --scheme rope:scaling=yarn,factor=4; default scheme: RUN's)")
    p.add_argument("--preset", default=None, choices=list(presets.PRESETS),
                   help="size preset (default: small; see `lexkit presets`)")
    for key, flag in presets.FLAGS.items():
        kind = float if isinstance(presets.PRESETS["small"][key], float) else int
        p.add_argument(flag, dest=key, type=kind, metavar=flag[2:].upper().replace("-", "_"),
                       help=f"{_HELP[key]} (default: the preset's, {_default(key)})")
    options.add_flags(p, RunSettings)
    p.add_argument("--threads", type=int, metavar="N", help=threads.HELP)
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or mps (default: auto)")
    p.add_argument("--quiet", "--no-progress", dest="quiet", action="store_true",
                   help="no progress bar (--no-progress: the same, as the other commands write it)")
    p.add_argument("--fsdp", action="store_true",
                   help="under torchrun: shard parameters and optimizer state over the processes (FSDP2)")
    p.add_argument("--tensorboard", nargs="?", const="", default=None, metavar="DIR",
                   help="also write the metrics as TensorBoard event files in DIR (default DIR: RUN/tb; "
                   "needs pip install -e '.[tb]')")
    return p


#: what each flag of :data:`lexkit.training.presets.FLAGS` sets (its default is the preset's value)
_HELP = {"train_len": "training length in bytes", "steps": "training steps", "batch": "sequences per step",
         "n_layers": "layers", "d_model": "model width d_model", "n_heads": "attention heads",
         "lr": "peak learning rate", "save_every": "checkpoint every N steps",
         "eval_every": "validation bpb every N steps"}


def _default(key: str) -> str:
    value = presets.PRESETS["small"][key]
    return f"{value:g} in small" if isinstance(value, float) else f"{value} in small"


def _overrides(args) -> dict:
    """The sizes (the preset's flags) and the run settings as given (None: not given)."""
    values = options.given(args, RunSettings)
    values["mix"] = ",".join(values["mix"]) or None
    return {**{key: getattr(args, key) for key in presets.FLAGS}, **values}


def run(args) -> int:
    overrides = _overrides(args)
    if args.init is not None and args.resume:
        raise ValueError("--init starts a new run and --resume continues one; give one of them")
    if args.init is not None:
        if args.preset is not None:
            raise ValueError("--init takes its settings from RUN; --preset does not apply")
        model_cfg, train_cfg = configs_from_run(args.init, args.scheme, **overrides)
    elif args.resume:
        # start from the run's own settings; what the command line gives is compared against them
        world, _ = setup(args.device)  # under torchrun, rank 0 reads the run; the others get its config
        old = world.on_main(lambda: read_config(args.out, training=True))
        stored = {**old["model"], **old["train"]}
        given = {k: v for k, v in overrides.items() if v is not None}
        if args.scheme is not None:
            given["scheme"] = args.scheme
        if "layout" in given and same_layers(old["model"], {**old["model"], "layout": given["layout"]}):
            given["layout"] = old["model"]["layout"]  # the same layers written another way: the run's own text
        merged = {**stored, **given}
        scheme = merged.pop("scheme")
        model_cfg, train_cfg = _from_values(scheme, merged)
    else:
        if args.scheme is None and args.layout is None:
            raise ValueError("--scheme or --layout is required (see `lexkit schemes`, `lexkit layouts`)")
        model_cfg, train_cfg = configs(args.preset or "small", args.scheme or "rope", **overrides)
    if not args.resume:  # a resumed run was warned when it started
        inert = inert_modifier(model_cfg, max(default_lengths(model_cfg.train_len)))
        if inert is not None:
            warnings.warn(inert, stacklevel=1)
    tensorboard = None if args.tensorboard is None else args.tensorboard or str(Path(args.out) / "tb")
    summary = train(args.out, model_cfg, train_cfg, resume=args.resume, device=args.device,
                    threads=args.threads, progress=not args.quiet, fsdp=args.fsdp, init=args.init,
                    tensorboard=tensorboard)
    if "val_bpb" in summary:
        print(f"{args.out}: {summary['step']} steps, loss {summary['loss']:.4f}, "
              f"validation {summary['val_bpb']:.4f} bits/byte")
    return 0


def _from_values(scheme: str, values: dict):
    try:
        return split_settings(scheme, values)
    except ValueError as exc:
        raise ValueError(f"run config: {exc}") from exc
