"""Run directories: plain, portable, never unpickled (:mod:`.files` lists what a run directory holds).

One job per module: :mod:`.files` (names, atomic writes, the metrics file), :mod:`.integrity` (content
hashes, the model config recorded in a weight file, how tensors fail to fit), :mod:`.weights`
(weights and checkpoints), :mod:`.config` (config.json read and checked; a run loaded),
:mod:`.listing` (the runs below a directory, one at a glance), :mod:`.writer` (the one writer,
:class:`RunDir`) and :mod:`.lifecycle` (what ``lexkit train`` does to a directory before it trains:
checks, the corpus, a fine-tune's parent). ``lexkit.training.runs`` hands on the names of each.
"""

from .config import (
    SECTIONS,
    TRAINING_SECTIONS,
    build_model,
    configs_from_run,
    configs_to_resume,
    load,
    read_config,
    run_config,
    scheme_overrides,
    trained_section,
)
from .files import (
    CHECKPOINT,
    CONFIG,
    METRICS,
    RUN_DIR_VERSION,
    WEIGHTS,
    RunWarning,
    atomic_write,
    read_metrics,
    write_json,
)
from .integrity import content_hash, fit_problem, mismatch, model_tensors, verify
from .listing import find, summary
from .weights import finished, load_checkpoint, load_weights, read_weights, save_checkpoint, save_weights, trainer_state
from .writer import RunDir, check_new

__all__ = [
    "CHECKPOINT", "CONFIG", "RUN_DIR_VERSION", "METRICS", "SECTIONS", "TRAINING_SECTIONS", "WEIGHTS", "RunDir",
    "RunWarning", "atomic_write", "build_model", "check_new", "configs_from_run", "configs_to_resume", "content_hash",
    "find", "finished", "fit_problem", "load", "load_checkpoint", "load_weights", "mismatch", "model_tensors",
    "read_config", "read_metrics", "read_weights", "run_config", "save_checkpoint", "save_weights",
    "scheme_overrides", "summary", "trainer_state", "trained_section", "verify", "write_json",
]
