"""``lexkit runs [DIR]``: the training runs at or below DIR (default: the current directory), one
line each: scheme, training length, step / total steps, state (finished, stopped, or writing: a live
process holds its lock), the validation bits per byte of the checkpoint's weights, the ranks and
device it trained on, the parent run a fine-tune (``--init``) started from, size on disk and path.

With --tensorboard OUT, their metrics.jsonl rows are written as TensorBoard event files instead,
one subdirectory of OUT per run named by its path below DIR (needs ``pip install -e '.[tb]'``):
``tensorboard --logdir OUT`` then shows them side by side."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import RunError
from ..training import runs
from .table import print_table


def add_parser(sub):
    p = sub.add_parser("runs", help="list the training runs in a directory", description=__doc__)
    p.add_argument("dir", nargs="?", default=".", metavar="DIR", help="where to look (default: .)")
    p.add_argument("--depth", type=int, default=4, metavar="N", help="directory levels to search (default: 4)")
    p.add_argument("--tensorboard", metavar="OUT",
                   help="write every run's metrics.jsonl as TensorBoard event files under OUT, one subdirectory "
                   "per run (needs lexkit[tb])")
    return p


def run(args) -> int:
    root = Path(args.dir)
    if not root.is_dir():
        raise RunError(f"{args.dir} is not a directory" if root.exists() else f"{args.dir} does not exist")
    if args.depth < 0 or args.depth > 64:
        raise ValueError(f"--depth {args.depth}: must be an integer from 0 to 64")
    if args.tensorboard:
        return export(root, Path(args.tensorboard), args.depth)
    rows = [("scheme", "layout", "length", "step", "state", "val bpb", "ranks", "device", "parent", "size", "path")]
    for path in runs.find(root, depth=args.depth):
        try:
            s = runs.summary(path)
        except RunError as exc:
            rows.append(("?", "-", "-", "-", "unreadable", "-", "-", "-", "-", "-", f"{path}  ({exc})"))
            continue
        state = "writing" if s["writing"] else "finished" if s["finished"] else "stopped"
        bpb = "-" if s["val_bpb"] is None else f"{s['val_bpb']:.4f}"
        scheme = s["scheme"] if s["layout"] is None else "-"  # a layout names each layer's scheme
        rows.append((scheme, _text(s["layout"]), _text(s["train_len"]), f"{s['step']}/{s['steps']}", state, bpb,
                     _text(s["world_size"]), _text(s["device"]), _text(s["parent"]), _size(s["bytes"]), s["path"]))
    if len(rows) == 1:
        print(f"no runs at or below {args.dir} (a run is a directory with config.json, made by `lexkit train`)")
        return 0
    print_table(rows, "llrrlrrllrl")
    return 0


def export(root: Path, out: Path, depth: int) -> int:
    from ..training.tensorboard import export_runs

    if out.exists() and not out.is_dir():
        raise RunError(f"--tensorboard {out}: not a directory (give a directory for the event files)")
    done = export_runs(root, out, depth=depth)
    if not done:
        print(f"no runs with logged metrics at or below {root}; nothing written")
        return 0
    for name, count in done:
        print(f"  {out / name}  ({count} rows)")
    print(f"{len(done)} run(s) exported; view them with: tensorboard --logdir {out}")
    return 0


def _text(value) -> str:
    return "-" if value is None else str(value)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"  # pragma: no cover
