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

Under ``torchrun`` (N processes, any number of nodes sharing DIR) rank r trains and evaluates cells
r, r + N, r + 2N, ... on its own device; rank 0 then waits until every other cell's run and cache
files exist (no collective: a cell may take hours) and writes the report from the cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from . import __version__, distributed, lock, positions, presets, provenance, runs, study_retrieval
from .attention import create as create_pattern
from .data import Corpus, load_corpus
from .device import resolve_device
from .evaluate import default_lengths, evaluate
from .extension import finetunes, methods
from .principles import measure_principles
from .resolution import analytic, analytic_curve, empirical, texts, to_json
from .train import configs, configs_from_run, device_autocast, make_optimizer, train, train_step

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
    extension: bool = True  # the context-extension comparison on the rope run (lexkit.extension)
    extension_steps: int = 60  # steps of each fine-tune at 4x the training length
    retrieval: bool = True  # table G, use of context (lexkit.study_retrieval)
    retrieval_steps: int = 2000  # training steps of each run with the retrieval mix
    retrieval_preset: str = "quick"  # the size of those runs (the measured recipe's)
    retrieval_samples: int = 10  # needle documents per (length, depth) in table G

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
        presets.get(self.retrieval_preset)  # an unknown preset fails now
        for key in ("eval_docs", "resolution_texts", "extension_steps", "retrieval_steps", "retrieval_samples"):
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
    prefix: str = ""  # "mix-": a run of table G, trained with the retrieval mix

    @property
    def name(self) -> str:
        return f"{self.prefix}{slug(self.scheme)}-s{self.seed}-{self.key}"


class Study:
    #: seconds between looks at the cache while rank 0 waits for the other ranks' cells
    POLL = 2.0

    def __init__(self, cfg: StudyConfig, out: str | Path, *, progress: bool = True,
                 echo: Callable[[str], None] | None = print, world: distributed.World | None = None) -> None:
        self.world = world or distributed.world()
        self.cfg, self.out, self.progress = cfg, Path(out), progress and self.world.is_main
        self.echo = echo or (lambda _msg: None)
        self.device = cfg.device
        self._gathering = False
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
                model_cfg, train_cfg = configs(self.cfg.preset, scheme, seed=seed, steps=self.cfg.steps,
                                               data=self.cfg.data)
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

    def patterns(self, train_len: int | None = None) -> list[str]:
        """The study's patterns resolved for a model trained at ``train_len`` (default: the study's)."""
        t = train_len or self.train_len()
        return _unique([create_pattern(p, default_window=t).spec for p in self.cfg.patterns])

    # -- run ----------------------------------------------------------------------------------
    def _log(self, task: str, name: str, action: str, seconds: float) -> None:
        if self._gathering:
            return
        entry = {"task": task, "name": name, "action": action, "seconds": round(seconds, 2)}
        if self.world.parallel:
            entry["rank"] = self.world.rank
        self.record.append(entry)
        with open(self.out / "log.jsonl", "a") as handle:
            handle.write(json.dumps(entry) + "\n")

    def cached(self, task: str, name: str, path: Path, compute: Callable[[], dict]) -> dict:
        if path.is_file():
            self._log(task, name, "cached", 0.0)
            return json.loads(path.read_text())
        start = time.perf_counter()
        result = compute()
        runs.write_json(path, result)
        self._log(task, name, "ran", time.perf_counter() - start)
        return result

    def run(self) -> dict:
        """Every cell (this rank's share under torchrun), then, on rank 0, results.json, the
        report and its figures. One process writes a study directory at a time (its lock); under
        torchrun the ranks share it, each run directory locked by the rank training it."""
        with lock.hold(self.out) if not self.world.parallel else nullcontext():
            return self._run()

    def _run(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "cache").mkdir(exist_ok=True)
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        self.device = str(distributed.rank_device(self.cfg.device, self.world))
        started = time.perf_counter()
        dtype = "bfloat16" if self.device.startswith("cuda") else "float32"  # the trainer's autocast
        origin = provenance.collect(self.world, self.device, dtype)
        cells = self.cells()
        mine = cells[self.world.rank :: self.world.size]
        who = f"rank {self.world.rank}: " if self.world.parallel else ""
        done = {}
        for cell in mine:
            self.echo(f"{who}[{cells.index(cell) + 1}/{len(cells)}] {cell.scheme} (seed {cell.seed})")
            try:
                done[cell.name] = self.run_cell(cell)
            except distributed.USER_ERRORS as exc:
                if not self.world.parallel:
                    raise
                raise distributed.LocalError(f"rank {self.world.rank}: {cell.name}: {exc}") from exc
        if not self.world.is_main:
            return {"rank": self.world.rank, "cells": [cell.name for cell in mine]}
        self.wait_for([cell for cell in cells if cell.name not in done])
        self._gathering = True  # the other ranks' cells: read from the cache, not logged as work
        rows = [done[cell.name] if cell.name in done else self.run_cell(cell) for cell in cells]
        self._gathering = False
        analytic_rows = self.analytic()
        curves = self.analytic_curves()
        extension = self.extension()
        retrieval = study_retrieval.run(self)
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
            "extension": extension,
            **({"retrieval": retrieval} if retrieval is not None else {}),
            "wall_seconds": round(time.perf_counter() - started, 1),
            "work": {a: sum(1 for r in self.record if r["action"] == a) for a in ("ran", "cached")},
            "provenance": {**origin, "finished": provenance.now(),
                           "wall_seconds": round(time.perf_counter() - started, 1)},
        }
        runs.write_json(self.out / "results.json", results)
        from .report import write_report

        write_report(results, self.out)  # report.md, report.html, results.csv and the figures
        return results

    def wait_for(self, cells: list[Cell]) -> None:
        """Return once every cell's run is finished and its evaluations are cached (the other
        ranks' work, seen through the shared directory)."""
        pending = [cell for cell in cells if not self.finished(cell)]
        if pending:
            self.echo(f"rank 0: waiting for {len(pending)} cell(s) from the other ranks")
        while pending:
            time.sleep(self.POLL)
            pending = [cell for cell in pending if not self.finished(cell)]

    def finished(self, cell: Cell) -> bool:
        state = runs.trainer_state(self.out / "runs" / cell.name) or {}
        return bool(state.get("done") and state["step"] >= cell.train_cfg.steps
                    and all(path.is_file() for path in self.cache_paths(cell).values()))

    def cache_paths(self, cell: Cell) -> dict[str, Path]:
        """Where a cell's evaluation, empirical resolution and principles are cached."""
        eval_key = digest({"run": cell.key, "lengths": self.lengths(), "patterns": self.patterns(),
                           "docs": self.cfg.eval_docs, "v": EVAL_VERSION})
        res_key = digest({"run": cell.key, "lengths": self.resolution_lengths(), "patterns": self.patterns(),
                          "texts": self.cfg.resolution_texts, "v": EVAL_VERSION})
        pr_key = digest({"run": cell.key, "v": EVAL_VERSION})
        cache = self.out / "cache"
        return {"eval": cache / f"eval-{eval_key}.json", "resolution": cache / f"resolution-{res_key}.json",
                "principles": cache / f"principles-{pr_key}.json"}

    def trained(self, run_dir: Path, model_cfg, train_cfg, *, init: Path | None = None) -> None:
        """Train ``run_dir`` to its last step: nothing if it is done, resumed if it was
        interrupted, from scratch (or from ``init``'s weights) otherwise."""
        state = runs.trainer_state(run_dir) or {}
        start = time.perf_counter()
        if state.get("done") and state["step"] >= train_cfg.steps:
            self._log("train", run_dir.name, "cached", 0.0)
            return
        resume = (run_dir / runs.CONFIG).is_file()
        if run_dir.exists() and not resume:  # a run killed before its first write
            for child in run_dir.iterdir():
                child.unlink()
        train(run_dir, model_cfg, train_cfg, resume=resume, device=self.device, progress=self.progress,
              corpus=self.corpus, world=distributed.SINGLE, init=None if resume else init)
        self._log("train", run_dir.name, "ran", time.perf_counter() - start)

    def run_cell(self, cell: Cell) -> dict:
        run_dir = self.out / "runs" / cell.name
        self.trained(run_dir, cell.model_cfg, cell.train_cfg)
        model, config = runs.load(run_dir, device=self.device)
        metrics = runs.read_metrics(run_dir)
        val = [r["val_bpb"] for r in metrics if "val_bpb" in r]
        train_seconds = (runs.trainer_state(run_dir) or {}).get("elapsed")

        lengths, patterns, paths = self.lengths(), self.patterns(), self.cache_paths(cell)
        ev = self.cached("eval", cell.name, paths["eval"], lambda: evaluate(
            model, self.corpus.valid, lengths, patterns, max_docs=self.cfg.eval_docs, progress=self.progress))
        res = self.cached("resolution", cell.name, paths["resolution"],
                           lambda: self.empirical(model, self.resolution_lengths(), patterns))
        principles = self.cached("principles", cell.name, paths["principles"],
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

    # -- context extension --------------------------------------------------------------------
    def extension(self) -> dict | None:
        """The context-extension comparison (:mod:`lexkit.extension`) on every seed's ``rope``
        run: each no-fine-tune method, and each fine-tune at 4x under its patterns, evaluated at
        the study's lengths with the study's protocol. None when ``rope`` is not a studied scheme
        or the comparison is switched off."""
        rope = [cell for cell in self.cells() if cell.scheme == "rope"]
        if not self.cfg.extension or not rope:
            return None
        t, lengths = self.train_len(), self.lengths()
        rows = []
        for cell in rope:
            base = self.out / "runs" / cell.name
            for method in methods(t, max(lengths)):
                ev = self.cached("extension", f"{cell.name} {method.label}", self._extension_path(cell, method),
                                  lambda m=method, b=base: self._evaluate(
                                      runs.load(b, device=self.device, scheme=m.scheme, logn=m.logn)[0], [m.pattern]))
                rows.append({"label": method.label, "scheme": method.scheme, "pattern": ev["patterns"][0],
                             "logn": method.logn, "finetune": None, "seed": cell.seed, "results": ev["results"]})
            for ft in finetunes(t):
                model_cfg, train_cfg, key = self.finetune(cell, ft)
                steps = train_cfg.steps
                run_dir = self.out / "runs" / f"{cell.name}-ft-{slug(ft.scheme)}-{key}"
                self.trained(run_dir, model_cfg, train_cfg, init=base)
                ev = self.cached("extension", f"{run_dir.name}", self._extension_path(cell, ft, key),
                                  lambda d=run_dir, f=ft: self._evaluate(runs.load(d, device=self.device)[0],
                                                                         list(f.patterns)))
                for pattern in ev["patterns"]:
                    rows.append({"label": ft.label, "scheme": model_cfg.scheme, "pattern": pattern, "logn": False,
                                 "finetune": {"run": str(run_dir.relative_to(self.out)), "train_len": ft.train_len,
                                              "steps": steps, "lr": train_cfg.lr},
                                 "seed": cell.seed, "results": [r for r in ev["results"] if r["pattern"] == pattern]})
        return {"factor": max(lengths) / t, "finetune_len": finetunes(t)[0].train_len,
                "finetune_steps": self.cfg.extension_steps, "rows": rows}

    def finetune(self, cell: Cell, ft) -> tuple[Any, Any, str]:
        """The configs of one context-extension fine-tune of ``cell``'s run and its cache key. It
        checkpoints like any run (4 times), so an interrupted study resumes it where it
        stopped; the key leaves the checkpoint interval out (it does not change the run), so a
        study cached before keeps its fine-tunes."""
        steps = self.cfg.extension_steps
        base = self.out / "runs" / cell.name
        model_cfg, train_cfg = configs_from_run(
            base, scheme=ft.scheme, train_len=ft.train_len, steps=steps, warmup=max(1, steps // 10),
            eval_every=steps, save_every=max(1, -(-steps // 4)))
        key = digest({"parent": cell.key, "model": dataclasses.asdict(model_cfg),
                      "train": dataclasses.asdict(dataclasses.replace(train_cfg, save_every=steps))})
        return model_cfg, train_cfg, key

    def _extension_path(self, cell: Cell, what, key: str = "") -> Path:
        digest_of = digest({"run": cell.key, "what": dataclasses.asdict(what), "ft": key, "lengths": self.lengths(),
                            "docs": self.cfg.eval_docs, "v": EVAL_VERSION})
        return self.out / "cache" / f"extension-{digest_of}.json"

    def _evaluate(self, model, patterns: list[str]) -> dict:
        return evaluate(model, self.corpus.valid, self.lengths(), patterns, max_docs=self.cfg.eval_docs,
                        progress=self.progress)

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
        rows, shape, lengths = [], self._shape(), self.resolution_lengths()
        for spec in self.cfg.schemes:
            for pattern in self.patterns():
                for row in analytic(spec, lengths, pattern, **shape)["results"]:
                    rows.append({"scheme": spec, "pattern": pattern, "length": row["length"],
                                 "resolution": row["resolution"]})
        return rows

    def analytic_curves(self) -> dict:
        """The analytic s[n] - s[0] (mean over heads, causal) of every scheme at min(4x the
        training length, the longest length): the curves the report plots. A scheme undefined
        at that length (``learned`` past its table) is left out."""
        n = min(4 * self.train_len(), max(self.lengths()))
        curves, shape = {}, self._shape()
        for spec in self.cfg.schemes:
            try:
                s = analytic_curve(spec, n, **shape).mean(0)  # [n]
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
        extension = self.extension_plan(per_scheme.get("rope"))
        total += sum(task["seconds"] for task in extension)
        per_step, per_token = self.retrieval_costs(device)
        retrieval = study_retrieval.plan(self, per_step, per_token) if per_step is not None else []
        total += sum(task["seconds"] for task in retrieval)
        done = {c.name for c in cells if (self.out / "runs" / c.name / runs.CHECKPOINT).is_file()}
        return {"cells": [{"scheme": c.scheme, "seed": c.seed, "run": c.name, "exists": c.name in done} for c in cells],
                "lengths": lengths, "patterns": patterns, "per_scheme": per_scheme, "extension": extension,
                "retrieval": retrieval, "total_s": total}

    def retrieval_costs(self, device) -> tuple[float | None, float | None]:
        """Seconds of one training step of table G's runs (the median of three after a warm-up
        step, at the recipe's batch) and of one token of their forward pass at 16x; (None, None)
        when table G is off."""
        from .device import eval_mode
        from .model import GPT

        found = study_retrieval.cells(self) if self.cfg.retrieval else []
        if not found:
            return None, None
        cell = found[0]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = GPT(cell.model_cfg).to(device)
            x = torch.randint(0, 256, (cell.train_cfg.batch, cell.model_cfg.train_len), device=device)
            n = max(study_retrieval.MULTIPLES) * cell.model_cfg.train_len
            probe = torch.randint(0, 256, (1, n), device=device)
        optimizer = make_optimizer(model, cell.train_cfg)
        times = []
        for _ in range(4):
            t0 = time.perf_counter()
            train_step(model, optimizer, x, x, grad_clip=cell.train_cfg.grad_clip, autocast=device_autocast(device))
            times.append(time.perf_counter() - t0)
        with eval_mode(model), torch.no_grad():
            t0 = time.perf_counter()
            model(probe)
            per_token = (time.perf_counter() - t0) / n
        return sorted(times[1:])[1], per_token

    def extension_plan(self, rope: dict | None) -> list[dict]:
        """The context-extension table's tasks (table E), one per seed of ``rope``: each method
        evaluated without fine-tuning, and each fine-tune (``extension_steps`` steps at 4x the
        training length) then evaluated under its patterns; empty when the table is off or
        ``rope`` is not studied. ``rope``: its measured ``train_s``/``eval_s``, which the
        seconds scale (a fine-tune step costs about 4x a training step, by tokens; one
        evaluation costs the study's per-pattern one)."""
        if not self.cfg.extension or rope is None:
            return []
        t, cell = self.train_len(), next(c for c in self.cells() if c.scheme == "rope")
        per_eval = rope["eval_s"] / len(self.patterns())
        per_step = rope["train_s"] / cell.train_cfg.steps
        tasks = [{"kind": "evaluate", "label": m.label, "seconds": per_eval} for m in methods(t, max(self.lengths()))]
        tasks += [{"kind": "fine-tune", "label": ft.label, "steps": self.cfg.extension_steps,
                   "seconds": per_step * ft.train_len / t * self.cfg.extension_steps + per_eval * len(ft.patterns)}
                  for ft in finetunes(t)]
        return [dict(task, seed=seed) for seed in range(self.cfg.seeds) for task in tasks]
