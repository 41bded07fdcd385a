"""Corpora: the stdlib default, user paths, hf: datasets; the split; tokens; errors with counts."""

import json
import os
import sysconfig

import pytest
import torch

from lexkit.core.errors import DataError
from lexkit.data import corpus as data
from lexkit.model.gpt import BOS
from toy_corpus import DOCS


def test_encode_is_bos_then_bytes():
    assert data.encode(b"ab\xff").tolist() == [BOS, 97, 98, 255]
    assert data.encode(b"").tolist() == [BOS]


@pytest.fixture(scope="module")
def stdlib():
    return data.load_corpus("stdlib")


def test_stdlib_is_the_standard_library_source(stdlib):
    root = sysconfig.get_paths()["stdlib"]
    expected = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("site-packages", "dist-packages")]
        expected += sum(1 for f in filenames if f.endswith(".py") and os.path.getsize(os.path.join(dirpath, f)) > 0)
    assert stdlib.fingerprint["files"] == expected == len(stdlib.train) + len(stdlib.valid)
    assert stdlib.fingerprint["bytes"] == sum(map(len, stdlib.train + stdlib.valid))
    share = len(stdlib.valid) / stdlib.fingerprint["files"]
    assert 0.02 < share < 0.08  # about 5 %


def test_split_is_deterministic_and_by_name(stdlib):
    again = data.load_corpus("stdlib")
    assert again.fingerprint == stdlib.fingerprint
    assert again.valid == stdlib.valid
    # the rule itself: lowest 5 % of SHA-256(name)
    import hashlib

    name = "os.py"
    bucket = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % 100
    assert data.is_valid_name(name) == (bucket < 5)


def test_the_stdlib_is_read_once_a_process_and_each_load_is_its_own(stdlib, monkeypatch):
    """The default corpus's files are read once (a study loads it for every unit); each load still
    gives its own lists, so a caller that changes one changes no other load."""
    reads = []
    real = data._read_files
    monkeypatch.setattr(data, "_read_files", lambda *a: reads.append(1) or real(*a))
    data._stdlib_docs.cache_clear()
    first, second = data.load_corpus("stdlib"), data.load_corpus("stdlib", split="all")
    assert len(reads) == 1 and first.fingerprint == second.fingerprint == stdlib.fingerprint
    first.train.clear()
    assert data.load_corpus("stdlib").train == stdlib.train and len(reads) == 1


def test_directory_glob_and_file(tmp_path):
    for i in range(40):
        sub = tmp_path / f"d{i % 3}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{i}.txt").write_bytes(f"document {i} ".encode() * 20)
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.txt").write_bytes(b"never")
    corpus = data.load_corpus(str(tmp_path))
    assert corpus.fingerprint["files"] == 40
    assert len(corpus.train) + len(corpus.valid) == 40 and corpus.valid
    assert all(b"never" not in d for d in corpus.train + corpus.valid)
    globbed = data.load_corpus(str(tmp_path / "d1" / "*.txt"))
    assert globbed.fingerprint["files"] == len(list((tmp_path / "d1").glob("*.txt")))
    one = data.load_corpus(str(tmp_path / "d0" / "f0.txt"))  # one file: cut into train and validation
    assert b"".join(one.train + one.valid) == (tmp_path / "d0" / "f0.txt").read_bytes()
    every = data.load_corpus(str(tmp_path), split="all")
    assert len(every.valid) == 40 and every.train == []


@pytest.mark.xdist_group("hf")  # beside test_hf.py under `pytest -n`: one worker imports the HF stack
def test_hf_dataset_from_a_local_directory(tmp_path):
    pytest.importorskip("datasets")  # an optional dependency: hf: specs need it
    with open(tmp_path / "train.jsonl", "w") as handle:
        for i in range(30):
            handle.write(json.dumps({"text": f"row {i} " * 30, "id": i}) + "\n")
    corpus = data.load_corpus(f"hf:{tmp_path}")
    assert corpus.fingerprint["files"] == 30
    assert sorted(corpus.train + corpus.valid) == sorted((f"row {i} " * 30).encode() for i in range(30))


@pytest.mark.parametrize(
    "spec, words",
    [("/no/such/path", "does not exist"), ("/no/such/*.txt", "matches no files"), ("hf:", "hf:NAME")],
)
def test_bad_specs(spec, words):
    with pytest.raises(DataError, match=words):
        data.load_corpus(spec)


def test_empty_corpus(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"")
    with pytest.raises(DataError, match="empty"):
        data.load_corpus(str(tmp_path))


def test_require_long_names_the_counts():
    with pytest.raises(DataError, match=r"3 documents, the longest 30 bytes"):
        data.require_long([b"x" * 10, b"y" * 30, b"z"], 64)
    assert data.require_long([b"x" * 10, b"y" * 64], 64) == [b"y" * 64]


def test_stream_batches_depend_on_seed_and_step_only():
    docs = [bytes(range(i, i + 50)) for i in range(10)]
    stream = data.Stream(docs)
    assert len(stream) == sum(len(d) + 1 for d in docs)
    x1, y1 = stream.batch(7, 4, 16, seed=3)
    x2, y2 = data.Stream(docs).batch(7, 4, 16, seed=3)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert torch.equal(x1[:, 1:], y1[:, :-1])  # targets are inputs shifted by one
    assert not torch.equal(stream.batch(8, 4, 16, seed=3)[0], x1)
    x, y = stream.fixed_windows(3, 16)
    flat = stream.tokens.to(torch.int64)
    assert torch.equal(x.flatten(), flat[:48]) and torch.equal(y.flatten(), flat[1:49])


def test_non_utf8_file_names_in_data(tmp_path):
    folder = tmp_path / "odd"
    folder.mkdir()
    for i, doc in enumerate(DOCS[:5]):
        (folder / f"doc{i}.py").write_bytes(doc)
    name = os.fsdecode(b"caf\xe9.py")  # latin-1 bytes: not UTF-8
    (folder / name).write_bytes(DOCS[5])
    corpus = data.load_corpus(str(folder))
    assert corpus.fingerprint["files"] == 6
    assert data.load_corpus(str(folder)).fingerprint == corpus.fingerprint  # stable
