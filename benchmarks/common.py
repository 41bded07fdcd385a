"""Shared by the CPU (run.py) and GPU (gpu.py) benchmarks: machine facts, the input document,
markdown tables and writing a report with its JSON next to it."""

from __future__ import annotations

import datetime
import json
import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

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


def md_table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_report(out: str | Path, markdown: str, data: dict) -> Path:
    """``out`` (markdown) and the same name with ``.json``, each written atomically; returns the
    JSON path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, markdown)
    atomic_write(out.with_suffix(".json"), json.dumps(data, indent=1) + "\n")
    return out.with_suffix(".json")
