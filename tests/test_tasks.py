"""lexkit.tasks: retrieval documents know where their answer is, are deterministic by seed, keep
training and evaluation needles apart, and the standard passkey prompt is the reference one."""

from __future__ import annotations

import re

import pytest
import torch

from lexkit import tasks
from lexkit.data import mix

HAY = tasks.Haystack(b"def f(x):\n    return x + 1  # ok ~ tilde\n" * 20)


#: the tasks that hide a needle in a haystack (not a labelling task: khop, tests/test_khop.py)
NEEDLE_TASKS = [t for t in tasks.names() if not tasks.get(t).labels]


@pytest.mark.parametrize("task, style", [(t, s) for t in NEEDLE_TASKS for s in tasks.get(t).styles])
def test_documents_have_the_length_and_answer_where_they_say(task, style):
    length = tasks.minimum_length(task, style) + 200
    for depth in (0, 35, 100):
        for i in range(3):
            doc = tasks.make(task, length, depth, haystack=HAY, style=style, index=i)
            assert len(doc.text) == length
            assert doc.answer[1] == length  # the answer ends the document
            value = doc.text[doc.needle[0] : doc.needle[1]]
            assert doc.expected.strip() == value  # the needle holds the answer (standard: after a space)
            assert doc.prompt + doc.expected == doc.text
            assert doc.distance == doc.answer[0] - doc.needle[0] > 0
            given = 2 if (task, style) == ("passkey", "standard") else 1  # Landmark's needle says it twice
            if doc.format != "ngram":  # a corpus span may recur in the haystack
                assert doc.text.count(value) == given + 1


def test_depth_places_the_needle_in_the_haystack():
    length = 300
    first = tasks.make("copy", length, 0, haystack=HAY)
    last = tasks.make("copy", length, 100, haystack=HAY)
    assert first.needle[0] == len(tasks.MARK)  # nothing before the needle
    size = tasks.get("copy").size
    assert last.needle[1] + len(tasks.MARK) == last.answer[0]  # the question follows the needle at once
    middle = tasks.make("copy", length, 50, haystack=HAY)
    free = length - tasks.minimum_length("copy")
    assert middle.needle[0] - len(tasks.MARK) == round(free * 0.5)
    assert last.needle[1] - last.needle[0] == size


def test_the_marker_never_occurs_in_a_haystack():
    doc = tasks.make("copy", 400, 50, haystack=HAY)
    assert doc.text.count(tasks.MARK) == 2  # the haystack's own '~' were replaced


def test_deterministic_by_seed_and_index():
    a = tasks.make("passkey", 200, 40, haystack=HAY, seed=3, index=5)
    assert a == tasks.make("passkey", 200, 40, haystack=HAY, seed=3, index=5)
    assert a.expected != tasks.make("passkey", 200, 40, haystack=HAY, seed=4, index=5).expected
    assert a.expected != tasks.make("passkey", 200, 40, haystack=HAY, seed=3, index=6).expected


@pytest.mark.parametrize("task", NEEDLE_TASKS)
def test_training_and_evaluation_needles_never_meet(task):
    def values(split):
        return {tasks.make(task, 200, 50, haystack=HAY, split=split, index=i, size=2).expected for i in range(150)}

    ev, tr = values("eval"), values("train")
    assert all(tasks.held_out(v) for v in ev) and not any(tasks.held_out(v) for v in tr)
    assert not ev & tr and len(ev) > 20 and len(tr) > 20


def test_standard_passkey_is_the_landmark_prompt():
    doc = tasks.make("passkey", 600, 30, haystack=None, style="standard", index=2)
    k = doc.expected.decode().strip()
    garbage = " ".join(["The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."]
                       * 2000)
    text = doc.text.decode()
    n_prefix = text.index("\nThe pass key is") - text.index("\n") - 1
    n_suffix = len(text) - len(doc.expected) - text.index("the pass key.\n") - len("the pass key.\n") - len(
        "\nWhat is the pass key? The pass key is")
    lines = [
        "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
        "I will quiz you about the important information there.",
        garbage[:n_prefix],
        f"The pass key is {k}. Remember it. {k} is the pass key.",
        garbage[:n_suffix],
        "What is the pass key? The pass key is",
    ]
    assert text == "\n".join(lines) + " " + k
    assert 1 <= int(k) <= 50000 and doc.expected == f" {k}".encode()
    free = n_prefix + n_suffix
    assert n_prefix == round((free - 3 * (5 - len(k))) * 0.3)  # depth: the share of filler before the needle


def test_multikey_has_distinct_distractors():
    for style in tasks.STYLES:
        doc = tasks.make("multikey", tasks.minimum_length("multikey", style) + 300, 20, haystack=HAY, style=style)
        assert len(doc.distractors) == tasks.MULTIKEY_NEEDLES - 1
        keys = [doc.text[a:b] for a, b in (doc.needle, *doc.distractors)]
        assert len(set(keys)) == tasks.MULTIKEY_NEEDLES
        if style == "standard":
            words = re.findall(rb"magic numbers for (\w+) is:", doc.text)
            assert len(set(words)) == tasks.MULTIKEY_NEEDLES
            asked = re.search(rb"magic numbers for (\w+) is: " + keys[0], doc.text).group(1)
            assert doc.text.endswith(b"The special magic number for " + asked + b" mentioned in the provided "
                                     b"text is " + keys[0])
        else:
            asked = doc.text[doc.needle[0] - 9 : doc.needle[0]]  # "\n{word} ~"
            assert doc.prompt.endswith(asked) and doc.prompt.count(asked) == 2


def test_without_needle_replaces_only_the_value():
    doc = tasks.make("copy", 100, 50, haystack=HAY)
    other = doc.without_needle()
    assert len(other) == len(doc.text) and other.count(doc.expected) == 1
    with pytest.raises(ValueError, match="needle's 16 bytes"):
        doc.without_needle(b"ab")


@pytest.mark.parametrize("call, message", [
    (lambda: tasks.make("needle", 100, 0, haystack=HAY),
     "unknown task 'needle'; valid: copy, passkey, multikey, induction"),
    (lambda: tasks.make("copy", 100, 101, haystack=HAY), r"depth 101 is outside \[0, 100\]"),
    (lambda: tasks.make("copy", 100, -1, haystack=HAY), r"depth -1 is outside \[0, 100\]"),
    (lambda: tasks.make("copy", 20, 0, haystack=HAY), r"length 20 is shorter than the copy needle .*34 bytes"),
    (lambda: tasks.make("copy", 100, 0, haystack=None), "give a Haystack"),
    (lambda: tasks.make("copy", 100, 0, haystack=HAY, size=0), "size must be a positive integer"),
    (lambda: tasks.Haystack(b""), "needs some text"),
])
def test_bad_requests(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# -- the training mix ----------------------------------------------------------------------------------
def test_parse_mix():
    from lexkit.data.mix import mix_text, parse_mix

    assert parse_mix("passkey:0.05, copy:0.1") == {"passkey": 0.05, "copy": 0.1}
    assert parse_mix("") == {} and mix_text(parse_mix("copy:0.50")) == "copy:0.5"


@pytest.mark.parametrize("spec, want", [
    ("copy:0.3333335,passkey:0.6666665", {"copy": 0.3333335, "passkey": 0.6666665}),  # sums to 1 exactly
    ("copy:0.1,passkey:0.2,multikey:0.7", {"copy": 0.1, "passkey": 0.2, "multikey": 0.7}),  # float sum 1 + 2e-16
    ("copy:0.9999995", {"copy": 0.9999995}),  # 6 significant figures would make it 1
    (" copy : 0.5 ", {"copy": 0.5}),  # spaces around the task as around the fraction
])
def test_a_mix_is_recorded_as_given_and_reads_back(spec, want):
    """The canonical text config.json records reads back as the same fractions (it was rounded to 6
    significant figures, and the rounded mix refused: 'sum to 1, more than 1', 'got 1')."""
    from lexkit.data.mix import mix_text, parse_mix
    from lexkit.training.settings import TrainConfig

    assert parse_mix(spec) == want
    recorded = TrainConfig(mix=spec).mix
    assert recorded == mix_text(want) and parse_mix(recorded) == want


@pytest.mark.parametrize("spec, message", [
    ("passkey:1.5", r"fraction must be in \(0, 1\], got 1.5"),
    ("passkey:0", r"fraction must be in \(0, 1\], got 0"),
    ("passkey:1.01", r"fraction must be in \(0, 1\], got 1.01"),
    ("needle:0.1", "unknown task 'needle'"),
    ("passkey", "write TASK:FRACTION"),
    ("copy:0.6,passkey:0.6", "sum to 1.2"),
    ("copy:0.1,copy:0.2", "names copy twice"),
])
def test_bad_mixes(spec, message):
    from lexkit.data.mix import parse_mix

    with pytest.raises(ValueError, match=message):
        parse_mix(spec)


def _stream():
    from lexkit.data.corpus import tokens_of
    from lexkit.data.mix import MixedStream

    docs = [(f"def f{i}(x):\n    return x * {i}\n" * 30).encode() for i in range(8)]
    return MixedStream(tokens_of(docs), "copy:0.3,passkey:0.2")


def test_mixed_stream_is_deterministic_and_splits_rows_by_rank():
    stream = _stream()
    x, y = stream.batch(7, 40, 64, seed=1)
    assert torch.equal(x, stream.batch(7, 40, 64, seed=1)[0])  # a resumed run draws the same batch
    halves = [stream.batch(7, 40, 64, seed=1, rows=slice(r * 20, (r + 1) * 20)) for r in range(2)]
    assert torch.equal(torch.cat([h[0] for h in halves]), x) and torch.equal(torch.cat([h[1] for h in halves]), y)
    assert torch.equal(x[:, 1:], y[:, :-1])
    rows = [bytes(r[r < 256].tolist()) for r in x]
    copies = sum(r.count(b"~") == 2 and b"pass key" not in r for r in rows)
    keys = sum(r.count(b"\nthe pass key is ~") == 2 for r in rows)
    assert copies + keys == sum(bool(r.count(b"~")) for r in rows) > 0
    many = [stream.batch(s, 40, 64, seed=1)[0] for s in range(15)]
    share = sum(bytes(r[r < 256].tolist()).count(b"~") == 2 for m in many for r in m) / (15 * 40)
    assert 0.4 < share < 0.6  # copy 0.3 + passkey 0.2 of the rows (600 rows: a standard error of 0.02)


def test_train_records_the_mix_and_resume_honours_it(tmp_path, capsys):
    import json

    from lexkit.cli import main
    from toy_corpus import write_corpus

    data = write_corpus(tmp_path)
    out = tmp_path / "run"
    base = ["train", "--preset", "tiny", "--scheme", "rope", "--out", str(out), "--data", str(data), "--quiet"]
    base += ["--train-len", "64"]
    assert main([*base, "--steps", "2", "--mix", "copy:0.25", "--mix", "passkey:0.25"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["train"]["mix"] == "copy:0.25,passkey:0.25" and config["data"]["mix"] == "copy:0.25,passkey:0.25"
    capsys.readouterr()
    assert main([*base, "--steps", "3", "--resume", "--mix", "copy:0.5"]) == 2
    assert "train.mix" in capsys.readouterr().err


def test_train_refuses_a_bad_mix_in_one_line_writing_nothing(tmp_path, capsys):
    from lexkit.cli import main

    base = ["train", "--preset", "tiny", "--scheme", "rope", "--quiet"]
    for spec, message in (("passkey:1.5", "fraction must be in (0, 1], got 1.5"),
                          ("passkey:0.2", "need at least 46 bytes, more than the training length 32")):
        assert main([*base, "--out", str(tmp_path / "new"), "--mix", spec]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
        assert not (tmp_path / "new").exists()


# -- the registry --------------------------------------------------------------------------------------
@pytest.fixture
def fresh_tasks(monkeypatch):
    """The task registry as it is, restored after the test; ``my_task`` imported afresh."""
    import sys

    monkeypatch.setattr(tasks.TASKS, "_classes", dict(tasks.TASKS._classes))
    monkeypatch.delitem(sys.modules, "my_task", raising=False)
    yield
    sys.modules.pop("my_task", None)


def every_document() -> dict:
    """Documents of every built-in task in every style and split, at a few depths and indices."""
    out = {}
    for task in ("copy", "passkey", "multikey"):
        for style in tasks.STYLES:
            length = tasks.minimum_length(task, style) + 90
            for split in tasks.SPLITS:
                out[task, style, split] = [tasks.make(task, length, depth, haystack=HAY, style=style, split=split,
                                                      index=i, seed=2) for depth in (0, 60) for i in range(3)]
    return out


def test_adding_a_task_changes_no_other_tasks_documents(fresh_tasks):
    before = every_document()

    @tasks.register
    class Early(tasks.Task):  # however it sorts among the others
        name = "aaa-first"
        size = 4

        @classmethod
        def build(cls, rng, haystack, free, before, depth, size, split, style):
            return tasks.TASKS.get("copy").build(rng, haystack, free, before, depth, size, split, style)

    assert tasks.names() == ["copy", "passkey", "multikey", "induction", "kvthread", "ordinal", "khop", "aaa-first"]
    assert every_document() == before
    # its own documents are its own: the same builder under another name draws other values
    mine = tasks.make("aaa-first", 120, 50, haystack=HAY, size=4)
    assert mine.text != tasks.make("copy", 120, 50, haystack=HAY, size=4).text


def test_a_tasks_seed_is_its_name_and_its_identity_says_what_defines_its_documents():
    assert tasks.task_seed("copy") == int.from_bytes(__import__("hashlib").sha256(b"lexkit-task:copy").digest()[:8],
                                                     "big")
    a = tasks.rng_for("copy", "eval", 0, 5).integers(0, 1 << 30, 4).tolist()
    assert a == tasks.rng_for("copy", "eval", 0, 5).integers(0, 1 << 30, 4).tolist()
    assert a != tasks.rng_for("passkey", "eval", 0, 5).integers(0, 1 << 30, 4).tolist()
    assert tasks.identity("copy") == {"task": "copy", "version": 1, "seeding": tasks.SEEDING} and tasks.SEEDING == 2


def test_import_registers_a_user_task_for_every_command(fresh_tasks, trained, capsys):
    from lexkit.cli import main

    assert main(["tasks"]) == 0
    assert "reverse" not in capsys.readouterr().out
    assert main(["tasks", "--import", "my_task"]) == 0
    listed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:len(tasks.names()) + 1]}
    assert list(listed)[:3] == ["copy", "passkey", "multikey"] and "reverse" in listed
    assert listed["reverse"].split()[1:3] == ["8", "bytes"]
    doc = tasks.make("reverse", 80, 50, haystack=HAY)
    assert len(doc.text) == 80 and doc.expected == doc.text[doc.needle[0]:doc.needle[1]][::-1]
    assert mix.parse_mix("reverse:0.5") == {"reverse": 0.5}  # --mix takes its name
    with pytest.raises(ValueError, match="unknown style 'standard' for task 'reverse'; valid: bytes"):
        tasks.make("reverse", 80, 50, haystack=HAY, style="standard")
    # `lexkit retrieval` scores it on a run (another process would load it with the same --import)
    argv = ["retrieval", str(trained / "rope"), "--task", "reverse", "--lengths", "32", "--depths", "50",
            "--samples", "2", "--no-progress", "--import", "my_task"]
    assert main(argv) == 0
    assert "task reverse (bytes style), 2 documents per cell" in capsys.readouterr().out


def test_a_task_with_a_bad_size_or_style_is_refused(fresh_tasks):
    class NoSize(tasks.Task):
        name = "nosize"
        size = 0

    class Styled(tasks.Task):
        name = "styled"
        styles = ("tokens",)

    with pytest.raises(ValueError, match="size must be a positive integer"):
        tasks.register(NoSize)
    with pytest.raises(ValueError, match="styles .* must be among"):
        tasks.register(Styled)
    with pytest.raises(ValueError, match="task 'copy' is already registered"):
        tasks.register(type("Copy2", (tasks.Task,), {"name": "copy"}))
