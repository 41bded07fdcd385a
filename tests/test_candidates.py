"""A task's candidates (kvthread's link values or keys, ordinal's occurrences, multikey's keys): the
guessing baseline beside its exact match, and how often the answer is some candidate."""

import pytest

from kit import tiny_gpt
from lexkit import retrieval, tasks
from lexkit.instruments.subject import RunSubject

HAY = tasks.Haystack(b"the quick brown fox jumps over the lazy dog. " * 40)


def _doc(task, length=128, depth=50.0, index=0):
    return tasks.make(task, length, depth, haystack=HAY, seed=1, index=index)


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_kvthread_candidates_are_every_links_value_or_key(direction):
    doc = _doc(f"kvthread:direction={direction}")  # 2 chains of 2 hops: 4 links
    links = [piece.split(b"=") for piece in doc.text.split(b"~")[1:-1]]  # '~A=B<filler>' pieces
    keys, values = [k for k, _ in links], [v[:4] for _, v in links]
    want = values if direction == "forward" else keys
    assert sorted(doc.candidates()) == sorted(want) and len(doc.candidates()) == 4
    assert doc.candidates()[0] == doc.expected and tasks.guess_rate(doc) == 0.25


def test_ordinal_candidates_are_the_cues_occurrences_and_copy_has_none():
    doc = _doc("ordinal:count=5")
    assert len(doc.candidates()) == 5 and doc.expected in doc.candidates()
    assert all(doc.prompt.count(b"=" + c) == 1 for c in doc.candidates())  # each given once before the question
    assert tasks.guess_rate(doc) == pytest.approx(0.2)
    copy = _doc("copy")
    assert copy.candidates() == [copy.expected]
    assert tasks.guess_rate(copy) == pytest.approx(copy.alphabet ** -len(copy.expected))


def test_with_answer_puts_a_candidate_in_the_answers_place():
    doc = _doc("kvthread")
    other = doc.candidates()[1]
    swapped = doc.with_answer(other)
    assert swapped.prompt == doc.prompt and swapped.expected == other and len(swapped.text) == len(doc.text)
    with pytest.raises(ValueError, match="an answer of 3 bytes in place of one of 4"):
        doc.with_answer(b"abc")


def test_some_candidate_by_teacher_forcing_equals_greedy_decoding():
    """Greedy decoding produces a candidate exactly when the teacher-forced argmax is right at each of its
    bytes with it in the answer's place: the two ways of scoring give the same cells, baseline and rate."""
    subject = RunSubject.of(tiny_gpt("rope", train_len=64, spread=True))
    kw = dict(depths=[0.0, 100.0], samples=6, haystack=HAY, seed=2)
    forced = retrieval.score(subject, "ordinal:count=2", [64], decode=False, **kw)
    greedy = retrieval.score(subject, "ordinal:count=2", [64], decode=True, **kw)
    for f, g in zip(forced, greedy):
        assert (f.correct, f.guess, f.candidate) == (g.correct, g.guess, g.candidate)
        assert f.guess == 0.5 and f.candidate >= f.accuracy
    copy = retrieval.score(subject, "copy", [64], decode=False, **kw)
    assert all(c.guess is None and c.candidate is None for c in copy)
    assert "guess" not in copy[0].to_json()  # left out of a cell without candidates


def test_lexkit_retrieval_prints_the_baseline_beside_kvthread(tmp_path, capsys):
    from cli_checks import save_run
    from lexkit.cli import main

    run = save_run(tmp_path, tiny_gpt("rope", train_len=64))
    assert main(["retrieval", str(run), "--task", "kvthread", "--lengths", "64", "--depths", "0", "--samples", "2",
                 "--threads", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "guessing among a document's candidates / the answer is some candidate" in out
    assert "25 / " in out
