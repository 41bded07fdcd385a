"""A model case's tiny random checkpoint in the Hugging Face layout (``config.json``,
``model.safetensors``), written by transformers' own ``save_pretrained`` from the case's config and a
seed, and cached by the content that makes it (the config, the seed) under ``--models-dir`` (default
``~/.cache/lexkit/conformance-models``): nothing is downloaded, and a runtime reads exactly the files a
user's checkpoint has. A directory is complete once its ``.lexkit-ready`` marker is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from .cases import ModelCase

#: where the checkpoints are kept unless told
ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lexkit" / "conformance-models"
SEED = 0


def key(case: ModelCase, seed: int = SEED) -> str:
    """The content hash of what makes the checkpoint."""
    text = json.dumps({"config": case.hf_config, "seed": seed}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def checkpoint(case: ModelCase, root: Path | None = None, seed: int = SEED) -> Path:
    """The directory of ``case``'s checkpoint, written if missing."""
    root = Path(root) if root is not None else ROOT
    where = root / f"{case.name.replace('/', '-')}-{key(case, seed)}"
    if (where / ".lexkit-ready").is_file():
        return where
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        fields = dict(case.hf_config)
        config = AutoConfig.for_model(fields.pop("model_type"), **fields)
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    finally:
        logging.set_verbosity(verbosity)
    partial = where.with_name(where.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial, safe_serialization=True)
    (partial / ".lexkit-ready").write_text(f"{case.name} seed {seed}\n")
    shutil.rmtree(where, ignore_errors=True)
    partial.rename(where)
    return where
