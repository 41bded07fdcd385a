"""The embedding options of ``lexkit train`` (lexkit.training.embedding, ModelConfig.untied_head): each changes
what it says, from closed forms of AdamW's decoupled decay and from runs that differ in one option
only; recorded in config.json; a run written before them loads and resumes as before."""

import json
import re

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from cli_checks import snapshot, train_refused
from lexkit import GPT
from lexkit.core.errors import RunError
from lexkit.data.corpus import Corpus, Stream, tokens_of
from lexkit.training import runs
from lexkit.training.embedding import Unseen, reset_seed
from lexkit.training.loop import lr_at, make_optimizer, train
from lexkit.training.settings import TrainConfig, configs
from toy_corpus import DOCS

#: byte values no document of the toy corpus holds: no batch ever shows them
ABSENT = sorted(set(range(256)) - set(b"".join(DOCS)))


@pytest.fixture(scope="module")
def corpus():
    return Corpus("toy", DOCS[:-3], DOCS[-3:], {"source": "toy", "files": len(DOCS), "bytes": sum(map(len, DOCS))})


def tiny(**kw):
    """A tiny rope run of 4 steps, one checkpoint at the end."""
    return configs("tiny", "rope", **{"steps": 4, "save_every": 4, "eval_every": 4, "warmup": 2, **kw})


def trained(tmp_path, corpus, name="run", **kw):
    train(tmp_path / name, *tiny(**kw), progress=False, corpus=corpus)
    return runs.load(tmp_path / name)[0], tmp_path / name


def init_weights(**kw) -> dict:
    """The weights a run of ``tiny(**kw)`` starts from (the trainer seeds, then builds the model)."""
    model_cfg, train_cfg = tiny(**kw)
    torch.manual_seed(train_cfg.seed)
    return {k: v.detach().clone() for k, v in GPT(model_cfg).state_dict().items()}


@pytest.fixture(scope="module")
def tied_and_untied(tmp_path_factory, corpus):
    """untied_head -> (model, run directory) of ``tiny(untied_head=...)``: read them only (copy a run to change it)."""
    root = tmp_path_factory.mktemp("heads")
    return {untied: trained(root, corpus, f"untied{untied}", untied_head=untied) for untied in (False, True)}


def copy_of(run, to):
    """A copy of the finished run ``run`` at ``to`` (a run of the same settings, without training it again)."""
    import shutil

    return shutil.copytree(run, to)


def test_the_untied_head_is_a_matrix_of_its_own_after_a_step(tied_and_untied):
    (tied, tied_dir), (untied, untied_dir) = tied_and_untied[False], tied_and_untied[True]
    assert tied.head.weight is tied.embed.weight
    assert untied.head.weight is not untied.embed.weight
    assert not torch.equal(untied.head.weight, untied.embed.weight)  # N(0, 0.02²) draws each, trained apart
    assert untied.num_params() - tied.num_params() == 257 * 32
    # the tied run's weight file: today's keys (the head is the embedding, saved once); the untied's adds the head
    with safe_open(str(tied_dir / "model.safetensors"), "pt") as f:
        tied_keys = set(f.keys())
    with safe_open(str(untied_dir / "model.safetensors"), "pt") as f:
        untied_keys = set(f.keys())
    assert "head.weight" not in tied_keys and tied_keys == set(tied.state_dict()) - {"head.weight"}
    assert untied_keys == tied_keys | {"head.weight"}
    config = json.loads((untied_dir / "config.json").read_text())
    assert config["model"]["untied_head"] is True


def test_a_byte_no_batch_shows_shrinks_by_the_closed_form_of_adamw_decay_and_not_at_all_without(tmp_path, corpus,
                                                                                                tied_and_untied):
    """Untied, an absent byte's embedding row gets no gradient at all: AdamW's decoupled decay alone
    moves it, row_T = row_0·Π_t (1 - lr_t·λ), and with --embedding-decay 0 it stays bit for bit."""
    model_cfg, train_cfg = tiny(untied_head=True)
    factor = torch.tensor([1 - lr_at(t, train_cfg) * train_cfg.weight_decay for t in range(train_cfg.steps)],
                          dtype=torch.float64).prod()
    row0 = init_weights(untied_head=True)["embed.weight"][ABSENT].double()
    decayed = tied_and_untied[True][0]  # tiny(untied_head=True)
    kept, _ = trained(tmp_path, corpus, "kept", untied_head=True, embedding_decay=0.0)
    got = decayed.embed.weight.detach()[ABSENT].double()
    assert float((got - row0 * factor).abs().max() / row0.abs().max()) < 1e-6
    assert factor < 1 - 5e-4  # 4 steps of lr <= 3e-3 at decay 0.1: far above the tolerance
    assert torch.equal(kept.embed.weight.detach()[ABSENT], init_weights(untied_head=True)["embed.weight"][ABSENT])


def test_tied_the_rows_of_unseen_bytes_move_with_the_head_and_collapse_toward_one_direction(tied_and_untied):
    """What the options are for: tied, the softmax pushes every unseen byte's row the same way (To
    See the Unseen): their rows move away from their independent draws, toward their common mean."""
    def spread(weight):
        rows = weight[ABSENT]
        return float(torch.nn.functional.cosine_similarity(rows, rows.mean(0, keepdim=True)).mean())

    start = init_weights()["embed.weight"]
    tied, untied = tied_and_untied[False][0].embed.weight.detach(), tied_and_untied[True][0].embed.weight.detach()
    assert spread(tied) > spread(start) + 0.1 and spread(tied) > spread(untied) + 0.1


def test_the_embedding_decay_is_its_own_optimizer_group():
    model = GPT(tiny()[0])
    today = make_optimizer(model, TrainConfig())
    assert [g["weight_decay"] for g in today.param_groups] == [0.1, 0.0]  # the groups of every run before it
    assert any(p is model.embed.weight for p in today.param_groups[0]["params"])
    none = make_optimizer(model, TrainConfig(embedding_decay=0.0))
    group = next(g for g in none.param_groups if any(p is model.embed.weight for p in g["params"]))
    assert group["weight_decay"] == 0.0 and group["params"] == [model.embed.weight]
    assert sum(len(g["params"]) for g in none.param_groups) == sum(len(g["params"]) for g in today.param_groups)


@pytest.mark.parametrize("untied", [False, True])
def test_a_frozen_embedding_is_its_init_after_training(tmp_path, corpus, untied):
    model, run = trained(tmp_path, corpus, untied_head=untied, freeze_embedding=True)
    start = init_weights(untied_head=untied)
    assert torch.equal(model.embed.weight.detach(), start["embed.weight"])
    assert torch.equal(model.head.weight.detach(), start["head.weight"]) is not untied  # untied: the head trains
    assert not torch.equal(model.blocks[0].qkv.weight.detach(), start["blocks.0.qkv.weight"])
    assert json.loads((run / "config.json").read_text())["train"]["freeze_embedding"] is True
    optimizer = make_optimizer(model, TrainConfig(freeze_embedding=True))
    assert all(p is not model.embed.weight for g in optimizer.param_groups for p in g["params"])


# -- resetting the rows of unseen bytes: the rule of lexkit.training.embedding -------------------------------------
def seen_by(corpus, cfg_model, cfg_train, steps: int) -> set[int]:
    """The token ids the trainer's first ``steps`` batches hold (inputs and targets)."""
    stream = Stream(tokens=tokens_of(corpus.train))
    out: set[int] = set()
    for t in range(steps):
        x, y = stream.batch(t, cfg_train.batch, cfg_model.train_len, cfg_train.seed)
        out |= set(x.flatten().tolist()) | set(y.flatten().tolist())
    return out


def test_reset_unseen_draws_the_documented_rows_and_changes_nothing_else(tmp_path, corpus, tied_and_untied):
    """reset_unseen = steps: one reset, after the last step. Against the same run without it, every
    tensor is the same except the unseen ids' rows of the embedding and of the untied head, which are
    randn(k, d)·0.02 from a generator seeded reset_seed(seed, done), embedding first; their AdamW
    moments are 0 in the checkpoint."""
    model_cfg, train_cfg = tiny(untied_head=True)
    unseen = sorted(set(range(257)) - seen_by(corpus, model_cfg, train_cfg, train_cfg.steps))
    assert set(ABSENT) <= set(unseen)
    plain = tied_and_untied[True][0]  # tiny(untied_head=True)
    reset, run = trained(tmp_path, corpus, "reset", untied_head=True, reset_unseen=train_cfg.steps)
    gen = torch.Generator().manual_seed(reset_seed(train_cfg.seed, train_cfg.steps))
    want = {name: torch.randn(len(unseen), 32, generator=gen) * 0.02 for name in ("embed.weight", "head.weight")}
    a, b = plain.state_dict(), reset.state_dict()
    for name in a:
        if name in want:
            keep = [i for i in range(257) if i not in unseen]
            assert torch.equal(a[name][keep], b[name][keep]) and torch.equal(b[name][unseen], want[name])
        else:
            assert torch.equal(a[name], b[name]), name
    tensors = load_file(str(run / "checkpoint.safetensors"))
    order = [p for g in make_optimizer(reset, train_cfg).param_groups for p in g["params"]]  # the checkpoint's indices
    for table in (reset.embed.weight, reset.head.weight):
        index = next(i for i, p in enumerate(order) if p is table)
        for slot in ("exp_avg", "exp_avg_sq"):
            moment = tensors[f"optim.{index}.{slot}"]
            assert moment[unseen].abs().max() == 0 and moment.abs().max() > 0
    with safe_open(str(run / "checkpoint.safetensors"), "pt") as f:
        assert json.loads(f.metadata()["trainer"])["seen"] == sorted(set(range(257)) - set(unseen))


def test_the_unseen_tracker_marks_resets_and_keeps_what_it_has_seen():
    table = torch.nn.Parameter(torch.ones(6, 3))
    optimizer = torch.optim.AdamW([table])
    table.grad = torch.ones(6, 3)
    optimizer.step()
    tracker = Unseen(2, 6)
    tracker.observe(torch.tensor([[0, 1]]), torch.tensor([[1, 4]]))
    assert tracker.seen() == [0, 1, 4] and not tracker.due(1) and tracker.due(2) and tracker.due(4)
    before = table.detach().clone()
    assert tracker.reset([table], optimizer, seed=3, done=2) == [2, 3, 5]
    assert torch.equal(table[[0, 1, 4]], before[[0, 1, 4]])
    gen = torch.Generator().manual_seed(reset_seed(3, 2))
    assert torch.equal(table[[2, 3, 5]].detach(), torch.randn(3, 3, generator=gen) * 0.02)
    assert optimizer.state[table]["exp_avg"][[2, 3, 5]].abs().max() == 0
    assert optimizer.state[table]["exp_avg"][[0, 1, 4]].abs().min() > 0
    assert Unseen(2, 6, seen=[0, 1, 4]).seen() == [0, 1, 4]  # what a checkpoint gives back
    assert not Unseen(0, 6) and not Unseen(0, 6).due(4)


def test_a_run_with_resets_killed_and_resumed_ends_with_the_same_weights(tmp_path, corpus, monkeypatch):
    from stop import stop_at

    cfgs = tiny(steps=6, save_every=3, reset_unseen=2)
    train(tmp_path / "whole", *cfgs, progress=False, corpus=corpus)
    restore = stop_at(monkeypatch, 5)  # killed before step index 5: the checkpoint of step 3 is kept
    with pytest.raises(KeyboardInterrupt):
        train(tmp_path / "cut", *cfgs, progress=False, corpus=corpus)
    restore()
    train(tmp_path / "cut", *cfgs, resume=True, progress=False, corpus=corpus)
    whole, cut = (tmp_path / name / "model.safetensors" for name in ("whole", "cut"))
    assert whole.read_bytes() == cut.read_bytes()


# -- recorded, settable, old runs as before, bad values --------------------------------------------------
def test_every_option_is_a_settings_keyword_and_recorded(tmp_path, corpus):
    model_cfg, train_cfg = configs("tiny", "rope", untied_head=True, embedding_decay=0.0, reset_unseen=10)
    assert model_cfg.untied_head and train_cfg.embedding_decay == 0.0 and train_cfg.reset_unseen == 10
    assert configs("tiny", "rope", freeze_embedding=True)[1].freeze_embedding
    _, run = trained(tmp_path, corpus, untied_head=True, embedding_decay=0.05, reset_unseen=3)
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["untied_head"] is True
    assert {k: config["train"][k] for k in ("embedding_decay", "freeze_embedding", "reset_unseen")} == \
        {"embedding_decay": 0.05, "freeze_embedding": False, "reset_unseen": 3}


NEW_KEYS = {"model": ("untied_head",),
            "train": ("embedding_decay", "freeze_embedding", "reset_unseen", "drop_positions_at", "drop_layers")}


def as_before(run):
    """``run`` as today's code wrote it before these options: config.json and the model config in
    both weight files without the new keys (tensors and their content hash untouched)."""
    config = json.loads((run / "config.json").read_text())
    for section, keys in NEW_KEYS.items():
        for key in keys:
            config[section].pop(key)
    (run / "config.json").write_text(json.dumps(config))
    for name in ("model.safetensors", "checkpoint.safetensors"):
        with safe_open(str(run / name), "pt") as f:
            meta = dict(f.metadata())
        model = json.loads(meta["model"])
        model.pop("untied_head")
        meta["model"] = json.dumps(model, sort_keys=True)
        save_file(load_file(str(run / name)), str(run / name), metadata=meta)


def test_a_run_written_before_the_options_loads_and_resumes_as_before(tmp_path, corpus, tied_and_untied):
    model_cfg, _ = tiny()
    for name in ("old", "new"):  # two copies of the run of tiny()
        copy_of(tied_and_untied[False][1], tmp_path / name)
    as_before(tmp_path / "old")
    assert "untied_head" not in json.loads((tmp_path / "old" / "config.json").read_text())["model"]
    old, config = runs.load(tmp_path / "old")
    new, _ = runs.load(tmp_path / "new")
    assert old.head.weight is old.embed.weight and "overrides" not in config  # tied, as it trained
    assert all(torch.equal(a, b) for a, b in zip(old.state_dict().values(), new.state_dict().values()))
    longer = configs("tiny", "rope", steps=6, save_every=4, eval_every=4, warmup=2)[1]
    for name in ("old", "new"):
        train(tmp_path / name, model_cfg, longer, resume=True, progress=False, corpus=corpus)
    old_file, new_file = (tmp_path / name / "model.safetensors" for name in ("old", "new"))
    assert old_file.read_bytes() == new_file.read_bytes()


@pytest.mark.parametrize("flags, words", [
    (["--embedding-decay", "-1"], "embedding_decay must be a finite number >= 0"),
    (["--embedding-decay", "nan"], "embedding_decay"),
    (["--reset-unseen", "-2"], "reset_unseen must be an integer >= 0"),
    (["--freeze-embedding", "--reset-unseen", "5"], "give one of them"),
    (["--freeze-embedding", "--embedding-decay", "0"], "no decay reaches it"),
])
def test_bad_embedding_options_are_one_error_line_and_write_nothing(tmp_path, capsys, flags, words):
    assert words in train_refused(tmp_path, capsys, ["--scheme", "rope", *flags])


def test_resume_compares_the_options(tmp_path, corpus, tied_and_untied):
    copy_of(tied_and_untied[False][1], tmp_path / "run")  # the run of tiny()
    before = snapshot(tmp_path / "run")
    for changed, words in ((tiny(untied_head=True), "model.untied_head (False -> True)"),
                           (tiny(reset_unseen=2), "train.reset_unseen (0 -> 2)")):
        with pytest.raises(RunError, match=re.escape(words)):
            train(tmp_path / "run", *changed, resume=True, progress=False, corpus=corpus)
    assert snapshot(tmp_path / "run") == before


def test_an_embedding_decay_equal_to_the_weight_decay_trains_as_the_default_bit_for_bit(tmp_path, corpus,
                                                                                       tied_and_untied):
    """What lets a study key ``embedding_decay: 0.1`` as the default (TrainConfig.canonical): the
    embedding in a group of its own at the same decay steps exactly as in the decayed group."""
    given = tiny(embedding_decay=0.1)[1]
    assert given.weight_decay == 0.1 and given.canonical().embedding_decay is None
    assert tiny(embedding_decay=0.05)[1].canonical().embedding_decay == 0.05  # a decay of its own stays
    own, _ = trained(tmp_path, corpus, "own", embedding_decay=0.1)
    default = tied_and_untied[False][0]
    for (name, a), (_, b) in zip(own.state_dict().items(), default.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
