"""The study: train each scheme at a short length, evaluate every (scheme, pattern, length),
measure attention resolution (analytic and empirical) and the design principles, write a report.

Every unit of work is cached in the study directory under a hash of its full config::

    DIR/runs/<scheme>-s<seed>-<hash>/        a training run (resumed if interrupted)
    DIR/cache/eval-<hash>.json               perplexity by length and pattern, loss by position
    DIR/cache/resolution-<hash>.json         empirical resolution and entropy per layer
    DIR/cache/principles-<hash>.json         order variance, translation invariance
    DIR/cache/extension-<hash>.json          a context-extension configuration (table E)
    DIR/runs/<run>-ft-<scheme>-<hash>/       a fine-tune of a run (tables E and G)
    DIR/runs/mix-<scheme>-s0-<hash>/         a run of table G, trained with the retrieval mix
    DIR/cache/retrieval-<hash>.json          a table-G configuration's retrieval and bpb
    DIR/log.jsonl                            one line per task and whether it ran or was cached

so a re-run does nothing that is done, an interrupted study resumes where it stopped, and adding
a scheme trains only that scheme. The report is rebuilt from the cache every time.

Its work is a list of units (:mod:`~lexkit.study.units`: each cell, each of table E's methods and
fine-tunes, each of table G's runs and scorings), run in one process or over ``jobs`` worker
processes at one thread each (:mod:`~lexkit.study.workers`), each once what it needs is done; under
``torchrun`` (N processes, any number of nodes sharing DIR) rank r runs units r, r + N, ..., waiting
through the shared directory for what a unit needs from another rank (no collective: a unit may take
hours); rank 0 then writes the report from the cache.

The package, one job per module: :mod:`~lexkit.study.plan` (configuration, cells, lengths,
cache keys, and :class:`~lexkit.study.plan.StudyTable`, the interface of the tables beside the grid,
with their :class:`~lexkit.study.plan.TableSettings`), :mod:`~lexkit.study.cache` (the cache and
its log), :mod:`~lexkit.study.execution` (the :class:`Study`, which owns a plan, a cache and its
tables, and runs its units locally, over workers and under torchrun), :mod:`~lexkit.study.units`
(a unit of work and its cost), :mod:`~lexkit.study.workers` (the worker processes and the study's
progress bar), :mod:`~lexkit.study.schedule` (units over N workers: order, makespan),
:mod:`~lexkit.study.estimate` (the dry run's time estimate, each unit timed by what it runs),
:mod:`~lexkit.study.recipe` (table G's training recipe, per preset), :mod:`~lexkit.study.summary`
(the README's block, ``lexkit study --readme``), :mod:`~lexkit.study.tables`
(one folder per table: ``extension/``, table E; ``retrieval/``, table G;
:data:`~lexkit.study.tables.TABLES` in report order) and :mod:`~lexkit.study.sweep` (``lexkit
sweep``: a study of table G alone, its rows a config file's arms). What a study writes is typed:
:class:`lexkit.study.schema.StudyResults`, read by :func:`read`; :func:`write_report` writes its report
(importing this package registers its tables, so both take them in).
"""

from .execution import Study
from .plan import (
    DEFAULT_LAYOUTS,
    DEFAULT_PATTERNS,
    DEFAULT_SCHEMES,
    EVAL_VERSION,
    SCHEMA_VERSION,
    Cell,
    StudyConfig,
    StudyTable,
    TableSettings,
    digest,
    slug,
)
from .report import document, report_figures, write_report
from .results import read
from .tables import TABLES, register

__all__ = ["DEFAULT_LAYOUTS", "DEFAULT_PATTERNS", "DEFAULT_SCHEMES", "EVAL_VERSION", "SCHEMA_VERSION", "TABLES", "Cell",
           "Study", "StudyConfig", "StudyTable", "TableSettings", "digest", "document", "read", "register",
           "report_figures", "slug", "write_report"]
