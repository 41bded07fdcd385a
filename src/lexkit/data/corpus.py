"""Corpora of byte documents, their train/validation split, fingerprint and batching.

Sources (a *data spec*):

* ``stdlib`` (default): the ``.py`` source of the running Python's standard library,
  ``site-packages`` excluded, each file a document. Present on every machine with Python; its size
  differs between installs (the fingerprint records which one a result came from).
* ``PATH``: a text file, a directory (recursive; hidden files and folders skipped) or a glob;
  each file a document.
* ``hf:NAME[:CONFIG[:SPLIT]]``: ``datasets.load_dataset(NAME, CONFIG, split=SPLIT or "train")``,
  one document per row of its ``text`` column (or its first string column). NAME may be a local
  directory.

A path is recorded absolute (:func:`absolute_spec`), so a run finds its corpus from any
directory; a corpus that moved is recognised by its fingerprint (:func:`same_corpus`).

Split: a document goes to validation when the SHA-256 of its name (relative path, or row index)
falls in the lowest 5% (deterministic, independent of file order and machine). With
``split="all"`` every document is a validation document (``lexkit eval --data PATH``).

Tokens are bytes plus BOS (id 256) at the start of every document.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import hashlib
import math
import os
import platform
import sysconfig
from pathlib import Path

import torch
from torch import Tensor

from ..core.errors import DataError
from ..model.gpt import BOS

VALID_PERCENT = 5
#: nats per bit: bits per byte = mean NLL per byte (nats) / LN2
LN2 = math.log(2.0)


@dataclasses.dataclass
class Corpus:
    spec: str
    train: list[bytes]
    valid: list[bytes]
    fingerprint: dict

    def describe(self) -> str:
        f = self.fingerprint
        return (
            f"{self.spec}: {f['files']} document{'' if f['files'] == 1 else 's'}, {f['bytes']:,} bytes "
            f"({len(self.train)} train / {len(self.valid)} validation)"
        )


def encode(doc: bytes) -> Tensor:
    """BOS then the bytes: int64 [1 + len(doc)]."""
    if not doc:
        return torch.tensor([BOS])
    body = torch.frombuffer(bytearray(doc), dtype=torch.uint8).to(torch.int64)
    return torch.cat((torch.tensor([BOS]), body))


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _read_files(root: Path, paths: list[Path]) -> list[tuple[str, bytes]]:
    docs = []
    for path in sorted(paths):
        try:
            docs.append((path.relative_to(root).as_posix(), path.read_bytes()))
        except OSError as exc:
            raise DataError(f"cannot read {_show(path)}: {exc.strerror}") from exc
    return docs


def _name_bytes(name: str) -> bytes:
    """A document name as bytes; a file name that is not UTF-8 keeps its raw bytes (the
    surrogates Python decodes them to), so every name has one stable encoding."""
    return name.encode("utf-8", "surrogateescape")


def _show(path: Path | str) -> str:
    """A path printable in a message (bytes that are not UTF-8 shown as escapes)."""
    return os.fsencode(str(path)).decode("utf-8", "backslashreplace")


def absolute_spec(spec: str) -> str:
    """A data spec as recorded in a run: paths and globs made absolute; stdlib and hf: kept."""
    if spec == "stdlib" or spec.startswith("hf:"):
        return spec
    return os.path.abspath(os.path.expanduser(spec))


def same_corpus(recorded: dict, here: dict) -> bool:
    """Whether two fingerprints describe the same documents (wherever they are now)."""
    keys = ("files", "bytes", "sha256")
    return all(recorded.get(k) == here.get(k) for k in keys)


@functools.cache
def _stdlib_docs() -> tuple[tuple[str, bytes], ...]:
    """The standard library's sources, read once a process (about 1,800 files, 30 MB: a study, a sweep
    and the test suite load the default corpus many times; the installed stdlib does not change
    under a running interpreter)."""
    root = stdlib_root()
    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("site-packages", "dist-packages")]
        paths += [Path(dirpath) / name for name in filenames if name.endswith(".py")]
    return tuple(_read_files(root, paths))


def _path_docs(spec: str) -> list[tuple[str, bytes]]:
    path = Path(spec).expanduser()
    if path.is_file():
        return _read_files(path.parent, [path])
    if path.is_dir():
        files = [
            p for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        ]
        if not files:
            raise DataError(f"data directory {_show(spec)} holds no files")
        return _read_files(path, files)
    if any(ch in spec for ch in "*?["):
        files = [Path(p) for p in glob.glob(os.path.expanduser(spec), recursive=True) if os.path.isfile(p)]
        if not files:
            raise DataError(f"data glob {spec!r} matches no files")
        return _read_files(Path(os.path.commonpath([str(p.parent) for p in files])), files)
    if path.exists():
        raise DataError(f"data path {_show(spec)!r} is not a regular file or a directory (a device or a pipe?); "
                        "give a text file, a directory or a glob")
    raise DataError(f"data path {spec!r} does not exist (give 'stdlib', a file, a directory, a glob or hf:NAME)")


def _hf_docs(spec: str) -> list[tuple[str, bytes]]:
    parts = spec.split(":")[1:]
    if not parts or not parts[0] or len(parts) > 3:
        raise DataError(f"bad data spec {spec!r}: write hf:NAME[:CONFIG[:SPLIT]]")
    name, config, split = (parts + [None, None])[:3]
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - datasets is in the dev extra
        raise DataError("hf: data needs the `datasets` package (pip install datasets)") from exc
    _quiet_hub(name)
    try:
        rows = datasets.load_dataset(name, config or None, split=split or "train")
    except Exception as exc:  # datasets raises many types; one line for the user
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"cannot load {spec!r}: {reason}") from exc
    column = "text" if "text" in rows.column_names else next(
        (c for c, f in rows.features.items() if getattr(f, "dtype", None) in ("string", "large_string")), None
    )
    if column is None:
        raise DataError(f"{spec!r} has no text column (columns: {', '.join(rows.column_names)})")
    return [(f"{i:09d}", (text or "").encode("utf-8")) for i, text in enumerate(rows[column])]


def _quiet_hub(name: str) -> None:
    """No library log lines, and no 26 s of retries without a network: when the hub cannot be
    reached in a second, the libraries go offline (a cached or local dataset still loads; any
    other fails at once with their one-line reason)."""
    import logging

    for logger in ("datasets", "huggingface_hub", "fsspec", "urllib3", "filelock"):
        logging.getLogger(logger).setLevel(logging.ERROR)
    try:
        import datasets

        datasets.utils.logging.set_verbosity_error()
        datasets.utils.logging.disable_progress_bar()
    except (ImportError, AttributeError):  # pragma: no cover - older datasets
        pass
    if Path(name).expanduser().exists() or os.environ.get("HF_HUB_OFFLINE") == "1":
        return
    if not hub_reachable():
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
        try:
            import datasets
            import huggingface_hub.constants

            datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
        except (ImportError, AttributeError):  # pragma: no cover
            pass


def hub_reachable(timeout: float = 1.0) -> bool:
    """Whether huggingface.co (or $HF_ENDPOINT) answers a TCP connection within ``timeout`` s."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def is_valid_name(name: str) -> bool:
    """The split rule: SHA-256 of the document's name, lowest VALID_PERCENT % go to validation."""
    return int.from_bytes(hashlib.sha256(_name_bytes(name)).digest()[:8], "big") % 100 < VALID_PERCENT


def load_corpus(spec: str = "stdlib", *, split: str = "split") -> Corpus:
    """Documents of a data spec, split into train and validation (``split="all"``: all validation)."""
    if split not in ("split", "all"):
        raise ValueError(f"split must be 'split' or 'all', got {split!r}")
    if spec == "stdlib":
        named = _stdlib_docs()
    elif spec.startswith("hf:"):
        named = _hf_docs(spec)
    else:
        named = _path_docs(spec)
    named = [(n, d) for n, d in named if d]
    if not named:
        raise DataError(f"corpus {spec!r} is empty (0 non-empty documents)")
    digest = hashlib.sha256()
    for name, doc in named:
        digest.update(_name_bytes(name) + b"\0" + hashlib.sha256(doc).digest())
    fingerprint = {
        "source": spec,
        "python": platform.python_version(),
        "files": len(named),
        "bytes": sum(len(d) for _, d in named),
        "sha256": digest.hexdigest()[:16],
    }
    if split == "all":
        return Corpus(spec, [], [d for _, d in named], fingerprint)
    train = [d for n, d in named if not is_valid_name(n)]
    valid = [d for n, d in named if is_valid_name(n)]
    if not valid or not train:  # too few documents for the hash split: cut the largest in two
        named.sort(key=lambda nd: len(nd[1]))
        docs = [d for _, d in named]
        big = docs.pop()
        cut = len(big) - max(1, len(big) * VALID_PERCENT // 100)
        train, valid = docs + [big[:cut]], [big[cut:]]
    return Corpus(spec, train, valid, fingerprint)


def check_splits(corpus: Corpus, length: int) -> Corpus:
    """``corpus``, or a DataError (before a run is written) when training cannot use it: no
    training or no validation documents (a :class:`Corpus` built by hand), or a training or
    validation split shorter than one window of ``length`` bytes (validation bpb reads one)."""
    for what, docs in (("training", corpus.train), ("validation", corpus.valid)):
        if not any(docs):
            raise DataError(f"corpus {corpus.spec!r} has no {what} documents: training draws its batches from the "
                            "training split and measures bpb on the validation split; give both")
    for what, docs in (("training", corpus.train), ("validation", corpus.valid)):
        total = sum(len(d) + 1 for d in docs)  # BOS before each
        if total < length + 1:
            raise DataError(f"the {what} split has {total:,} tokens, fewer than one window of {length + 1} (the "
                            f"training length {length} + 1): give a larger corpus or a shorter --train-len")
    return corpus


def require_long(docs: list[bytes], length: int, what: str = "validation") -> list[bytes]:
    """The documents at least ``length`` bytes long, in order, or a DataError with the counts
    found (``what`` names the split in the message). The one check every consumer of long
    documents (evaluation, the resolution texts) makes."""
    long = [d for d in docs if len(d) >= length]
    if not long:
        longest = max((len(d) for d in docs), default=0)
        count = f"{len(docs):,} document" + ("" if len(docs) == 1 else "s")
        raise DataError(
            f"no {what + ' ' if what else ''}document is {length:,} bytes long ({count}, the longest "
            f"{longest:,} bytes); use shorter --lengths or more data"
        )
    return long


def tokens_of(docs: list[bytes]) -> Tensor:
    """All documents as one token stream, BOS before each: int16 [total]."""
    return torch.cat([encode(d) for d in docs]).to(torch.int16)


class Stream:
    """All documents of a split as one token stream (BOS before each), sampled in windows.

    Batch t of a run is drawn by a generator seeded from (seed, t) alone, so a resumed run
    draws exactly the batches an uninterrupted one would.
    """

    def __init__(self, docs: list[bytes] | None = None, *, tokens: Tensor | None = None) -> None:
        if tokens is None:
            if not docs:
                raise DataError("no documents to draw batches from")
            tokens = tokens_of(docs)
        self.tokens = tokens  # int16 [total]

    def __len__(self) -> int:
        return self.tokens.numel()

    def batch(self, step: int, batch: int, length: int, seed: int, rows: slice = slice(None)) -> tuple[Tensor, Tensor]:
        """(inputs, targets), each int64 [batch, length], for training step ``step``; with
        ``rows``, only those rows of that batch (one rank's share under torchrun)."""
        if len(self) < length + 1:
            raise DataError(f"the training split has {len(self):,} tokens, fewer than one window of {length + 1}")
        gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
        starts = torch.randint(0, len(self) - length, (batch,), generator=gen)[rows]
        windows = torch.stack([self.tokens[s : s + length + 1] for s in starts.tolist()]).to(torch.int64)
        return windows[:, :-1], windows[:, 1:]

    def fixed_windows(self, count: int, length: int) -> tuple[Tensor, Tensor]:
        """The first ``count`` non-overlapping windows (validation during training)."""
        count = max(1, min(count, (len(self) - 1) // length))
        windows = self.tokens[: count * length + 1].to(torch.int64)
        x = windows[:-1].view(count, length)
        y = windows[1:].reshape(count, length)
        return x, y
