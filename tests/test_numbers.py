"""Every number true: a study interrupted inside a context-extension fine-tune reports the same
table E as one that never stopped; `lexkit runs` shows the bpb of the weights it keeps; the
defaults `lexkit schemes` shows are accepted back; `study --dry-run` plans table E."""

import json

import pytest

from kit import tiny_gpt
from lexkit import positions, runs
from lexkit.cli import main
from lexkit.data import Corpus
from lexkit.settings import configs
from lexkit.study import Study, StudyConfig
from lexkit.study.tables.extension import finetune, finetunes
from lexkit.study.tables.extension.report import extension_table
from lexkit.study.tables.extension.rows import section
from lexkit.train import train
from stop import stop_at
from toy_corpus import STUDY_DOCS as DOCS
from toy_corpus import write_corpus

#: table G (use of context), where this lexkit has it, is left out of these studies: its runs
#: train for thousands of steps, and table E is what is measured here
NO_G = {"retrieval": False}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"), DOCS)


def kill_at(monkeypatch, steps: int, at: int, nth: int = 1):
    """Raise KeyboardInterrupt (as a SIGKILL would stop it: no checkpoint written) the ``nth`` time
    a run of ``steps`` steps reaches step index ``at``: the study's fine-tunes have their own
    number of steps (not the base run's), so the kill lands inside one of them."""
    import lexkit.train as T

    real, seen = T.lr_at, {"n": 0}

    def patched(step, cfg):
        if cfg.steps == steps and step == at:
            seen["n"] += 1
            if seen["n"] == nth:
                raise KeyboardInterrupt
        return real(step, cfg)

    monkeypatch.setattr(T, "lr_at", patched)
    return lambda: monkeypatch.setattr(T, "lr_at", real)


@pytest.mark.slow
def test_a_study_killed_inside_a_finetune_reports_the_same_table_e(tmp_path, data_dir, monkeypatch):
    """(About 30 s: three studies' worth of table E; the fast sibling below trains the study's
    fine-tune configuration alone.) Killed inside the first fine-tune before its first checkpoint (a resume reloads the
    sha256-checked parent), then inside the second after one (a resume continues from it),
    then run to the end: table E, cell for cell, is the uninterrupted study's."""
    monkeypatch.setattr("lexkit.study.execution.write_report", lambda results, out: None)  # figures: not the point
    ft_steps = 4  # checkpoints every ceil(4 / 4) = 1 step
    cfg = StudyConfig(preset="tiny", schemes=["rope"], patterns=["causal"], lengths=[32, 64], steps=3,
                      data=str(data_dir), eval_docs=1, resolution_texts=1, extension_steps=ft_steps, **NO_G)
    whole = Study(cfg, tmp_path / "whole", progress=False, echo=None).run()

    out = tmp_path / "killed"
    restore = kill_at(monkeypatch, ft_steps, at=0)  # in the first fine-tune, before its first checkpoint
    with pytest.raises(KeyboardInterrupt):
        Study(cfg, out, progress=False, echo=None).run()
    restore()
    first = [d for d in (out / "runs").iterdir() if "-ft-" in d.name]
    assert len(first) == 1 and (first[0] / runs.CONFIG).is_file() and not (first[0] / runs.CHECKPOINT).exists()
    restore = kill_at(monkeypatch, ft_steps, at=2, nth=2)  # the first re-runs past 2; then the second stops
    with pytest.raises(KeyboardInterrupt):
        Study(cfg, out, progress=False, echo=None).run()
    restore()
    second = [d for d in (out / "runs").iterdir() if "-ft-" in d.name and d != first[0]]
    checkpointed = [(runs.trainer_state(d) or {}).get("step") for d in second]
    resumed = Study(cfg, out, progress=False, echo=None).run()

    assert len(section(whole).rows) == len(section(resumed).rows) > len(finetunes(32))
    assert extension_table(resumed) == extension_table(whole)
    for a, b in zip(section(whole).rows, section(resumed).rows):
        assert (a.label, a.pattern) == (b.label, b.pattern)
        assert [r.bpb for r in a.results] == [r.bpb for r in b.results], a.label
    assert checkpointed == [2]  # the second was resumed from its checkpoint at step 2
    for row in section(resumed).rows:
        if row.finetune:
            config = json.loads((out / row.finetune.run / runs.CONFIG).read_text())
            assert config["init"]["run"] == str((out / "runs").resolve() / next(
                r.run for r in resumed.runs if r.label == "rope").split("/")[-1])


def test_the_studys_finetune_checkpoints_and_resumes_to_the_same_weights(tmp_path, data_dir, monkeypatch):
    """The study's fine-tune configuration checkpoints every ceil(steps / 4) steps (its cache key
    does not depend on that); killed before its first checkpoint it restarts from its parent,
    killed after one it continues from it, and either way ends with the uninterrupted weights."""
    cfg = StudyConfig(preset="tiny", schemes=["rope"], patterns=["causal"], lengths=[32, 64], steps=3,
                      data=str(data_dir), eval_docs=1, resolution_texts=1, extension_steps=4, **NO_G)
    study = Study(cfg, tmp_path / "study", progress=False, echo=None)
    plan = study.plan
    cell = plan.cells()[0]
    base = tmp_path / "study" / "runs" / cell.name
    train(base, cell.model_cfg, cell.train_cfg, progress=False, corpus=plan.corpus)
    ft = finetunes(32)[0]
    model_cfg, train_cfg, key = finetune.configs(base, cell, ft, 4)
    assert train_cfg.save_every == 1 and model_cfg.train_len == ft.train_len
    # the estimate's configs of it, before the parent exists, are these
    assert finetune.finetuned(cell.model_cfg, cell.train_cfg, ft, 4) == (model_cfg, train_cfg)
    assert finetune.configs(base, cell, ft, 4)[2] == key
    whole = tmp_path / "whole"
    train(whole, model_cfg, train_cfg, progress=False, corpus=plan.corpus, init=base)
    for at in (0, 2):
        out = tmp_path / f"killed{at}"
        restore = kill_at(monkeypatch, train_cfg.steps, at)
        with pytest.raises(KeyboardInterrupt):
            train(out, model_cfg, train_cfg, progress=False, corpus=plan.corpus, init=base)
        restore()
        assert (runs.trainer_state(out) or {}).get("step", 0) == at
        train(out, model_cfg, train_cfg, resume=True, progress=False, corpus=plan.corpus)
        assert (out / runs.WEIGHTS).read_bytes() == (whole / runs.WEIGHTS).read_bytes(), at


@pytest.mark.parametrize("steps", [None, "0"])
def test_study_dry_run_plans_table_e(tmp_path, data_dir, capsys, steps):
    argv = ["study", "--preset", "tiny", "--scheme", "rope", "--data", str(data_dir), "--lengths", "32,64",
            "--out", str(tmp_path / "s"), "--dry-run", "--no-retrieval"]
    assert main(argv + ([] if steps is None else ["--extension-steps", steps])) == 0
    text = capsys.readouterr().out
    assert "table E (context extension of rope)" in text
    if steps is None:
        assert all(ft.label in text for ft in finetunes(32)) and "3 fine-tunes of 60 steps" in text
    else:
        assert not any(ft.label in text for ft in finetunes(32)) and "no fine-tunes (--extension-steps 0)" in text
    assert not (tmp_path / "s" / "runs").exists()


def test_every_default_lexkit_schemes_shows_is_accepted_back(capsys):
    """`rerope:k=inf` is the default `lexkit schemes` prints; each shown key=value parses and
    means the default. Other infinities and NaN are still refused."""
    assert main(["schemes"]) == 0
    assert "k=inf" in capsys.readouterr().out
    for name, _, shown, _ in positions.describe():
        for item in filter(None, shown.split(", ")):
            if "=" in item and not item.endswith("=auto"):  # auto: no default value to give
                assert positions.canonical(f"{name}:{item}") == positions.canonical(name), item
    for bad in ("rerope:k=-inf", "rerope:k=nan", "rope:base=inf"):
        with pytest.raises(ValueError, match="not a finite number"):
            positions.parse(bad)


def test_runs_shows_the_bpb_of_the_checkpoint_not_of_steps_past_it(tmp_path, capsys, monkeypatch):
    """A run stopped at step 3 with its checkpoint at step 2 logged a validation bpb at step 3
    that belongs to weights nobody kept: `lexkit runs` shows step 2's."""
    corpus = Corpus("toy", [d * 2 for d in DOCS[:-3]], DOCS[-3:], {"source": "toy"})
    out = tmp_path / "run"
    stop_at(monkeypatch, 3)
    model_cfg, train_cfg = configs("tiny", "rope", steps=6, save_every=2, eval_every=1, log_every=1, eval_windows=2)
    with pytest.raises(KeyboardInterrupt):
        train(out, model_cfg, train_cfg, progress=False, corpus=corpus)
    rows = runs.read_metrics(out)
    bpb = {r["step"]: r["val_bpb"] for r in rows if "val_bpb" in r}
    assert runs.trainer_state(out)["step"] == 2 and set(bpb) == {1, 2, 3} and bpb[3] != bpb[2]
    assert runs.summary(out)["val_bpb"] == bpb[2]
    assert main(["runs", str(tmp_path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.endswith(str(out)))
    assert line.split()[:6] == ["rope", "-", "32", "2/6", "stopped", f"{bpb[2]:.4f}"]


@pytest.mark.parametrize("trained, asked, words", [
    ("rope", "t5", "it needs parameters the weights do not have (scheme.table)"),
    ("t5", "alibi", "the weights have parameters it does not use (scheme.table)"),
])
def test_eval_under_another_scheme_blames_the_scheme_not_the_file(tmp_path, capsys, trained, asked, words):
    """A run's weights that do not fit the --scheme asked for: the message names the flag and the
    scheme's parameters, never "model.safetensors does not match config.json" (the file is fine)."""
    from cli_checks import one_error_line, save_run

    run = save_run(tmp_path, tiny_gpt(trained, n_layers=1, d_model=16, train_len=8, seed=None))
    data = tmp_path / "doc.txt"
    data.write_bytes(DOCS[0])
    assert main(["eval", str(run), "--scheme", asked, "--lengths", "8", "--data", str(data), "--no-progress"]) == 2
    line = one_error_line(capsys)
    assert f"--scheme {asked} does not fit the weights of {run}" in line and words in line, line
    assert "does not match config.json" not in line


def test_mfu_peaks_by_device_name():
    """The dense BF16 peaks of the table (datasheet figures with sparsity halved); an NVL board
    is not read as its SXM namesake, and a device or dtype not in the table has no MFU."""
    from lexkit.provenance import mfu, peak_flops

    assert peak_flops("NVIDIA H200", "bfloat16") == 989.4e12 and peak_flops("NVIDIA H100 PCIe", "float16") == 756e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", "bfloat16") == 312e12
    assert peak_flops("NVIDIA H200 NVL", "bfloat16") is None and peak_flops("NVIDIA H100 NVL", "bfloat16") is None
    assert peak_flops("NVIDIA H200", "float32") is None and mfu(1e12, "Intel Xeon", "float32") is None
    assert mfu(494.7e12, "NVIDIA H200", "bfloat16") == pytest.approx(0.5)
