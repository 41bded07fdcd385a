"""The study: train each scheme at a short length, evaluate every (scheme, pattern, length),
measure attention resolution (analytic and empirical) and the design principles, write a report.

Every unit of work is cached in the study directory under a hash of its full config::

    DIR/runs/<scheme>-s<seed>-<hash>/        a training run (resumed if interrupted)
    DIR/cache/eval-<hash>.json               perplexity by length and pattern, loss by position
    DIR/cache/resolution-<hash>.json         empirical resolution and entropy per layer
    DIR/cache/principles-<hash>.json         order variance, translation invariance
    DIR/log.jsonl                            one line per task and whether it ran or was cached

so a re-run does nothing that is done, an interrupted study resumes where it stopped, and adding
a scheme trains only that scheme. The report is rebuilt from the cache every time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path
from typing import Any, Callable

import torch

from . import __version__, positions, runs
from .attention import create as create_pattern
from .data import Corpus, load_corpus
from .device import resolve_device
from .evaluate import default_lengths, evaluate
from .principles import measure_principles
from .resolution import analytic, analytic_curve, empirical, texts, to_json
from .train import configs, device_autocast, make_optimizer, train, train_step

DEFAULT_SCHEMES = [
    "none", "sinusoidal", "rope", "xpos", "xpos:rotate=false", "alibi", "kerple-log", "kerple-power", "sandwich",
]
DEFAULT_PATTERNS = ["causal", "window", "bca"]
#: 2: ``analytic_curves`` (the analytic s[n] the report plots) is stored in results.json
SCHEMA_VERSION = 2
#: bump when the meaning of a cached evaluation changes (invalidates eval/resolution caches)
EVAL_VERSION = 1


@dataclasses.dataclass
class StudyConfig:
    preset: str = "small"
    schemes: list[str] = dataclasses.field(default_factory=lambda: list(DEFAULT_SCHEMES))
    patterns: list[str] = dataclasses.field(default_factory=lambda: list(DEFAULT_PATTERNS))
    lengths: list[int] | None = None  # default: the training length x 1/2, 1, 2, 4, 8, 16
    seeds: int = 1
    data: str = "stdlib"
    steps: int | None = None  # override the preset's training steps
    eval_docs: int = 24  # validation documents per length (bytes scored = eval_docs x max(lengths))
    resolution_texts: int = 4
    device: str = "auto"
    threads: int | None = None

    def __post_init__(self) -> None:
        if not self.schemes:
            raise ValueError("a study needs at least one --scheme")
        if not self.patterns:
            raise ValueError("a study needs at least one --pattern")
        self.schemes = _unique([positions.canonical(s) for s in self.schemes])
        for p in self.patterns:  # validate now (W resolved per model later)
            create_pattern(p, default_window=2)
        if self.seeds <= 0:
            raise ValueError(f"--seeds must be a positive integer, got {self.seeds}")
        for key in ("eval_docs", "resolution_texts"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be a positive integer, got {getattr(self, key)}")


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in spec)


@dataclasses.dataclass
class Cell:
    """One training run of the study: a scheme and a seed."""

    scheme: str
    seed: int
    model_cfg: Any
    train_cfg: Any
    key: str

    @property
    def name(self) -> str:
        return f"{slug(self.scheme)}-s{self.seed}-{self.key}"


class Study:
    def __init__(self, cfg: StudyConfig, out: str | Path, *, progress: bool = True,
                 echo: Callable[[str], None] | None = print) -> None:
        self.cfg, self.out, self.progress = cfg, Path(out), progress
        self.echo = echo or (lambda _msg: None)
        self._corpus: Corpus | None = None
        self.record: list[dict] = []

    # -- plan ---------------------------------------------------------------------------------
    @property
    def corpus(self) -> Corpus:
        if self._corpus is None:
            self._corpus = load_corpus(self.cfg.data)
        return self._corpus

    def cells(self) -> list[Cell]:
        out = []
        for scheme in self.cfg.schemes:
            for seed in range(self.cfg.seeds):
                model_cfg, train_cfg = configs(self.cfg.preset, scheme, seed=seed, steps=self.cfg.steps, data=self.cfg.data)
                key = digest({"model": dataclasses.asdict(model_cfg), "train": dataclasses.asdict(train_cfg),
                              "data": self.corpus.fingerprint})
                out.append(Cell(model_cfg.scheme, seed, model_cfg, train_cfg, key))
        return out

    def train_len(self) -> int:
        return configs(self.cfg.preset, "none")[0].train_len

    def lengths(self) -> list[int]:
        return sorted(set(self.cfg.lengths)) if self.cfg.lengths else default_lengths(self.train_len())

    def resolution_lengths(self) -> list[int]:
        t = self.train_len()
        return sorted({n for n in (t, 2 * t, 4 * t, max(self.lengths())) if n <= max(self.lengths())} | {t})

    def patterns(self) -> list[str]:
        return _unique([create_pattern(p, default_window=self.train_len()).spec for p in self.cfg.patterns])

    # -- run ----------------------------------------------------------------------------------
    def _log(self, task: str, name: str, action: str, seconds: float) -> None:
        entry = {"task": task, "name": name, "action": action, "seconds": round(seconds, 2)}
        self.record.append(entry)
        with open(self.out / "log.jsonl", "a") as handle:
            handle.write(json.dumps(entry) + "\n")

    def _cached(self, task: str, name: str, path: Path, compute: Callable[[], dict]) -> dict:
        if path.is_file():
            self._log(task, name, "cached", 0.0)
            return json.loads(path.read_text())
        start = time.perf_counter()
        result = compute()
        runs.write_json(path, result)
        self._log(task, name, "ran", time.perf_counter() - start)
        return result

    def run(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "cache").mkdir(exist_ok=True)
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        resolve_device(self.cfg.device)
        started = time.perf_counter()
        cells = self.cells()
        rows = []
        for index, cell in enumerate(cells, 1):
            self.echo(f"[{index}/{len(cells)}] {cell.scheme} (seed {cell.seed})")
            rows.append(self.run_cell(cell))
        analytic_rows = self.analytic()
        curves = self.analytic_curves()
        results = {
            "schema": SCHEMA_VERSION,
            "lexkit": __version__,
            "torch": torch.__version__,
            "config": dataclasses.asdict(self.cfg),
            "train_len": self.train_len(),
            "lengths": self.lengths(),
            "patterns": self.patterns(),
            "resolution_lengths": self.resolution_lengths(),
            "data": {"spec": self.corpus.spec, "fingerprint": self.corpus.fingerprint},
            "model": {k: v for k, v in dataclasses.asdict(cells[0].model_cfg).items() if k != "scheme"},
            "params": runs.build_model({"model": dataclasses.asdict(cells[0].model_cfg)}).num_params(),
            "train": {k: v for k, v in dataclasses.asdict(cells[0].train_cfg).items() if k != "seed"},
            "runs": rows,
            "analytic": analytic_rows,
            "analytic_curves": curves,
            "wall_seconds": round(time.perf_counter() - started, 1),
            "work": {a: sum(1 for r in self.record if r["action"] == a) for a in ("ran", "cached")},
        }
        runs.write_json(self.out / "results.json", results)
        from .plots import report_figures
        from .report import write_report

        write_report(results, self.out)
        report_figures(results, self.out)
        return results

    def run_cell(self, cell: Cell) -> dict:
        run_dir = self.out / "runs" / cell.name
        state = runs.trainer_state(run_dir) or {}
        done = state.get("done") and state["step"] >= cell.train_cfg.steps
        start = time.perf_counter()
        if done:
            self._log("train", cell.name, "cached", 0.0)
        else:
            resume = (run_dir / runs.CONFIG).is_file()
            if run_dir.exists() and not resume:  # a run killed before its first write
                for child in run_dir.iterdir():
                    child.unlink()
            train(run_dir, cell.model_cfg, cell.train_cfg, resume=resume, device=self.cfg.device,
                  progress=self.progress, corpus=self.corpus)
            self._log("train", cell.name, "ran", time.perf_counter() - start)
        model, config = runs.load(run_dir, device=str(resolve_device(self.cfg.device)))
        metrics = runs.read_metrics(run_dir)
        val = [r["val_bpb"] for r in metrics if "val_bpb" in r]
        train_seconds = (runs.trainer_state(run_dir) or {}).get("elapsed")

        lengths, patterns = self.lengths(), self.patterns()
        eval_key = digest({"run": cell.key, "lengths": lengths, "patterns": patterns, "docs": self.cfg.eval_docs, "v": EVAL_VERSION})
        ev = self._cached("eval", cell.name, self.out / "cache" / f"eval-{eval_key}.json", lambda: evaluate(
            model, self.corpus.valid, lengths, patterns, max_docs=self.cfg.eval_docs, progress=self.progress))

        res_lengths = self.resolution_lengths()
        res_key = digest({"run": cell.key, "lengths": res_lengths, "patterns": patterns,
                          "texts": self.cfg.resolution_texts, "v": EVAL_VERSION})
        res = self._cached("resolution", cell.name, self.out / "cache" / f"resolution-{res_key}.json",
                           lambda: self.empirical(model, res_lengths, patterns))

        pr_key = digest({"run": cell.key, "v": EVAL_VERSION})
        principles = self._cached("principles", cell.name, self.out / "cache" / f"principles-{pr_key}.json",
                                  lambda: measure_principles(model, self.corpus.valid))
        return {
            "scheme": cell.scheme, "seed": cell.seed, "run": str(run_dir.relative_to(self.out)),
            "family": positions.get(cell.scheme.split(":")[0]).family,
            "relative": positions.get(cell.scheme.split(":")[0]).relative,
            "final_loss": metrics[-1]["loss"] if metrics else None, "val_bpb": val[-1] if val else None,
            "train_seconds": train_seconds,
            "eval": {"results": ev["results"], "by_position": ev["by_position"], "documents": ev["documents"],
                     "bytes_per_document": ev["bytes_per_document"]},
            "resolution": res,
            "principles": principles,
        }

    def empirical(self, model, lengths: list[int], patterns: list[str]) -> list[dict]:
        rows = []
        for n in lengths:
            try:
                toks = texts(self.corpus.valid, n, self.cfg.resolution_texts)
            except ValueError:
                continue
            for pattern in patterns:
                try:
                    row = to_json(empirical(model, toks, pattern))
                except ValueError as exc:  # learned past its table
                    row = {"length": n, "pattern": pattern, "resolution": None, "note": str(exc)}
                rows.append(row)
        return rows

    def _shape(self) -> dict:
        """The study's model shape, as the resolution instrument takes it (initial values under
        seed 0, the random state of the process untouched)."""
        cfg = self.cells()[0].model_cfg
        return {"heads": cfg.n_heads, "head_dim": cfg.head_dim, "seed": 0, "max_len": cfg.max_len or cfg.train_len}

    def analytic(self) -> list[dict]:
        """Analytic R before training: each scheme as initialised under seed 0, at the study's
        model shape, for every pattern and resolution length (the resolution instrument's own
        :func:`~lexkit.resolution.analytic`)."""
        rows = []
        for spec in self.cfg.schemes:
            for pattern in self.patterns():
                for row in analytic(spec, self.resolution_lengths(), pattern, **self._shape())["results"]:
                    rows.append({"scheme": spec, "pattern": pattern, "length": row["length"],
                                 "resolution": row["resolution"]})
        return rows

    def analytic_curves(self) -> dict:
        """The analytic s[n] - s[0] (mean over heads, causal) of every scheme at min(4x the
        training length, the longest length): the curves the report plots. A scheme undefined
        at that length (``learned`` past its table) is left out."""
        n = min(4 * self.train_len(), max(self.lengths()))
        curves = {}
        for spec in self.cfg.schemes:
            try:
                s = analytic_curve(spec, n, **self._shape()).mean(0)  # [n]
            except ValueError:
                continue
            curves[spec] = (s - s[0]).tolist()
        return {"length": n, "pattern": "causal", "curves": curves}

    # -- dry run ------------------------------------------------------------------------------
    def estimate(self) -> dict:
        """The cells, and a time estimate from a short measurement on this machine: the
        trainer's own :func:`~lexkit.train.train_step`, 4 steps per scheme (the first is warm-up;
        the median of the other three counts), and evaluation from one forward pass at the
        longest length."""
        from .device import eval_mode
        from .model import GPT

        device = resolve_device(self.cfg.device)
        cells = self.cells()
        lengths, patterns = self.lengths(), self.patterns()
        per_scheme = {}
        for scheme in self.cfg.schemes:
            cell = next(c for c in cells if c.scheme == scheme)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                model = GPT(cell.model_cfg).to(device)
                x = torch.randint(0, 256, (cell.train_cfg.batch, cell.model_cfg.train_len), device=device)
                n = max(lengths)
                probe = torch.randint(0, 256, (1, n), device=device)
            optimizer = make_optimizer(model, cell.train_cfg)
            step_times = []
            for _ in range(4):
                t0 = time.perf_counter()
                train_step(model, optimizer, x, x, grad_clip=cell.train_cfg.grad_clip, autocast=device_autocast(device))
                step_times.append(time.perf_counter() - t0)
            train_s = sorted(step_times[1:])[1] * cell.train_cfg.steps
            with eval_mode(model), torch.no_grad():
                t0 = time.perf_counter()
                try:
                    model(probe)
                except ValueError:
                    pass
                forward = time.perf_counter() - t0
            eval_s = forward * self.cfg.eval_docs * len(lengths) * len(patterns) * 1.3
            per_scheme[scheme] = {"train_s": train_s, "eval_s": eval_s}
        total = sum(v["train_s"] + v["eval_s"] for v in per_scheme.values()) * self.cfg.seeds
        done = {c.name for c in cells if (self.out / "runs" / c.name / runs.CHECKPOINT).is_file()}
        return {"cells": [{"scheme": c.scheme, "seed": c.seed, "run": c.name, "exists": c.name in done} for c in cells],
                "lengths": lengths, "patterns": patterns, "per_scheme": per_scheme, "total_s": total}
