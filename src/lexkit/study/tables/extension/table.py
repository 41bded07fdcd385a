"""Table E, context extension: the configurations of :mod:`.configurations` on every seed's
``rope`` run of the grid, evaluated with the study's protocol, and their fine-tunes at 4x."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ....instruments.evaluate.measure import evaluate
from ....training import runs
from ....training.runs.config import overridden
from ...plan import EVAL_VERSION, Bound, Cell, TableSettings, cell_unit, digest
from ...units import Cost, Unit, whole_or_none
from . import figures, queries, report
from .configurations import Finetune, Method, finetunes, methods
from .finetune import finetune, finetuned, trained_key
from .rows import KEY, Evaluated, ExtensionRow, ExtensionSection, Finetuned

#: steps of each fine-tune at 4x (``--extension-steps``) by the study's preset (None: any other): a
#: first look (``quick``) has the training-free methods alone (docs/study.md, what each knob costs)
FINETUNE_STEPS = {None: 60, "quick": 0}


@dataclasses.dataclass
class ExtensionSettings(TableSettings):
    """Table E's settings: ``on`` (``--no-extension``: no table E, nor its methods in table G) and
    the ``steps`` of each fine-tune at 4x the training length (``--extension-steps``; 0: no fine-tunes;
    None: :data:`FINETUNE_STEPS`' for the study's preset)."""

    on: bool = dataclasses.field(default=True, metadata={
        "help": "skip the context-extension table (RoPE scalings, ReRoPE, log-n, sinks, fine-tunes)"})
    steps: int | None = dataclasses.field(default=None, metadata={
        "type": int, "minimum": 0,
        "help": "steps of each fine-tune at 4x the training length in the context-extension table, 0 for none "
        "(default: 60; 0 in a study at the quick preset, whose table E has the training-free methods alone)"})

    def finetune_steps(self, study_preset: str) -> int:
        """The steps of each fine-tune in a study at ``study_preset`` (0: no fine-tunes)."""
        return FINETUNE_STEPS.get(study_preset, FINETUNE_STEPS[None]) if self.steps is None else self.steps

    def finetunes(self, train_len: int, study_preset: str) -> list[Finetune]:
        """The fine-tunes a study at ``study_preset`` trains (none at 0 steps)."""
        return finetunes(train_len) if self.finetune_steps(study_preset) else []

    def resolved(self, cfg) -> ExtensionSettings:
        """The fine-tune steps as a study of ``cfg`` runs them (:meth:`finetune_steps`)."""
        return dataclasses.replace(self, steps=self.finetune_steps(cfg.preset))


class ExtensionTable(Bound):
    """Table E (a :class:`~lexkit.study.plan.StudyTable`), run by the study's plan and cache."""

    key, Settings, row = KEY, ExtensionSettings, ExtensionSection
    blocks, figures, scalars = staticmethod(report.blocks), figures.FIGURES, staticmethod(queries.scalars)

    def steps(self) -> int:
        """Steps of each fine-tune (:meth:`ExtensionSettings.finetune_steps`; 0: none)."""
        return self.settings.finetune_steps(self.plan.cfg.preset)

    def finetunes(self) -> list[Finetune]:
        """The fine-tunes this study trains on each ``rope`` run (:meth:`ExtensionSettings.finetunes`)."""
        return self.settings.finetunes(self.plan.train_len(), self.plan.cfg.preset)

    def rope_cells(self) -> list[Cell]:
        """Every seed's ``rope`` run of the grid (none: the table is off)."""
        return [cell for cell in self.plan.cells() if cell.label == "rope"] if self.settings.on else []

    def run(self) -> ExtensionSection | None:
        """Each no-fine-tune method on every seed's ``rope`` run, and each fine-tune at 4x under its
        patterns, evaluated at the study's lengths with the study's protocol. None when ``rope`` is
        not a studied scheme or the comparison is switched off."""
        rope = self.rope_cells()
        if not rope:
            return None
        t, lengths = self.plan.train_len(), self.plan.lengths()
        rows = []
        for cell in rope:
            rows += [row for method in methods(t, max(lengths)) for row in self.method_rows(cell, method)]
            rows += [row for ft in self.finetunes() for row in self.finetune_rows(cell, ft)]
        return ExtensionSection(max(lengths) / t, finetunes(t)[0].train_len, self.steps(), rows)

    def method_rows(self, cell: Cell, method: Method) -> list[ExtensionRow]:
        base = self.cache.run_dir(cell)
        ev = self.cache.cached("extension", f"{cell.name} {method.label}", self.path(cell, method),
                               lambda: self.evaluate(runs.load(base, device=self.cache.device, scheme=method.scheme,
                                                               logn=method.logn)[0], [method.pattern]), Evaluated)
        return [ExtensionRow(method.label, method.scheme, ev.patterns[0], method.logn, None, cell.seed, ev.results)]

    def finetune_rows(self, cell: Cell, ft: Finetune) -> list[ExtensionRow]:
        tuned = finetune(self.cache, cell, ft, self.steps())
        ev = self.cache.cached("extension", tuned.run_dir.name, self.path(cell, ft, tuned.key), lambda: self.evaluate(
            runs.load(tuned.run_dir, device=self.cache.device)[0], list(ft.patterns)), Evaluated)
        how = Finetuned(str(tuned.run_dir.relative_to(self.cache.out)), ft.train_len, tuned.train_cfg.steps,
                        tuned.train_cfg.lr)
        return [ExtensionRow(ft.label, tuned.model_cfg.scheme, pattern, False, how, cell.seed,
                             [r for r in ev.results if r.pattern == pattern])
                for pattern in ev.patterns]

    def path(self, cell: Cell, what: Method | Finetune, key: str = "") -> Path:
        """Where one configuration's evaluation is cached."""
        digest_of = digest({"run": cell.key, "what": dataclasses.asdict(what), "ft": key,
                            "lengths": self.plan.lengths(), "docs": self.plan.cfg.eval_docs, "v": EVAL_VERSION})
        return self.cache.out / "cache" / f"extension-{digest_of}.json"

    def evaluate(self, model, patterns: list[str]) -> dict:
        return evaluate(model, self.plan.corpus.valid, self.plan.lengths(), patterns, max_docs=self.plan.cfg.eval_docs,
                        progress=self.cache.progress)

    def units(self) -> list[Unit]:
        """Table E's work, one unit per configuration on each seed's ``rope`` run (each needs that
        run's cell): a method evaluated without fine-tuning, or a fine-tune trained (``steps`` steps
        at 4x) and evaluated under its patterns; none when the table is off."""
        t, lengths, out = self.plan.train_len(), self.plan.lengths(), []
        for cell in self.rope_cells():
            needs = (cell_unit(cell),)
            for method in methods(t, max(lengths)):
                out.append(Unit(f"evaluate {cell.name} {method.label}", "evaluate", method.label, KEY,
                                lambda c=cell, m=method: self.method_rows(c, m),
                                lambda timer, c=cell, m=method: self.method_cost(timer, c, m), needs,
                                lambda c=cell, m=method: self.path(c, m).is_file(), {"seed": cell.seed}))
            for ft in self.finetunes():
                out.append(Unit(f"fine-tune {cell.name} {ft.label}", "fine-tune", ft.label, KEY,
                                lambda c=cell, f=ft: self.finetune_rows(c, f),
                                lambda timer, c=cell, f=ft: self.finetune_cost(timer, c, f), needs,
                                lambda c=cell, f=ft: self.finetune_done(c, f),
                                {"seed": cell.seed, "steps": self.steps()}))
        return out

    def method_cost(self, timer, cell: Cell, method: Method) -> Cost:
        """One method's evaluation, timed under the method's own scheme, log-n and pattern."""
        model_cfg = overridden(cell.model_cfg, method.scheme, method.logn)
        seconds = timer.evaluation(model_cfg, self.plan.corpus.valid, self.plan.lengths(), [method.pattern])
        return whole_or_none(seconds * self.plan.eval_documents(), self.path(cell, method).is_file())

    def finetune_cost(self, timer, cell: Cell, ft: Finetune) -> Cost:
        """A fine-tune's steps, timed at its length and scheme, and its evaluation under its patterns."""
        model_cfg, train_cfg = finetuned(cell.model_cfg, cell.train_cfg, ft, self.steps())
        train = timer.step(model_cfg, train_cfg) * train_cfg.steps
        ev = timer.evaluation(model_cfg, self.plan.corpus.valid, self.plan.lengths(), list(ft.patterns),
                              train_len=self.plan.train_len()) * self.plan.eval_documents()
        return whole_or_none(train + ev, self.finetune_done(cell, ft), train_s=train, eval_s=ev)

    def finetune_done(self, cell: Cell, ft: Finetune) -> bool:
        """Whether a fine-tune's evaluation is cached (its parent trained first: its key reads it)."""
        key = trained_key(self.cache, cell, ft, self.steps())
        return key is not None and self.path(cell, ft, key).is_file()
