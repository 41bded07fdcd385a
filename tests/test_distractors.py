"""``induction:distract=K``: the trained formats' question recurring in the haystack after other keys (issue 70,
round 3's C1). Read back by an induction oracle written here (the earlier position whose context matches the
question's longest), and the inputs it refuses (one ``error:`` line, exit 2)."""

from __future__ import annotations

import pytest

from lexkit import tasks
from lexkit.data import mix
from lexkit.tasks import needles

HAY = tasks.Haystack(b"def f(x):\n    y = x + 1  # a comment, ok\n    return [y, x]\n" * 30)


def oracle(text: bytes, answer: int) -> list[tuple[int, int]]:
    """(match, position) for every earlier position: how many bytes before it equal the bytes before the
    answer (the context an induction head would match), longest first."""
    out = []
    for p in range(1, answer):
        n = 0
        while n < p and text[p - 1 - n] == text[answer - 1 - n]:
            n += 1
        out.append((n, p))
    return sorted(out, reverse=True)


@pytest.mark.parametrize("distract", [1, 3])
def test_the_asked_value_follows_the_longest_match_and_the_distractors_share_the_cue(distract):
    formats = set()
    for split in tasks.SPLITS:
        for i in range(12):
            doc = tasks.make(f"induction:distract={distract}", 160, 100 * (i % 5) / 4, haystack=HAY, index=i,
                             split=split, size=6)
            formats.add(doc.format)
            text, (a, b) = doc.text, doc.answer
            assert len(text) == 160 and b == 160 and doc.format in needles.trained()
            ranked = oracle(text, a)
            (best, at), (second, _) = ranked[0], ranked[1]
            assert best > second and text[at:at + b - a] == doc.expected  # the needle's value, by its key
            assert (at, at + b - a) == doc.needle
            assert len(doc.distractors) == distract
            for start, end in doc.distractors:
                match = next(n for n, p in ranked if p == start)
                assert 1 <= match < best  # the cue is shared; the key is not
                assert text[start:end] != doc.expected and end - start == b - a
            assert needles.reads_held_out(text, doc.needle, doc.answer) is None
            assert tasks.held_out(doc.expected) == (split == "eval")
            assert tasks.guess_rate(doc) == 1 / (distract + 1)
    assert formats == set(needles.trained())


def test_a_tilde_needle_is_keyed_and_its_marker_recurs_with_other_keys():
    for i in range(40):
        doc = tasks.make("induction:distract=2", 120, 50, haystack=HAY, index=i, size=5)
        if doc.format != "tilde":
            continue
        prompt = doc.prompt
        key = prompt[-4:-1]  # KEY~ asked
        assert prompt.endswith(b"~") and key.isalpha() and prompt.count(b"~") == 4  # needle, 2 distractors, question
        marks = [j for j, byte in enumerate(prompt[:-1]) if byte == ord("~")]
        given = [prompt[j - 3:j] for j in marks]
        assert given.count(key) == 1 and len(set(given)) == 3  # the needle's key once, two other keys
        values = {prompt[j + 1:j + 6] for j in marks}
        assert prompt[marks[given.index(key)] + 1:][:5] == doc.expected and len(values) == 3
        return
    pytest.fail("no tilde document among 40")


def test_no_distractors_leaves_the_documents_as_they_were():
    for i in range(6):
        assert tasks.make("induction:distract=0", 90, 40, haystack=HAY, index=i) == tasks.make(
            "induction", 90, 40, haystack=HAY, index=i)
    assert tasks.canonical("induction:distract=0") == "induction"
    assert mix.parse_mix("induction:distract=2:0.65,kvthread:0.05") == {"induction:distract=2": 0.65, "kvthread": 0.05}


def test_the_mix_and_its_probe_take_it_at_the_hunts_length():
    mix.check_mix("induction:distract=2:0.65", 64)
    text = __import__("torch").tensor(list(b"validation text, plain\n" * 40))
    probe = mix.mix_probe(text, "induction:distract=2:0.5", 64, count=4)
    assert set(probe) == {"induction:distract=2", mix.HELD_OUT}  # the held-out formats' probe has no distractors


@pytest.mark.parametrize("spec, message", [
    ("induction:distract=-1:0.5", "distract"),
    ("induction:distract=two:0.5", "distract"),
    ("induction:distract=40:0.5", "more than the training length 32"),
    ("copy:distract=2:0.5", "distract"),
])
def test_train_refuses_a_bad_distractor_mix_in_one_line(tmp_path, capsys, spec, message):
    from lexkit.cli import main

    argv = ["train", "--preset", "tiny", "--scheme", "rope", "--out", str(tmp_path / "r"), "--quiet", "--mix", spec]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
    assert not (tmp_path / "r").exists()
