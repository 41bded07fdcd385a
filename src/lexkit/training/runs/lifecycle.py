"""What ``lexkit train`` does to a run directory before its first step, in the order it does it: every
check that needs no write (the directory is new and writable, or a run to resume with the same
settings on the same corpus; a fine-tune's parent is still the one recorded), then the corpus, then
the config.json to write and the parent's weights loaded (:func:`settle`). Rank 0 alone runs these
under torchrun; the trainer (:mod:`lexkit.train`) only calls them.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import torch

from ...core import provenance
from ...core.device import training_dtype
from ...core.errors import RunError
from ...data.corpus import Corpus, DataError, absolute_spec, load_corpus, same_corpus
from ...model.gpt import GPT
from ..settings import TrainConfig, differences
from .config import read_config, run_config, trained_section
from .files import CHECKPOINT, CONFIG, WEIGHTS
from .integrity import fit_problem, mismatch
from .weights import read_weights, trainer_state
from .writer import check_new


@dataclasses.dataclass
class RunStart:
    """What this command does to ``out``, as rank 0 settles it before anything is written."""

    out: Path
    train_cfg: TrainConfig  # the corpus path made absolute
    old: dict | None = None  # the stored config.json (on resume)
    moved: bool = False  # the corpus at a new place (a new --data on resume)
    init: str | Path | None = None  # the parent run (a new fine-tune)

    def corpus(self) -> Corpus:
        """The training corpus: the resumed run's own (or at its new place), else the settings'."""
        if self.old is None:
            return load_corpus(self.train_cfg.data)
        return run_corpus(self.old, self.out, self.train_cfg.data if self.moved else None)


def start(out: Path, train_cfg: TrainConfig, resume: bool, corpus: Corpus | None,
         init: str | Path | None) -> RunStart:
    """Before anything is written: the directory is a run to resume, or new and writable."""
    if resume:
        old = read_config(out, training=True)
        moved = train_cfg.data != old["train"]["data"]
        if moved and corpus is None:
            train_cfg = dataclasses.replace(train_cfg, data=absolute_spec(train_cfg.data))
        return RunStart(out, train_cfg, old, moved)
    check_new(out)
    if corpus is None:
        train_cfg = dataclasses.replace(train_cfg, data=absolute_spec(train_cfg.data))
    return RunStart(out, train_cfg, init=init)


def check_resume(out: Path, old: dict, new: dict, train_cfg: TrainConfig, corpus: Corpus, moved: bool) -> None:
    """The resumed run's settings and corpus are the stored ones (more steps, and the corpus at a new
    place with the same fingerprint, allowed), and its trained weights are not overwritten."""
    diff = [d for d in differences(old, new) if not d.startswith("train.steps ")
            and not (moved and d.startswith("train.data "))]
    if diff:
        raise RunError(f"cannot resume {out} with changed settings: {', '.join(diff)}")
    if new["train"].get("drop_positions_at") is not None and new["train"]["steps"] != old["train"]["steps"]:
        raise RunError(f"cannot resume {out} with --steps {new['train']['steps']}: its positions drop at "
                       f"{new['train']['drop_positions_at']:g} of its {old['train']['steps']} steps (step "
                       f"{old.get('drop', {}).get('step', '?')}), which another total would move; resume with "
                       f"--steps {old['train']['steps']}, or fine-tune it (--init)")
    if new["train"]["steps"] < old["train"]["steps"]:
        raise RunError(f"cannot resume {out} with fewer steps ({train_cfg.steps} < {old['train']['steps']})")
    if not same_corpus(old["data"]["fingerprint"], corpus.fingerprint):
        what = f"the corpus at {corpus.spec!r} is not the one {out} trained on" if moved else \
            f"the corpus {corpus.spec!r} changed since {out} was started"
        raise RunError(f"{what} (fingerprint differs: {old['data']['fingerprint'].get('sha256')} recorded, "
                       f"{corpus.fingerprint.get('sha256')} here)")
    if (out / WEIGHTS).is_file() and not (out / CHECKPOINT).is_file():
        raise RunError(f"{out} has trained weights but no {CHECKPOINT}: resuming would train again from "
                       f"step 0 and overwrite them. To start over, remove {out} or train into another --out")


def run_corpus(config: dict, out: Path, moved_to: str | None = None) -> Corpus:
    """The run's training corpus: where config.json recorded it, or ``moved_to`` (checked by the
    caller against the recorded fingerprint)."""
    spec = moved_to or config["data"]["spec"]
    try:
        return load_corpus(spec)
    except DataError as exc:
        if moved_to is None and "does not exist" in str(exc):
            raise DataError(f"the corpus {spec!r} recorded in {out / CONFIG} does not exist here; if it "
                            "moved, give its new place with --data PATH (checked by its fingerprint)") from exc
        raise


def settle(start: RunStart, model: GPT, corpus: Corpus, world, dev: torch.device) -> dict:
    """Rank 0's last checks, none of which writes: the settings against the stored run (on
    resume), one training window fits the corpus and the scheme, and the parent's weights (under
    ``init``, or a fine-tune resumed before its first checkpoint) loaded into ``model``. Returns
    the config.json to write (``world``: the job's :class:`lexkit.training.distributed.World`, recorded)."""
    model_cfg, out, old = model.cfg, start.out, start.old
    new = run_config(model_cfg, start.train_cfg, corpus)
    new["provenance"] = provenance.collect(world, dev, training_dtype(dev))
    if old is not None:
        check_resume(out, old, new, start.train_cfg, corpus, start.moved)
        if "init" in old:
            new["init"] = old["init"]
    elif start.init is not None:
        new["init"] = init_provenance(start.init)
    tokens = sum(len(d) + 1 for d in corpus.train)  # BOS before every document
    if tokens < model_cfg.train_len + 1:
        raise DataError(f"--train-len {model_cfg.train_len}: the training split of {corpus.spec!r} has "
                        f"{tokens:,} tokens, fewer than one window of {model_cfg.train_len + 1}")
    try:  # the scheme is defined at every training position (a learned table long enough)
        model.embed_positions(torch.tensor([0, model_cfg.train_len - 1], device=dev))
    except ValueError as exc:
        raise ValueError(f"--scheme {model_cfg.scheme} cannot train at --train-len {model_cfg.train_len}: "
                         f"{exc}") from exc
    if "init" in new and (old is None or not (out / CHECKPOINT).is_file()):
        load_parent(model, new["init"], resumed=old is not None, out=out)
    return new


def load_parent(model: GPT, parent: dict, *, resumed: bool, out: Path) -> None:
    """Load the weights of a fine-tune's parent run (``parent``: config.json's ``"init"``) into
    ``model``. On resume the parent's weight file must still be the one recorded (sha256); a
    mismatch of tensors names the scheme parameters it needs or lacks, blaming ``--scheme``."""
    run = Path(parent["run"])
    weights = run / WEIGHTS
    if resumed:
        where = f"cannot resume {out}: it fine-tunes {run} and has no checkpoint yet, so it starts again from {run}"
        if not weights.is_file():
            raise RunError(f"{where}, whose {WEIGHTS} is missing; restore it, or start the fine-tune anew")
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()
        if digest != parent.get("sha256"):
            raise RunError(f"{where}, whose {WEIGHTS} changed since (sha256 {digest[:12]}..., "
                           f"{str(parent.get('sha256'))[:12]}... recorded); restore it, or start the fine-tune anew")
    tensors = read_weights(run, model, recorded=trained_section(read_config(run), run)[0])
    missing, extra, bad = mismatch(model, tensors)
    if missing or extra or bad:
        raise RunError(f"--init {run}: --scheme {model.cfg.scheme} does not match the weights of {run} (trained "
                       f"with {parent['scheme']}): " + fit_problem(missing, extra, bad))
    model.load_state_dict(tensors, strict=False)


def init_provenance(run_dir: str | Path) -> dict:
    """What ``--init RUN`` started from: the run (its absolute path), its scheme and length, its
    step and the sha256 of its weight file (so the parent can be identified even if it moves)."""
    old = read_config(run_dir)
    old = {**old, "model": trained_section(old, run_dir)[0]}
    weights = Path(run_dir) / WEIGHTS
    if not weights.is_file():
        raise RunError(f"--init {run_dir}: it has no {WEIGHTS} (train it first)")
    state = trainer_state(run_dir) or {}
    return {
        "run": str(Path(run_dir).resolve()), "scheme": old["model"]["scheme"], "train_len": old["model"]["train_len"],
        "step": state.get("step"), "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
    }
