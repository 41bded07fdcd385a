"""Shared by the benchmarks: machine facts, the input document, a report's tables (blocks of
:mod:`lexkit.documents.blocks`, drawn by :mod:`lexkit.documents.render`), a sweep's document read as its
typed rows, and writing a report with its JSON next to it. (The models: :mod:`builders`.)"""

from __future__ import annotations

import datetime
import json
import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

from lexkit.documents.blocks import Table
from lexkit.documents.render import markdown_table
from lexkit.training.runs import atomic_write

ROOT = Path(__file__).resolve().parent.parent


def machine_facts(hardware: dict, **versions) -> dict:
    """When, on what, and with which versions a benchmark ran (its report's first table)."""
    import lexkit

    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), **hardware,
            "python": platform.python_version(), "torch": torch.__version__, "lexkit": lexkit.__version__, **versions}


def cpu_facts(threads: int) -> dict:
    return machine_facts(
        {"cpu": cpu_model(), "cores": os.cpu_count(), "threads": threads,
         "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3, 1)},
        x_transformers=installed("x-transformers"),
        load_average_start=load_average(),
    )


def gpu_facts(device: torch.device) -> dict:
    return machine_facts({"gpu": torch.cuda.get_device_name(device), "cuda": torch.version.cuda})


def installed(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def random_document(n: int, seed: int = 0) -> bytes:
    """n random bytes: the evaluated sequence (cost does not depend on the content)."""
    gen = torch.Generator().manual_seed(seed)
    return bytes(torch.randint(0, 256, (n,), dtype=torch.uint8, generator=gen).tolist())


def table(header: list[str], rows: list[list]) -> Table:
    """A report's table from rows of any values, each cell its text (``str``); drawn by
    :func:`lexkit.documents.render.markdown` among a report's blocks, or alone by :func:`md_table`."""
    return Table.of(list(header), [[str(c) for c in row] for row in rows])


def md_table(header: list[str], rows: list[list]) -> str:
    """The table of :func:`table` in markdown (:func:`lexkit.documents.render.markdown_table`)."""
    return markdown_table(table(header, rows))


def read_sweep(path: str | Path):
    """A ``lexkit sweep`` document (``sweep.json``) as its typed rows: table G's section
    (:class:`~lexkit.study.tables.retrieval.rows.RetrievalSection`) and each task's entries
    (:class:`~lexkit.study.tables.retrieval.rows.RetrievalEntry`, the task in ``format``), in a
    :class:`lexkit.study.sweep.SweepResults` (imported here: the study's floor is the slowest to import)."""
    from lexkit.documents.rows import typed
    from lexkit.study.sweep import SweepResults
    from lexkit.study.tables.retrieval.rows import RetrievalEntry, RetrievalSection

    doc = json.loads(Path(path).read_text())
    return SweepResults(config=doc["config"], section=RetrievalSection.from_json(doc["retrieval"]),
                        tasks={task: typed(RetrievalEntry, entries) for task, entries in doc["tasks"].items()},
                        phases=doc.get("phases", {}))


def documents_per_cell(doc) -> int:
    """A sweep document's documents per seed, arm and multiple: its needles per depth times its depths."""
    return doc.section.samples * len(doc.section.depths)


def write_report(out: str | Path, markdown: str, data: dict) -> Path:
    """``out`` (markdown) and the same name with ``.json``, each written atomically; returns the
    JSON path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, markdown)
    atomic_write(out.with_suffix(".json"), json.dumps(data, indent=1) + "\n")
    return out.with_suffix(".json")
