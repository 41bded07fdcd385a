"""The mix's curriculum (``lexkit train --curriculum F``, TrainConfig.curriculum; lexkit.tasks.Task.curriculum):
for the first ceil(F * steps) steps a task document draws its curriculum values (kvthread: one hop), then
the task's usual choices; a run without it draws and keys exactly as before; bad values are one line."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lexkit import tasks
from lexkit.data import mix
from lexkit.training.settings import TrainConfig


def test_early_kvthread_documents_take_one_hop_and_later_ones_draw_as_before():
    early = [tasks.draw_spec("kvthread", np.random.default_rng(i), early=True) for i in range(60)]
    later = [tasks.draw_spec("kvthread", np.random.default_rng(i)) for i in range(60)]
    assert all(dict(tasks.parse(s)[1])["hops"] == 1 for s in early)
    assert {dict(tasks.parse(s)[1])["direction"] for s in early} == {"forward", "backward"}  # only hops is eased
    hops = [dict(tasks.parse(s)[1])["hops"] for s in later]
    assert set(hops) == {1, 2}
    for i, spec in enumerate(later):  # the draw as it always was: one uniform integer per choice, in order
        rng = np.random.default_rng(i)
        want = {"hops": (1, 2)[int(rng.integers(0, 2))], "direction": tasks.DIRECTIONS[int(rng.integers(0, 2))]}
        assert dict(tasks.parse(spec)[1]) | want == dict(tasks.parse(spec)[1])
    assert tasks.draw_spec("copy", np.random.default_rng(0), early=True) == "copy"  # no mix choices: as given


def test_the_stream_draws_the_curriculum_before_its_step_and_the_usual_after(monkeypatch):
    seen = []
    real = tasks.draw_spec

    def spy(task, rng, early=False):
        seen.append((task, early))
        return real(task, rng, early)

    monkeypatch.setattr(tasks, "draw_spec", spy)
    tokens = torch.randint(0, 256, (20000,), generator=torch.Generator().manual_seed(0)).to(torch.int16)
    stream = mix.MixedStream(tokens, "kvthread:0.5", curriculum=2)
    plain = mix.MixedStream(tokens, "kvthread:0.5")
    for step in range(4):
        seen.clear()
        x, _ = stream.batch(step, 8, 64, seed=0)
        assert seen and all(early == (step < 2) for _, early in seen)
        if step >= 2:  # past the curriculum: the batches of a run without one
            assert torch.equal(x, plain.batch(step, 8, 64, seed=0)[0])


def test_the_setting_is_checked_recorded_only_when_set_and_counted_in_steps():
    cfg = TrainConfig(steps=1000, mix="kvthread:0.2", curriculum=0.25)
    assert cfg.curriculum_steps == 250 and cfg.recorded()["curriculum"] == 0.25
    assert TrainConfig(steps=999, mix="kvthread:0.2", curriculum=0.1).curriculum_steps == math.ceil(99.9)
    assert "curriculum" not in TrainConfig(mix="kvthread:0.2").recorded()  # unset: the keys of before
    with pytest.raises(ValueError, match=r"--curriculum 0.5: no task of the mix \(copy:0.5\) has a curriculum"):
        TrainConfig(mix="copy:0.5", curriculum=0.5)
    for bad in (1.0, -0.1, True):
        with pytest.raises(ValueError, match=r"--curriculum must be a fraction of the steps in \[0, 1\)"):
            TrainConfig(mix="kvthread:0.2", curriculum=bad)


def test_a_bad_curriculum_on_the_command_line_is_one_line_and_writes_nothing(tmp_path, capsys):
    from lexkit.cli import main

    out = tmp_path / "run"
    code = main(["train", "--scheme", "rope", "--preset", "tiny", "--steps", "2", "--mix", "copy:0.5",
                 "--curriculum", "0.5", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: --curriculum 0.5") and not out.exists()
