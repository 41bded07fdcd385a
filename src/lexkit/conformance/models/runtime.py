"""The interface a runtime's whole model is checked through, and the runtimes that run in this process.

A :class:`ModelRuntime` loads a checkpoint directory as its users do and returns a loaded model with

* ``prefill(ids) -> logits [n, V]``: one forward pass over ids, the logits at every position;
* ``decode(ids, start, step) -> logits [len(ids) - start, V]``: a prefill of ``ids[:start]`` into the
  runtime's own KV cache, then the rest fed ``step`` tokens at a time through that cache, the logits of
  each fed position;
* optionally ``batch(seqs) -> [logits [n_i, V]]``: the sequences of different lengths in one forward pass
  (padded as the runtime pads), each one's logits;
* optionally ``read() -> dict``: what the runtime read from the config (its RoPE and windows, as its own
  objects hold them), written to the report beside the checks.

Arrays may be numpy or torch, any float dtype (compared in float64). A case the runtime cannot run is
declined by :meth:`ModelRuntime.supports` (n/a with why); a call it declines raises
:class:`~lexkit.conformance.adapter.NotApplicable`.

In process: ``transformers`` (``AutoModelForCausalLM.from_pretrained(dir)`` in float32, eager
attention, its ``DynamicCache``) and ``toy``, lexkit's own float32 decoder with a KV cache of its own
(:class:`~.forward.Session`), into which :data:`BUGS` plants each class of whole-model bug.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ...attention import create as create_pattern
from ...core.registry import Registry
from ..adapter import Adapter
from . import forward
from .cases import ModelCase


class ModelRuntime(Adapter):
    """A runtime under the model battery (``name``, ``modules``, ``summary`` as an adapter's)."""

    def supports(self, case: ModelCase) -> str | None:  # type: ignore[override]
        return None

    def load(self, directory: Path, case: ModelCase) -> object:
        raise NotImplementedError


#: the runtimes ``lexkit conformance --models`` knows (in process, or a RemoteModelRuntime's side)
MODEL_RUNTIMES: Registry = Registry("model runtime", Adapter)
register = MODEL_RUNTIMES.register


# -- transformers, in process ---------------------------------------------------------------------
class _HF:
    def __init__(self, directory: Path) -> None:
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging

        verbosity = logging.get_verbosity()
        logging.set_verbosity_error()
        try:
            self.model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                                              attn_implementation="eager").eval()
        finally:
            logging.set_verbosity(verbosity)

    @torch.no_grad()
    def prefill(self, ids):
        return self.model(torch.as_tensor(ids)[None]).logits[0]

    def read(self) -> dict:
        """What the loaded model's config holds of positions and windows, and each rotary module's type and
        attention scaling (by layer type where the model keeps one per type)."""
        config = self.model.config
        out = {k: v for k, v in config.to_dict().items()
               if any(w in k for w in ("rope", "window", "layer_types")) and v is not None}
        for name, module in self.model.named_modules():
            if name.endswith("rotary_emb") or "rotary_emb." in name:
                out[f"{name}.attention_scaling"] = float(getattr(module, "attention_scaling", 1.0))
                out[f"{name}.rope_type"] = str(getattr(module, "rope_type", ""))
        return out

    @torch.no_grad()
    def batch(self, seqs):
        """The sequences right-padded into one batch with an attention mask, as a user batches them."""
        n = max(len(s) for s in seqs)
        ids = torch.zeros(len(seqs), n, dtype=torch.long)
        mask = torch.zeros(len(seqs), n, dtype=torch.long)
        for b, s in enumerate(seqs):
            ids[b, : len(s)], mask[b, : len(s)] = torch.as_tensor(s), 1
        logits = self.model(ids, attention_mask=mask).logits
        return [logits[b, : len(s)] for b, s in enumerate(seqs)]

    @torch.no_grad()
    def decode(self, ids, start: int, step: int):
        ids = torch.as_tensor(ids)[None]
        out = self.model(ids[:, :start], use_cache=True)
        cache, rows = out.past_key_values, []
        for at in range(start, ids.shape[1], step):
            out = self.model(ids[:, at:at + step], past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            rows.append(out.logits[0])
        return torch.cat(rows)


@register
class Transformers(ModelRuntime):
    name = "transformers"
    modules = ("transformers",)
    extra = "hf"
    summary = "AutoModelForCausalLM.from_pretrained(dir) in float32, eager attention, its DynamicCache"

    def load(self, directory: Path, case: ModelCase) -> object:
        return _HF(directory)


# -- lexkit's own decoder, and the bugs planted in it ------------------------------------------------
#: bug -> (what it does, the cases that must catch it)
BUGS = {
    "scaling-dropped": ("the config's RoPE scaling never applied (plain RoPE at its base)",
                        ("models/llama-llama3", "models/qwen2-yarn", "models/phi3-longrope", "models/gemma3")),
    "global-base-on-local": ("the full layers' RoPE (base and scaling) on the sliding layers",
                             ("models/olmo3-hybrid", "models/gemma3")),
    "window-every-layer": ("the sliding window on every layer, full ones too",
                           ("models/olmo3-hybrid", "models/olmo3-window-unused", "models/cohere2")),
    "window-one-wider": ("a window of W + 1 keys", ("models/mistral-window", "models/olmo3-hybrid")),
    "attention-factor-ignored": ("YaRN's explicit attention_factor (and mscale ratio) ignored: a = 0.1 ln s + 1",
                                 ("models/llama-yarn-attention-factor", "models/qwen3-yarn-mscale")),
    "decode-one-late": ("decoded tokens at their position + 1 (the prefill's right)",
                        ("models/llama-llama3", "models/mistral-window")),
    "ring-no-evict": ("a ring cache of W that is its own mask on multi-token decode steps: keys it should evict "
                      "stay visible", ("models/mistral-window", "models/olmo3-hybrid")),
    "longrope-by-context": ("LongRoPE's long factors chosen by the allocated context (32·L), at every length",
                            ("models/phi3-longrope",)),
    "sinks-dropped": ("GPT-OSS's sink logits left out of the softmax", ("models/gpt-oss",)),
}


def planted(config: dict, bug: str) -> list[forward.Layer]:
    """``config``'s decoder layers (:func:`forward.decoder_layers`) with ``bug`` planted (see :data:`BUGS`)."""
    layers = forward.decoder_layers(config)
    full = next((layer for layer in layers if layer.pattern.reach is None), None)
    out = []
    for layer in layers:
        rope, pattern = layer.rope, layer.pattern
        if bug == "scaling-dropped" and rope is not None:
            rope = forward.RopeConfig(head_dim=rope.head_dim, base=rope.base, fraction=rope.fraction,
                                      dtype=rope.dtype)
        if bug == "global-base-on-local" and full is not None and pattern.reach is not None:
            rope = full.rope
        if bug == "attention-factor-ignored" and rope is not None and rope.scaling == "yarn":
            rope = dataclasses.replace(rope, attention_factor=None, mscale=None, mscale_all_dim=None)
        if bug == "window-every-layer" and config.get("sliding_window"):
            pattern = create_pattern(f"window:{config['sliding_window']}")
        if bug == "window-one-wider" and pattern.reach is not None:
            pattern = create_pattern(f"window:{pattern.reach + 1}")
        if bug == "longrope-by-context" and rope is not None and rope.scaling == "longrope":
            rope = dataclasses.replace(rope, short_factor=rope.long_factor)
        out.append(forward.Layer(layer.type, pattern, rope))
    return out


class _Toy:
    def __init__(self, directory: Path, bug: str) -> None:
        config, weights = forward.read(directory)
        layers = planted(config, bug) if bug else None
        self.decoder, self.bug = forward.Decoder(config, weights, torch.float32, layers), bug
        if bug == "sinks-dropped":
            self.decoder.sinks = False

    def prefill(self, ids):
        return self.decoder.prefill(ids)

    def decode(self, ids, start: int, step: int):
        session = self.decoder.session(unmasked=self.bug == "ring-no-evict", shift=int(self.bug == "decode-one-late"))
        ids = torch.as_tensor(ids)
        session.feed(ids[:start])
        return torch.cat([session.feed(ids[at:at + step]) for at in range(start, len(ids), step)])


@register
class Lexkit(ModelRuntime):
    """lexkit's own float32 decoder and KV cache (:mod:`.forward`): the battery's control, and the body
    each planted bug (:func:`toy`) goes into."""

    name = "lexkit"
    summary = "lexkit's float32 decoder (float32 angles and tables) and its KV cache, a ring of W on windowed layers"
    bug = ""

    def version(self) -> str:
        from ...core.version import __version__

        return __version__

    def load(self, directory: Path, case: ModelCase) -> object:
        return _Toy(directory, self.bug)


def toy(bug: str = "") -> ModelRuntime:
    """lexkit's runtime with ``bug`` planted (:data:`BUGS`; "" none), named ``toy-BUG``."""
    if bug and bug not in BUGS:
        raise ValueError(f"bug {bug!r}; valid: {', '.join(BUGS)}")
    if not bug:
        return Lexkit()
    body = {"name": f"toy-{bug}", "bug": bug, "summary": f"lexkit's decoder with a bug: {BUGS[bug][0]}",
            "__module__": __name__}
    return type(f"Toy_{bug.replace('-', '_')}", (Lexkit,), body)()
