"""lexkit.conformance.models: the float64 forward is transformers' in float64 (where transformers computes in
float64), lexkit's own runtime and transformers pass every model case, each planted class of whole-model bug
fails the cases that must catch it, the protocol carries whole models out of process, and the command
refuses bad input. Small cases (L 8, windows of 4: 256 tokens at 32x) keep it fast; the battery's own
(L 64, windows of 16) run the same code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from lexkit.cli import main
from lexkit.conformance import models
from lexkit.conformance.models import forward, harness
from lexkit.conformance.models.cases import CASES, battery

pytestmark = pytest.mark.xdist_group("hf")  # beside test_hf.py: one worker imports transformers and writes models
SMALL = battery(8, 4)


#: the fast sibling's cases of the whole-battery runs (slow: every case): a scaling, LongRoPE's batch
#: difference, a window, per-layer-type RoPE, sinks and experts
FAST = [c for c in SMALL if c.name in ("models/llama-llama3", "models/phi3-longrope", "models/mistral-window",
                                       "models/olmo3-hybrid", "models/gpt-oss")]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Where the small cases' checkpoints and references are made (once each, when first asked for)."""
    pytest.importorskip("transformers")
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def lexkit_on(root):
    """(bug, case name) -> the result of lexkit's own runtime with ``bug`` planted ("" none) on that small
    case, run once for the module (several tests read the same run)."""
    done: dict = {}

    def get(bug: str, name: str):
        if (bug, name) not in done:
            (done[bug, name],) = models.run([models.toy(bug)], [c for c in SMALL if c.name == name], root)
        return done[bug, name]

    return get


def test_the_battery_is_what_the_issue_asks(root):
    assert [c.original for c in CASES] == [64] * len(CASES) and all(max(c.lengths) == 32 * 64 for c in CASES)
    families = {c.model_type for c in CASES}
    assert {"llama", "qwen2", "qwen3", "phi3", "mistral", "olmo3", "gpt_oss", "gemma3_text", "cohere2"} <= families
    assert all(c.why and c.source for c in CASES)
    assert {c.name for c in SMALL} == {c.name for c in CASES}


def test_a_case_s_content_hash_survives_what_is_done_to_its_config():
    """transformers standardizes rope_parameters in place (a checkpoint's config class did so to the case's
    own dict, and the next runtime wrote a second checkpoint): a case hands out copies, nested dicts too."""
    from lexkit.conformance.models.checkpoint import key

    case = next(c for c in SMALL if c.name == "models/phi3-longrope")
    before = key(case)
    config = case.hf_config
    config["rope_parameters"]["rope_type"] = "standardized"
    config["rope_parameters"]["short_factor"].append(9.0)
    assert key(case) == before and case.hf_config["rope_parameters"]["rope_type"] == "longrope"


#: the fast sibling's families of the float64 check (slow: every case): fused projections and partial
#: rotation, post-norms and per-layer-type RoPE, sinks and experts, Gemma's recipe
RECIPES = [c for c in SMALL if c.name in ("models/phi3-longrope", "models/olmo3-hybrid", "models/gpt-oss",
                                          "models/gemma3", "models/cohere2")]


@pytest.mark.parametrize("cases", [pytest.param(SMALL, marks=pytest.mark.slow, id="all"),
                                   pytest.param(RECIPES, id="fast")])
def test_the_float64_forward_is_transformers_in_float64(root, cases):
    """The reference's structure (norms, projections, biases, q/k norms, post-norms, fused weights, masks by
    layer type, RoPE by layer type, sinks and experts, Gemma's recipe) against transformers' own modelling
    code on the same weights, every family; transformers rounds its RMSNorm and its inverse frequencies through
    float32 even in float64, so the two agree to that. On the first 64 of a case's ids (8·L: past its window, L
    and LongRoPE's switch to its long factors; the structure shows at any such length, and all 256 took 4x)."""
    from transformers import AutoModelForCausalLM

    for case in cases:
        directory = models.checkpoint(case, root)
        config, weights = forward.read(directory)
        ids = harness.ids_of(case)[:64]
        ours = forward.Decoder(config, weights).prefill(ids)
        hf = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float64, attn_implementation="eager",
                                                  experts_implementation="eager")  # (grouped_mm has no float64)
        with torch.no_grad():
            theirs = hf(ids[None]).logits[0]
        assert (ours - theirs).abs().max() < 1e-4 * ours.abs().max(), case.name
        assert float((ours - theirs).abs().max()) > 0  # two implementations, not one


@pytest.mark.parametrize("cases", [pytest.param(SMALL, marks=pytest.mark.slow, id="all"),
                                   pytest.param(FAST, id="fast")])
def test_lexkit_and_transformers_pass_every_model_case_but_the_batch_difference(root, lexkit_on, cases):
    """transformers passes everything but one difference the table case batch/longrope shows too: a batch
    reads one length for all its sequences (dynamic_rope_update's max(position_ids) + 1), so Phi-3's short
    sequence beside a long one gets the long factors."""
    results = [lexkit_on("", c.name) for c in cases]
    results += models.run([models.MODEL_RUNTIMES.get("transformers")()], cases, root)
    failed = {(r.runtime, r.case): [c.check for c in r.checks if not c.ok] for r in results if r.status != "pass"}
    assert failed == {("transformers", "models/phi3-longrope"): ["batch@4"]}, failed
    assert all(len(r.checks) == 4 for r in results if r.runtime == "lexkit")  # it batches nothing
    assert all(len(r.checks) == 6 for r in results if r.runtime == "transformers")
    wrong = next(r for r in results if r.status != "pass")
    assert wrong.worst.first == 1 and wrong.worst.first_error > 10 * wrong.worst.band
    assert wrong.read["model.rotary_emb.rope_type"] == "longrope" and '"rope_type": "longrope"' in wrong.detail


@pytest.mark.parametrize("every", [pytest.param(True, marks=pytest.mark.slow, id="every-case"),
                                   pytest.param(False, id="first-case")])
@pytest.mark.parametrize("bug", sorted(models.BUGS))
def test_each_planted_bug_fails_the_cases_that_must_catch_it(bug, every, lexkit_on):
    must = set(models.BUGS[bug][1] if every else models.BUGS[bug][1][:1])
    results = {name: lexkit_on(bug, name) for name in must}
    failed = {name for name, r in results.items() if r.status == "fail"}
    assert must <= failed, {name: results[name].detail for name in must - failed}
    assert all(r.status == "fail" for r in results.values())  # a bug is a difference, not a crash
    worst = min(c.first_error / c.band for name in must for c in results[name].checks if not c.ok)
    assert worst > 10, worst  # far past the band, not at its edge


def test_decode_is_checked_where_only_decode_differs(lexkit_on):
    """The decode bugs leave every prefill alone: only the cache's checks catch them."""
    for bug in ("decode-one-late", "ring-no-evict"):
        for name in models.BUGS[bug][1]:
            r = lexkit_on(bug, name)
            assert {c.check for c in r.checks if not c.ok} <= {"decode/1", "decode/3"}
            assert all(c.ok for c in r.checks if c.check.startswith("prefill")), r.detail
    ring = lexkit_on("ring-no-evict", "models/mistral-window")
    assert [c.check for c in ring.checks if not c.ok] == ["decode/3"]  # one token a step: a ring is the window


class ToySide:
    """The fake side's runtime (tests/fixtures/sides/toy_model_side.py: lexkit's decoder behind the protocol)."""

    @staticmethod
    def runtime():
        from lexkit.conformance.models.remote import RemoteModelRuntime

        class Side(RemoteModelRuntime):
            name, side, probe = "toy-side", "toy_model_side", "numpy"
            folders = (Path(__file__).parent / "fixtures" / "sides",)

        return Side()


def test_whole_models_travel_through_the_protocol(root, lexkit_on, monkeypatch):
    """The model operations as the pipe carries them (every request and answer through JSON, the side's
    module answered by protocol.answer in this process): cases as JSON, logits as base64 float32 (float32
    exactly), a model type the side lacks n/a with its reason, a planted bug caught there as here."""
    import importlib

    from lexkit.conformance import remote

    monkeypatch.syspath_prepend(str(remote.SIDES))
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "fixtures" / "sides"))
    for name in ("protocol", "toy_model_side"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    protocol, side = importlib.import_module("protocol"), importlib.import_module("toy_model_side")

    class Here:  # remote.Side's interface, answered by protocol.answer here as protocol.main answers
        alive = True

        def __init__(self, *args, **kwargs):
            self.built = {}

        def ask(self, request):
            try:
                return json.loads(json.dumps(protocol.answer(side, json.loads(json.dumps(request)), self.built)))
            except Exception as exc:
                raise remote.RemoteError(protocol._first(exc)) from None

        def close(self):
            pass

    monkeypatch.setattr(remote, "Side", Here)
    from lexkit.conformance.models import remote as model_remote

    monkeypatch.setattr(model_remote, "Side", Here)
    cases = [c for c in SMALL if c.name in ("models/llama-llama3", "models/mistral-window")]
    far = {r.case: r for r in models.run([ToySide.runtime()], cases, root)}
    near = {c.name: lexkit_on("", c.name) for c in cases}
    assert far["models/llama-llama3"].status == "pass"
    assert [c.error for c in far["models/llama-llama3"].checks] == [c.error for c in near["models/llama-llama3"].checks]
    assert far["models/mistral-window"].status == "n/a" and far["models/mistral-window"].detail == "no mistral here"
    monkeypatch.setattr(side, "BUG", "scaling-dropped")
    (bad,) = models.run([ToySide.runtime()], cases[:1], root)
    assert bad.status == "fail" and bad.worst.first == 1
    for name in ("protocol", "toy_model_side"):
        sys.modules.pop(name, None)


@pytest.mark.slow  # ~10 s, two interpreters importing torch; fast sibling: the test above
def test_whole_models_through_a_second_interpreter(root, monkeypatch):
    cases = [c for c in SMALL if c.name in ("models/llama-llama3", "models/mistral-window")]
    monkeypatch.setenv("LEXKIT_SIDE_BUG", "")
    far = {r.case: r for r in models.run([ToySide.runtime()], cases, root)}
    near = {r.case: r for r in models.run([models.toy()], cases, root)}
    assert [c.error for c in far["models/llama-llama3"].checks] == [c.error for c in near["models/llama-llama3"].checks]
    assert far["models/mistral-window"].status == "n/a"
    monkeypatch.setenv("LEXKIT_SIDE_BUG", "scaling-dropped")
    (bad,) = models.run([ToySide.runtime()], cases[:1], root)
    assert bad.status == "fail" and bad.worst.first == 1


def test_the_command_runs_the_model_battery_and_writes_its_report(root, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(models, "cases", lambda patterns=None: [c for c in SMALL if c.name in (
        "models/llama-llama3", "models/mistral-window")])
    out = tmp_path / "o"
    argv = ["conformance", "--models", "--impl", "lexkit", "--models-dir", str(root), "--out", str(out), "--check"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith("conformance: 2 model cases against lexkit's float64 forward")
    assert "models/mistral-window  pass " in text and "lexkit: 2 pass, 0 fail, 0 error, 0 n/a" in text
    doc = json.loads((out / "conformance-models.json").read_text())
    assert doc["report"] == "lexkit.conformance.models" and len(doc["results"]) == 2
    assert [c["check"] for c in doc["results"][0]["checks"]] == ["prefill@8", "prefill@256", "decode/1", "decode/3"]
    assert "| models/llama-llama3 | pass " in (out / "conformance-models.md").read_text()


def test_the_list_names_the_model_cases(capsys):
    assert main(["conformance", "--list", "--impl", "lexkit"]) == 0
    text = capsys.readouterr().out
    assert all(c.name in text for c in CASES)
    assert main(["conformance", "--models", "--list"]) == 0
    text = capsys.readouterr().out
    assert "vLLM #49795" in text and "transformers" in text


@pytest.mark.parametrize("argv, words", [
    (["--case", "models/nosuch"], "matches no model case"),
    (["--case", "models/llama-llama3", "--case", "rope/default"], "runs apart from the table cases"),
    (["--models", "--matrix", "transformers==5.0", "--impl", "transformers"], "leave out --impl"),
    (["--models", "--impl", "nosuch"], "nosuch"),
    (["--models", "--python", f"transformers={sys.executable}"], "runs whole models in this process"),
])
def test_bad_model_runs_are_one_error_line(argv, words, capsys):
    assert main(["conformance", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and err.count("\n") == 1, err


def test_a_runtime_s_own_tests_pin_its_model_differences(root, tmp_path):
    """conformance.expect on a model case, as a runtime's CI parametrizes it; an accepted difference passes,
    a new one fails with the case's why."""
    from lexkit import conformance

    case = next(c for c in SMALL if c.name == "models/mistral-window")
    runtime = models.toy("window-one-wider")
    with pytest.raises(AssertionError, match=r"models/mistral-window: fail: .*\(the case: a sliding window"):
        conformance.expect(runtime, case, root=root)
    accept = tmp_path / "known.txt"
    accept.write_text("toy-window-one-wider models/mistral-*  # on purpose\n")
    assert conformance.expect(runtime, case, accept, root=root).status == "fail"
    assert conformance.expect(models.toy(), case, root=root).status == "pass"


def test_the_model_battery_over_releases(root, monkeypatch, tmp_path, capsys):
    """--models --matrix: the package's model runtime in each release's environment, one column a release
    (here lexkit's own runtime in this process for both; the lexkit side's model operations: the next test)."""
    from lexkit.conformance import matrix
    from lexkit.conformance.models import remote

    monkeypatch.setattr(matrix, "PACKAGES", {**matrix.PACKAGES, "lexkit": "lexkit"})
    monkeypatch.setattr(matrix, "environment", lambda package, version, where, echo=print: sys.executable)
    monkeypatch.setattr(remote, "elsewhere", lambda name, python: models.toy())
    monkeypatch.setattr(models, "cases", lambda patterns=None: [c for c in SMALL if c.name in (
        "models/llama-llama3",)])  # one of the quickest: a row of the table (two rows: the command's test above)
    out = tmp_path / "o"
    argv = ["conformance", "--models", "--matrix", "lexkit==0.1,0.2", "--envs", str(tmp_path / "envs"),
            "--models-dir", str(root), "--out", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith("conformance: 1 model case on lexkit 0.1, 0.2 against lexkit's float64 forward")
    assert "lexkit 0.2: 1 pass, 0 fail, 0 error, 0 n/a" in text
    assert "| models/llama-llama3 | pass " in (out / "conformance-models-matrix.md").read_text()
    assert main(["conformance", "--models", "--matrix", "x-transformers==2.0"]) == 2
    assert "x-transformers runs no whole models here" in capsys.readouterr().err


def test_the_lexkit_side_runs_a_model_runtime_for_another_environment(root, monkeypatch):
    """The lexkit side answers the model operations with an in-process model runtime (what --matrix runs in
    a release's environment), its logits through the protocol equal to the runtime's own."""
    import importlib

    from lexkit.conformance import remote
    from lexkit.conformance.models.remote import case_json

    monkeypatch.syspath_prepend(str(remote.SIDES))
    for name in ("protocol", "lexkit_side"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    protocol, side = importlib.import_module("protocol"), importlib.import_module("lexkit_side")
    monkeypatch.setattr(side, "NAME", "lexkit")
    case = FAST[0]
    directory = models.checkpoint(case, root)
    built: dict = {}
    ask = lambda request: json.loads(json.dumps(protocol.answer(side, request, built)))  # noqa: E731
    assert ask({"op": "model_supports", "case": case_json(case)}) == {"reason": None}
    model = ask({"op": "load", "directory": str(directory), "case": case_json(case)})["id"]
    ids = harness.ids_of(case)[:16].tolist()
    far = protocol.unpack(ask({"op": "prefill", "id": model, "ids": ids})["logits"])
    near = models.toy().load(directory, case).prefill(ids)
    assert torch.equal(torch.from_numpy(far.copy()), near)  # float32 both ways: exact
    monkeypatch.setattr(side, "NAME", "transformers")  # a runtime that batches: the batch travels too
    loaded = ask({"op": "load", "directory": str(directory), "case": case_json(case)})
    assert loaded["offers"] == ["batch", "read"]
    rows = ask({"op": "batch", "id": loaded["id"], "seqs": [ids, ids[:5]]})["logits"]
    assert [protocol.unpack(r).shape for r in rows] == [(16, 256), (5, 256)]
    for name in ("protocol", "lexkit_side"):
        sys.modules.pop(name, None)
