"""The model seam: one loaded thing every instrument measures, a lexkit run or a Hugging Face model.

``lexkit.load(target)`` takes a run directory (``runs/x``) or ``hf:PATH`` and returns a
:class:`Subject`. The protocol an instrument may rely on (both :class:`RunSubject` and
:class:`HFSubject` implement it)::

    subject.model                  # forward(tokens [b, n], pattern=, offset=, kernel=, hook=) -> logits [b, n, V]
                                   #   .cfg (n_layers, n_heads, head_dim, train_len), .pattern(spec),
                                   #   .cache_refusal(pattern, kernel) -> None or why no KV cache here,
                                   #   .unit: "bytes" (lexkit.GPT) or "tokens" (a tokenizer model)
    subject.source                 # "runs/x" or "hf:PATH", as given
    subject.train_len              # the training length (None when unknown), in the model's unit
    subject.encode(text)           # (tokens [T] int64, BOS first; bytes each later token covers [T - 1])
    subject.decode(tokens)         # bytes of the text of tokens (BOS left out)
    subject.documents(data=None)   # (documents as bytes, a description): the default text to measure on
    subject.default_lengths()      # the lengths ``lexkit eval`` measures when none are given
    subject.describe()             # the report's header: run, scheme, train_len, ...
    subject.refuse(**options)      # ValueError naming the first option given that it cannot honour
    subject.generate(tokens, n)    # greedy continuation [n] (through a KV cache where the model allows it)
    subject.continue_text(prompt, n_bytes)  # the same from text to text (bytes), never a byte model's BOS

What a subject refuses is a table (:attr:`Subject.refuses`: option -> reason), so an error names
the option and says why, and a command never keeps its own list.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Protocol

import torch
from torch import Tensor, nn

from ..attention import Pattern
from ..core.device import eval_mode
from ..core.errors import DataError
from ..data.corpus import encode

DEFAULT_MULTIPLIERS = (0.5, 1, 2, 4, 8, 16)


def default_lengths(train_len: int) -> list[int]:
    """The training length times 1/2, 1, 2, 4, 8 and 16 (duplicates and zeros dropped)."""
    return sorted({int(train_len * m) for m in DEFAULT_MULTIPLIERS} - {0})


class Subject(Protocol):
    """A measurable model (see the module docstring)."""

    model: nn.Module
    source: str
    refuses: ClassVar[dict[str, str]]

    @property
    def train_len(self) -> int | None: ...
    def encode(self, text: bytes | str) -> tuple[Tensor, Tensor]: ...
    def decode(self, tokens: Tensor) -> bytes: ...
    def documents(self, data: str | None = None) -> tuple[list[bytes], dict]: ...
    def default_lengths(self) -> list[int]: ...
    def describe(self) -> dict: ...
    def refuse(self, **options) -> None: ...
    def generate(self, tokens: Tensor, n: int, *, pattern: str | Pattern = "causal", cache: bool | None = None,
                 kernel: str = "auto") -> Tensor: ...
    def continue_text(self, prompt: bytes, n_bytes: int, *, pattern: str | Pattern = "causal",
                      cache: bool | None = None, kernel: str = "auto") -> bytes: ...


class _Base:
    """What both kinds share: the refusal table and greedy generation."""

    refuses: ClassVar[dict[str, str]] = {}
    model: nn.Module

    @classmethod
    def refuse(cls, **options) -> None:
        """ValueError naming the first option given (not None/False) this kind cannot honour."""
        for name, value in options.items():
            if value is not None and value is not False and name in cls.refuses:
                raise ValueError(f"--{name.replace('_', '-')} {cls.refuses[name]}")

    #: tokens below this id are text (a byte model's BOS, 256, is not); None: every token is
    text_tokens: ClassVar[int | None] = None

    def greedy(self, tokens: Tensor, *, pattern: str | Pattern = "causal", cache: bool | None = None,
               kernel: str = "auto", text: bool = False) -> Iterator[int]:
        """Greedy next tokens after ``tokens`` [T], one at a time, without end: through the
        model's KV cache when ``cache`` is None and the model can run ``pattern`` through one
        (:func:`lexkit.attention.cache.use_cache`; True insists, False never), else one plain forward
        per token. ``text``: only text tokens are chosen (never a byte model's BOS)."""
        from ..attention.cache import decode, use_cache

        model = self.model
        context = tokens.to(next(model.parameters()).device)
        top = self.text_tokens if text else None
        with eval_mode(model), torch.inference_mode():
            yield from decode(model, context, lambda logits, i: int(logits[:top].argmax()), pattern=pattern,
                              cached=use_cache(model, kernel, cache, pattern), kernel=kernel)

    def generate(self, tokens: Tensor, n: int, *, pattern: str | Pattern = "causal", cache: bool | None = None,
                 kernel: str = "auto") -> Tensor:
        """The ``n`` greedy next tokens after ``tokens`` [T] -> [n] int64 (:meth:`greedy`)."""
        steps = self.greedy(tokens, pattern=pattern, cache=cache, kernel=kernel)
        out = torch.tensor([next(steps) for _ in range(n)], dtype=torch.int64)
        steps.close()
        return out

    def continue_text(self, prompt: bytes, n_bytes: int, *, pattern: str | Pattern = "causal",
                      cache: bool | None = None, kernel: str = "auto") -> bytes:
        """The greedy continuation of the text ``prompt``, as bytes: tokens are decoded until
        their text holds ``n_bytes`` bytes, at most ``n_bytes`` tokens (a token covers at least
        one byte of text); never a byte model's BOS.

        The continuation is decoded after the prompt's last ``CONTEXT_TOKENS`` tokens and their
        own text taken off, as the passkey papers compare (LongLoRA decodes the whole output):
        a SentencePiece decoder (Llama, Mistral: Metaspace, or a ``Strip`` of one leading space)
        drops the leading space of the first token it decodes, so the generated tokens decoded
        alone lose the space the standard answer starts with (" 48740")."""
        tokens, _ = self.encode(prompt)
        context = tokens[-CONTEXT_TOKENS:]
        head = self.decode(context)
        out: list[int] = []
        text = b""
        steps = self.greedy(tokens, pattern=pattern, cache=cache, kernel=kernel, text=True)
        while len(text) < n_bytes and len(out) < n_bytes:
            out.append(next(steps))
            text = after(head, self.decode(torch.cat((context, torch.tensor(out, dtype=torch.int64)))),
                         lambda: self.decode(torch.tensor(out, dtype=torch.int64)))
        steps.close()
        return text


#: prompt tokens decoded with a continuation (:meth:`_Base.continue_text`)
CONTEXT_TOKENS = 16


def after(head: bytes, whole: bytes, alone) -> bytes:
    """The text of a continuation: ``whole`` (context and continuation decoded together) less the
    context's own text ``head``; ``alone()`` (the continuation decoded by itself) in the rare case
    that ``whole`` does not start with ``head`` (a decoder that rewrites text across the seam)."""
    return whole[len(head):] if whole.startswith(head) else alone()


#: options of the analytic resolution without a model (a loaded model fixes them)
ANALYTIC_ONLY = "is only for the analytic form (no RUN_DIR or hf:PATH): a model fixes its shape, values and length"


class RunSubject(_Base):
    """A lexkit run directory: a byte-level :class:`lexkit.GPT` (one token per byte, BOS first)."""

    refuses = {
        "heads": ANALYTIC_ONLY, "head_dim": ANALYTIC_ONLY, "seed": ANALYTIC_ONLY, "train_len": ANALYTIC_ONLY,
        "rope_scaling": "is for hf: models (a run's RoPE scaling is --scheme rope:scaling=TYPE,factor=F)",
        "dtype": "is for hf: models",
    }

    text_tokens = 256  # BOS is not text

    def __init__(self, run_dir: str | Path, *, device: str = "cpu", scheme: str | None = None,
                 logn: bool | None = None, add: str | None = None) -> None:
        from ..training.runs import load as load_run

        self.source = str(run_dir)
        self.model, self.config = load_run(run_dir, device=device, scheme=scheme, logn=logn, add=add)

    @classmethod
    def of(cls, model: nn.Module, source: str = "model") -> RunSubject:
        """A byte model in memory (a :class:`lexkit.GPT` or any module with its ``cfg``,
        ``pattern`` and ``forward``) as a subject, without a run directory."""
        subject = cls.__new__(cls)
        subject.source, subject.model = source, model
        subject.config = {"model": {"train_len": model.cfg.train_len, "scheme": getattr(model.cfg, "scheme", None)}}
        return subject

    @property
    def train_len(self) -> int:
        return int(self.config["model"]["train_len"])

    def encode(self, text: bytes | str) -> tuple[Tensor, Tensor]:
        tokens = encode(text.encode("utf-8") if isinstance(text, str) else bytes(text))
        return tokens, torch.ones(tokens.numel() - 1, dtype=torch.int64)

    def decode(self, tokens: Tensor) -> bytes:
        return bytes(int(t) for t in tokens.flatten() if int(t) < 256)

    def default_lengths(self) -> list[int]:
        return default_lengths(self.train_len)

    def describe(self) -> dict:
        """``run``; ``label``, what a report calls the run (:data:`lexkit.instruments.IDENTITY`); on a run whose layers
        share one scheme, ``scheme`` (the resolved spec that ran, e.g. ReRoPE's w and YaRN's original_len,
        also its label) and ``trained_scheme`` when an evaluation ``--scheme`` changed it; on a run with a
        layout (never called a scheme), ``label`` the layout as typed, ``layout`` every layer as it ran and
        ``trained_layout`` the run's own when an evaluation ``--scheme`` changed it; ``logn``, ``train_len``."""
        from ..layouts import canonical

        config, model = self.config, self.model
        overrides = config.get("overrides", {})
        if model.cfg.layout is not None:
            named = {"label": model.cfg.label, "layout": canonical(model.layers),
                     **({"trained_layout": config["trained"].get("layout") or config["trained"]["scheme"]}
                        if "layout" in overrides else {})}
        else:
            one = model.scheme if model.scheme is not None or not model.uniform else model.layer_schemes[0]
            spec = one.spec if one is not None else model.cfg.label
            named = {"label": spec, "scheme": spec,
                     **({"trained_scheme": config["trained"]["scheme"]} if "scheme" in overrides else {})}
        return {
            "run": self.source, **named,
            "logn": bool(config["model"].get("logn", False)), "train_len": self.train_len,
            **({"random_positions": config["model"]["random_positions"]}
               if config["model"].get("random_positions") else {}),
        }

    def documents(self, data: str | None = None) -> tuple[list[bytes], dict]:
        """``data`` (see :func:`eval_documents`), or the run's own corpus's validation split (its
        fingerprint checked: a differing corpus is a warning, a moved one is found by it)."""
        run_data = self.config.get("data") or {}
        spec = data if data is not None else run_data.get("spec", "stdlib")
        own = data is None or _is_run_corpus(data, run_data)
        try:
            documents, described = eval_documents(spec, own=own)
        except DataError as exc:
            if data is None and "does not exist" in str(exc):
                raise DataError(f"the corpus {spec!r} recorded in {Path(self.source) / 'config.json'} does not exist "
                                "here; if it moved, give its new place with --data PATH (recognised by its "
                                "fingerprint)") from exc
            raise
        if data is not None and own:
            described["recorded_as"] = run_data.get("spec")  # the run's own corpus, moved: its validation split
        if data is None and run_data.get("fingerprint") and run_data["fingerprint"] != described["fingerprint"]:
            described["differs_from_run"] = True
            print(f"warning: corpus {spec!r} here differs from the one the run trained on "
                  f"({_short(run_data['fingerprint'])} there, {_short(described['fingerprint'])} here); "
                  f"its validation documents may differ", file=sys.stderr)
        return documents, described


class HFSubject(_Base):
    """A Hugging Face causal LM (:mod:`lexkit.model.hf`): tokens, not bytes; its positions are the
    model's own, applied before lexkit's attention."""

    refuses = {
        "scheme": "is for lexkit runs (an hf: model's RoPE scaling is --rope-scaling)",
        "logn": "is for lexkit runs: an hf: model keeps its own attention scaling",
        "add": "is for lexkit runs: an hf: model's layers are transformers' own",
        "heads": ANALYTIC_ONLY, "head_dim": ANALYTIC_ONLY, "seed": ANALYTIC_ONLY, "train_len": ANALYTIC_ONLY,
    }

    def __init__(self, path: str, *, device: str = "cpu", rope_scaling: dict | str | None = None,
                 dtype: str | None = None) -> None:
        from ..model import hf

        self.model = hf.load(path, rope_scaling=rope_scaling, dtype=dtype or "float32", device=device)
        self.source = self.model.source

    @property
    def train_len(self) -> int | None:
        return self.model.cfg.train_len

    def encode(self, text: bytes | str) -> tuple[Tensor, Tensor]:
        return self.model.encode(text)

    def decode(self, tokens: Tensor) -> bytes:
        return self.model.decode(tokens)

    def default_lengths(self) -> list[int]:
        """The training length x 1/2, 1, 2, 4 (from the config)."""
        if self.train_len is None:
            raise ValueError(f"{self.source}: the config gives no training length; pass --lengths")
        return [n for n in default_lengths(self.train_len) if n <= 4 * self.train_len]

    def describe(self) -> dict:
        """``run``, ``label`` (what a report calls the model: ``llama: rope (theta 10000)``, not a lexkit
        scheme spec), ``model`` (its :class:`~lexkit.model.hf.HFConfig`), ``train_len``; on a model whose layers
        differ, ``layout`` (every layer as lexkit writes a layout) and ``selectors`` (the names
        ``--pattern NAME=SPEC`` takes: its layer types, local, global)."""
        import dataclasses

        cfg = self.model.cfg
        out = {"run": self.source, "label": cfg.label, "model": dataclasses.asdict(cfg), "train_len": cfg.train_len}
        if cfg.layout is not None:
            names = self.model.selector_names
            out.update(layout=cfg.layout, selectors=list(dict.fromkeys(n for layer in names for n in layer)))
        return out

    def documents(self, data: str | None = None) -> tuple[list[bytes], dict]:
        return eval_documents(data or "stdlib")


def subject_class(target: str | Path) -> type[RunSubject] | type[HFSubject]:
    """The class of subject ``target`` names: ``hf:PATH`` or a run directory."""
    return HFSubject if str(target).startswith("hf:") else RunSubject


def load(target: str | Path, *, device: str = "cpu", scheme: str | None = None, logn: bool | None = None,
         rope_scaling: dict | str | None = None, dtype: str | None = None, add: str | None = None
         ) -> RunSubject | HFSubject:
    """The subject at ``target``: ``hf:PATH`` (a Hugging Face causal LM, :func:`lexkit.model.hf.load`)
    or a run directory (:func:`lexkit.training.runs.load`). ``scheme``/``logn`` evaluate a run's weights
    under another scheme or log-n setting, ``add`` with stateless layer modifiers added
    (``global=topk:4``); ``rope_scaling``/``dtype`` apply to hf: models. An option the kind cannot
    honour is a ValueError naming it."""
    subject_class(target).refuse(scheme=scheme, logn=logn, rope_scaling=rope_scaling, dtype=dtype, add=add)
    if subject_class(target) is HFSubject:
        return HFSubject(str(target), device=device, rope_scaling=rope_scaling, dtype=dtype)
    return RunSubject(target, device=device, scheme=scheme, logn=logn, add=add)


# -- the documents to measure on ------------------------------------------------------------------
def eval_documents(spec: str, *, own: bool = False) -> tuple[list[bytes], dict]:
    """The documents to evaluate on and a description of them. ``own=True`` (a run's own corpus,
    the default of ``lexkit eval``): its validation split. Otherwise (``--data SPEC``): the
    validation split of the built-in ``stdlib`` corpus, every document of anything else (a user
    path or an ``hf:`` dataset)."""
    from ..data.corpus import load_corpus

    split = "split" if own or spec == "stdlib" else "all"
    corpus = load_corpus(spec, split=split)
    return corpus.valid, {
        "spec": spec,
        "split": "validation" if split == "split" else "all",
        "fingerprint": corpus.fingerprint,
        "documents_available": len(corpus.valid),
    }


def _is_run_corpus(spec: str, run_data: dict) -> bool:
    """Whether ``--data SPEC`` points the run at its own training corpus, moved: the recorded
    place is gone and SPEC has the recorded fingerprint. Then its validation split is evaluated,
    as without --data (while the corpus is where it was, --data means all of SPEC's documents)."""
    from ..data.corpus import load_corpus, same_corpus

    recorded = run_data.get("spec") or "stdlib"
    if recorded == "stdlib" or recorded.startswith("hf:") or not run_data.get("fingerprint"):
        return False
    if os.path.exists(recorded) or glob.glob(recorded):
        return False
    return same_corpus(run_data["fingerprint"], load_corpus(spec, split="all").fingerprint)


def _short(fingerprint: dict) -> str:
    keys = ("python", "files", "bytes", "sha256")
    return ", ".join(f"{k} {fingerprint[k]}" for k in keys if k in fingerprint)
