"""The khop task (Sanford, Hsu and Telgarsky 2024's k-hop induction heads): its targets against a direct
reading of the paper's definition, its documents, its rows in a training mix and its probe, and the
inputs it refuses (one ``error:`` line, exit 2)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lexkit import tasks
from lexkit.data import mix

HAY = tasks.Haystack(b"def f(x):\n    return x + 1  # ok\n" * 20)


def paper_hop(x: bytes, k: int) -> bytes:
    """hop_k(X) by the paper's definition, positions 1..N: find_1(X, i) = max({j <= i : X_{j-1} = X_i}
    U {0}), find_k = find_1 applied k times, hop_k(X)_i = X_{find_k(X, i)}, "none" (_) where it is 0."""
    X = b"?" + x  # 1-indexed

    def find1(i: int) -> int:
        return max([j for j in range(2, i + 1) if X[j - 1] == X[i]] + [0])

    out = b""
    for i in range(1, len(x) + 1):
        at = i
        for _ in range(k):
            at = find1(at) if at else 0
        out += bytes([X[at]]) if at else b"_"
    return out


def test_hop_targets_are_the_papers_definition():
    assert tasks.hop_targets(b"abab", 1) == paper_hop(b"abab", 1) == b"__ba"
    assert tasks.hop_targets(b"abab", 2) == paper_hop(b"abab", 2) == b"___b"
    assert tasks.hop_targets(b"abcab", 2) == b"_____" and tasks.hop_targets(b"abcab", 0) == b"abcab"
    rng = np.random.default_rng(7)
    for _ in range(40):
        x = bytes(rng.choice(list(b"abcd"), int(rng.integers(1, 40))).tolist())
        for k in range(5):
            assert tasks.hop_targets(x, k) == paper_hop(x, k)


@pytest.mark.parametrize("hops, alphabet", [(2, 4), (1, 3), (3, 26)])
def test_documents_label_every_position_with_its_hop(hops, alphabet):
    for split in tasks.SPLITS:
        for i in range(4):
            doc = tasks.make(f"khop:hops={hops},alphabet={alphabet}", 100, 50, haystack=HAY, index=i, split=split)
            x = doc.text
            assert len(x) == 100 and set(x) <= set(b"abcdefghijklmnopqrstuvwxyz"[:alphabet])
            assert all(a != b for a, b in zip(x, x[1:]))  # no symbol twice in a row (their sampler)
            assert tasks.held_out(x) == (split == "eval")
            assert doc.targets == x[:1] + paper_hop(x, hops)[:-1]  # position p reads x[p-1], BOS at 0
            assert doc.answer == (1, 100) and doc.expected == paper_hop(x, hops)[:-1]
    a = tasks.make("khop", 60, 0, haystack=HAY, index=3)
    assert a == tasks.make("khop", 60, 0, haystack=HAY, index=3) and a.text != tasks.make("khop", 60, 0, haystack=HAY,
                                                                                          index=4).text


def test_a_mix_trains_and_probes_the_targets():
    doc = tasks.make("khop", 64, 0, haystack=HAY, index=1)
    x, y = mix.document_row(doc)
    assert x[0] == 256 and bytes(x[1:].tolist()) == doc.text[:-1] and bytes(y.tolist()) == doc.targets
    stream = mix.MixedStream(torch.tensor(list(b"some text to draw haystacks from\n" * 30)), "khop:1")
    xb, yb = stream.batch(0, 4, 64, seed=0)
    for row in range(4):  # every row a khop document: its targets are its hop targets
        text = bytes(xb[row, 1:].tolist())
        assert xb[row, 0] == 256 and bytes(yb[row, 1:].tolist()) == paper_hop(text, 2)
    probe = mix.mix_probe(torch.tensor(list(b"validation text\n" * 40)), "khop:hops=1:0.5", 32, count=3)
    xs, ys, masks = probe["khop:hops=1"]
    assert masks[:, 0].sum() == 0 and masks[:, 1:].all()
    assert bytes(ys[0, 1:].tolist()) == paper_hop(bytes(xs[0, 1:].tolist()), 1)


def test_the_probe_reports_exact_bits_and_per_position_accuracy():
    """val_<task>_acc is the share of labelled positions whose argmax is right (one minus the per-position
    error Sanford et al. report); exact the share of sequences right at every labelled position; bits the
    mean cross-entropy in bits: from a model whose logits are built to be right at chosen positions."""
    import math

    from lexkit.training.loop import validation_tasks

    y = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 8]])
    mask = torch.tensor([[False, True, True, True], [False, True, True, True]])
    wrong = {(0, 2), (1, 1), (1, 3)}  # 3 of the 6 labelled positions wrong: sequence 0 has one, sequence 1 two

    class Fixed(torch.nn.Module):
        def forward(self, x):
            logits = torch.zeros(2, 4, 257)
            for b in range(2):
                for t in range(4):
                    logits[b, t, (y[b, t] + 1) if (b, t) in wrong else y[b, t]] = 10.0
            return logits

    out = validation_tasks(Fixed(), {"t": (torch.zeros(2, 4, dtype=torch.long), y, mask)}, torch.device("cpu"))
    assert out["val_t_acc"] == 0.5 and out["val_t_exact"] == 0.0
    right_nll = math.log(1 + 256 * math.exp(-10))  # the answer's logit 10, 256 others at 0
    wrong_nll = 10 + right_nll
    assert out["val_t_bits"] == round((3 * right_nll + 3 * wrong_nll) / 6 / math.log(2), 6)


def test_khop_is_listed_with_its_parameters(capsys):
    from lexkit.cli import main

    assert main(["tasks"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("khop "))
    assert "hops=2, alphabet=4" in line and "Sanford" in line


@pytest.mark.parametrize("spec, message", [
    ("khop:hops=-1:0.5", "hops"),
    ("khop:alphabet=1:0.5", "alphabet"),
    ("khop:alphabet=27:0.5", "alphabet"),
    ("khop:depth=3:0.5", "depth"),
])
def test_train_refuses_a_bad_khop_in_one_line(tmp_path, capsys, spec, message):
    from lexkit.cli import main

    argv = ["train", "--preset", "tiny", "--scheme", "rope", "--out", str(tmp_path / "r"), "--quiet", "--mix", spec]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
    assert not (tmp_path / "r").exists()


def test_retrieval_refuses_to_score_a_labelling_task(trained, capsys):
    from lexkit.cli import main

    argv = ["retrieval", str(trained / "rope"), "--task", "khop", "--lengths", "32", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "labels every position" in err[0]
