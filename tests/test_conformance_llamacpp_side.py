"""llama.cpp's side of whole models (src/lexkit/conformance/sides/llamacpp_side.py), checked without
llama-cpp-python: the tokenizer.model it writes is a sentencepiece model of exactly the vocabulary (its
protobuf read back here field by field, and by sentencepiece where installed), the converter is found
or its absence said in one line with how to get it, a checkpoint is converted from a copy (a fake
converter in place of llama.cpp's records what it was given) and a fake ``llama_cpp`` records how the
model is loaded and fed. The slow test runs the battery through the real one where
``LEXKIT_LLAMACPP_PYTHON`` names its interpreter."""

from __future__ import annotations

import ctypes
import json
import os
import struct
import sys
import types

import numpy as np
import pytest

MODULES = ("llamacpp_side", "protocol", "llama_cpp")


@pytest.fixture
def side(monkeypatch):
    """The side module, imported fresh from the sides folder (and out of ``sys.modules`` after)."""
    from lexkit.conformance.remote import SIDES

    for name in MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(SIDES))
    monkeypatch.delenv("LEXKIT_LLAMACPP_CONVERTER", raising=False)
    had = os.environ.pop("GGML_NO_BACKTRACE", None)  # the side sets it on import
    import llamacpp_side

    yield llamacpp_side
    for name in MODULES:
        sys.modules.pop(name, None)
    os.environ.pop("GGML_NO_BACKTRACE", None)
    if had is not None:
        os.environ["GGML_NO_BACKTRACE"] = had


# -- a protobuf reader, enough for sentencepiece's ModelProto ----------------------------------------
def _varint(data: bytes, at: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[at]
        value |= (b & 0x7F) << shift
        at += 1
        shift += 7
        if not b & 0x80:
            return value, at


def fields(data: bytes) -> list[tuple[int, object]]:
    """(field number, value) in order: ints, float32s and bytes of a length-delimited field."""
    out, at = [], 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 5:
            value, at = struct.unpack("<f", data[at:at + 4])[0], at + 4
        elif wire == 2:
            n, at = _varint(data, at)
            value, at = data[at:at + n], at + n
        else:
            raise ValueError(f"wire type {wire}")
        out.append((number, value))
    return out


def test_the_tokenizer_model_is_a_sentencepiece_model_of_exactly_the_vocabulary(side):
    data = side.tokenizer_model(256)
    top = fields(data)
    pieces = [dict(fields(v)) for n, v in top if n == 1]
    assert len(pieces) == 256
    assert [(p[1], p[3]) for p in pieces[:3]] == [(b"<unk>", 2), (b"<s>", 3), (b"</s>", 3)]  # UNKNOWN, CONTROL
    assert all(p[3] == 1 for p in pieces[3:]) and len({p[1] for p in pieces}) == 256  # NORMAL, none twice
    assert pieces[3][1] == "\u2581".encode() and pieces[4][1] == b"!"
    assert [round(p[2], 4) for p in pieces[3:6]] == [-1.0, -1.01, -1.02]
    (trainer,) = [dict(fields(v)) for n, v in top if n == 2]
    assert trainer[3] == 1 and trainer[4] == 256 and trainer[35] == 0  # unigram, 256, no byte fallback
    assert (trainer[40], trainer[41], trainer[42], trainer[43]) == (0, 1, 2, 2**64 - 1)  # pad -1
    (normalizer,) = [dict(fields(v)) for n, v in top if n == 3]
    assert normalizer[1] == b"identity"
    assert len(side.tokenizer_model(4)) < len(data) and len(side.pieces(1000)) == 1000
    with pytest.raises(ValueError, match="at least 4"):
        side.pieces(3)


def test_sentencepiece_reads_the_tokenizer_model_back(side):
    spm = pytest.importorskip("sentencepiece")
    proc = spm.SentencePieceProcessor(model_proto=side.tokenizer_model(256))
    assert proc.vocab_size() == 256
    assert (proc.unk_id(), proc.bos_id(), proc.eos_id(), proc.pad_id()) == (0, 1, 2, -1)
    assert [proc.IdToPiece(i) for i in (0, 1, 2, 3)] == ["<unk>", "<s>", "</s>", "\u2581"]
    assert proc.IsControl(1) and proc.IsUnknown(0) and not proc.IsByte(3)


def test_the_tokenizer_files_are_a_llama_tokenizers(side, tmp_path):
    side.write_tokenizer(tmp_path, 256)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "LlamaTokenizer"  # Phi-3's converter reads it
    assert {k: v["content"] for k, v in config["added_tokens_decoder"].items()} == {"0": "<unk>", "1": "<s>",
                                                                                   "2": "</s>"}
    assert json.loads((tmp_path / "special_tokens_map.json").read_text())["bos_token"] == "<s>"
    assert (tmp_path / "tokenizer.model").read_bytes() == side.tokenizer_model(256)


def test_the_converter_is_found_by_its_variable_or_under_the_environment(side, tmp_path):
    vendored = tmp_path / "env" / "src" / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp"
    vendored.mkdir(parents=True)
    script = vendored / "convert_hf_to_gguf.py"
    script.write_text("")
    assert side.converter({}, str(tmp_path / "env")) == script
    assert side.converter({"LEXKIT_LLAMACPP_CONVERTER": str(script)}, "/nowhere") == script
    assert side.converter({"LEXKIT_LLAMACPP_CONVERTER": str(vendored)}, "/nowhere") == script  # its folder
    with pytest.raises(FileNotFoundError) as missing:
        side.converter({}, str(tmp_path / "bare"))
    text = str(missing.value)
    assert "\n" not in text
    assert f"no convert_hf_to_gguf.py under {tmp_path / 'bare' / 'src'}/*/vendor/llama.cpp/" in text
    assert "LEXKIT_LLAMACPP_CONVERTER" in text and "pip download --no-deps --no-binary :all:" in text
    with pytest.raises(FileNotFoundError, match=r"LEXKIT_LLAMACPP_CONVERTER=/no/such\.py: no such file; "):
        side.converter({"LEXKIT_LLAMACPP_CONVERTER": "/no/such.py"})


def test_only_the_checkpoints_own_files_are_copied(side, tmp_path):
    for name in ("config.json", "model.safetensors", "generation_config.json", "reference-v1.safetensors",
                 "reference.safetensors", ".lexkit-ready"):
        (tmp_path / name).write_text("x")
    (tmp_path / "llamacpp").mkdir()
    kept = sorted(p.name for p in tmp_path.iterdir() if side.checkpoint_file(p))
    assert kept == ["config.json", "generation_config.json", "model.safetensors"]


def test_table_cases_are_declined_with_a_reason_and_model_cases_are_not(side):
    assert "only whole models" in side.supports({"scheme": "rope"})
    assert side.model_supports({"name": "models/x"}) is None


# -- conversion, with a fake converter -------------------------------------------------------------
FAKE_BASE = '''
import logging
logger = logging.getLogger("fake")


class TextModel:
    def _set_vocab_gpt2(self):
        return "bpe"

    def _set_vocab_sentencepiece(self):
        return "sentencepiece"
'''

#: a stand-in for convert_hf_to_gguf.py: appends its argv to RUNS, refuses a config with "refuse" in it
#: (its last line the reason), else writes what a BPE-only model class's vocabulary call returns
FAKE_CONVERTER = '''
import json, sys
from pathlib import Path
from conversion.base import TextModel
args = sys.argv[1:]
with open(RUNS, "a") as f:
    f.write(json.dumps(args) + "\\n")
model, out = Path(args[0]), Path(args[args.index("--outfile") + 1])
if "refuse" in (model / "config.json").read_text():
    print("INFO: loading", file=sys.stderr)
    raise SystemExit("NotImplementedError: Architecture 'Nope' not supported!")
m = TextModel()
m.dir_model = model
out.write_text(m._set_vocab_gpt2() + " " + " ".join(sorted(p.name for p in model.iterdir())))
'''


@pytest.fixture
def fake_converter(tmp_path, monkeypatch):
    root = tmp_path / "llama.cpp"
    (root / "conversion").mkdir(parents=True)
    (root / "conversion" / "__init__.py").write_text("")
    (root / "conversion" / "base.py").write_text(FAKE_BASE)
    runs = tmp_path / "runs.jsonl"
    script = root / "convert_hf_to_gguf.py"
    script.write_text(f"RUNS = {str(runs)!r}\n" + FAKE_CONVERTER)
    monkeypatch.setenv("LEXKIT_LLAMACPP_CONVERTER", str(script))
    return script, runs


def _checkpoint(tmp_path, config: dict):
    directory = tmp_path / "ckpt"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "model.safetensors").write_bytes(b"weights")
    (directory / "reference-v1.safetensors").write_bytes(b"logits")
    (directory / ".lexkit-ready").write_text("")
    return directory


def test_a_checkpoint_is_converted_from_a_copy_once(side, fake_converter, tmp_path, monkeypatch):
    script, runs = fake_converter
    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(__version__="9.9"))
    directory = _checkpoint(tmp_path, {"model_type": "olmo3", "vocab_size": 256})
    before = sorted(p.name for p in directory.iterdir())
    case = {"name": "models/x", "config": {"vocab_size": 256}, "original": 8}
    gguf = side.convert(directory, case)
    assert gguf == directory / "llamacpp" / f"9.9-{side.converter_key(script)}" / "model.gguf"
    # the copy: the checkpoint's files, the tokenizer written beside them; a BPE-only class given sentencepiece
    assert gguf.read_text() == ("sentencepiece .lexkit-tokenizer config.json model.safetensors "
                                "special_tokens_map.json tokenizer.model tokenizer_config.json")
    assert sorted(p.name for p in directory.iterdir()) == sorted(before + ["llamacpp"])  # the original untouched
    (args,) = [json.loads(line) for line in runs.read_text().splitlines()]
    assert args == [str(gguf.parent / "hf"), "--outtype", "f32", "--outfile", str(gguf) + ".partial"]
    assert side.convert(directory, case) == gguf and len(runs.read_text().splitlines()) == 1  # cached


def test_a_tokenizer_the_checkpoint_has_is_kept(side, fake_converter, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(__version__="9.9"))
    directory = _checkpoint(tmp_path, {"model_type": "olmo3"})
    (directory / "tokenizer.json").write_text("{}")
    gguf = side.convert(directory, {"name": "models/x", "config": {"vocab_size": 256}, "original": 8})
    assert gguf.read_text() == "bpe config.json model.safetensors tokenizer.json"


def test_a_refusal_of_the_converter_is_its_own_last_line(side, fake_converter, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(__version__="9.9"))
    directory = _checkpoint(tmp_path, {"model_type": "refuse"})
    with pytest.raises(RuntimeError) as refused:
        side.convert(directory, {"name": "models/x", "config": {"vocab_size": 256}, "original": 8})
    assert str(refused.value) == ("convert_hf_to_gguf.py refused models/x (exit 1): "
                                  "NotImplementedError: Architecture 'Nope' not supported!")
    assert not list(directory.glob("llamacpp/*/model.gguf"))


# -- loading and feeding, with a fake llama_cpp ----------------------------------------------------
class FakeLlama:
    """Records its arguments and evals; the logits of position p of token t: row [p, t, 0, ...]."""

    made: list = []
    refuse = False

    def __init__(self, model_path, **kwargs):
        if FakeLlama.refuse:
            self.log(3, b"llama_model_loader: loaded meta data\n")
            self.log(4, b"llama_model_load: error loading model: missing tensor 'blk.0.attn_q.weight'\n")
            self.log(4, b"llama_model_load_from_file_impl: failed to load model\n")
            raise ValueError(f"Failed to load model from file: {model_path}")
        self.kwargs, self.evals, self.n_tokens = kwargs, [], 0
        self.scores = np.zeros((kwargs["n_ctx"], 4), dtype=np.float32)
        self.model = "the model"
        self.context_params = Params(n_ctx=kwargs["n_ctx"], n_batch=512, n_ubatch=512, n_seq_max=1, n_threads=1,
                                     type_k=kwargs["type_k"], kv_unified=False)
        FakeLlama.made.append(self)

    def n_vocab(self):
        return 4

    def reset(self):
        self.n_tokens = 0

    def eval(self, tokens):
        self.evals.append(list(tokens))
        for t in tokens:
            self.scores[self.n_tokens] = [self.n_tokens, t, 0, 0]
            self.n_tokens += 1


class Params(ctypes.Structure):
    """The fields of ``llama_context_params`` the side sets or keeps (a ctypes struct, as the binding's)."""

    _fields_ = [("n_ctx", ctypes.c_uint32), ("n_batch", ctypes.c_uint32), ("n_ubatch", ctypes.c_uint32),
                ("n_seq_max", ctypes.c_uint32), ("n_threads", ctypes.c_int32), ("type_k", ctypes.c_int32),
                ("kv_unified", ctypes.c_bool)]


class FakeBatchAPI:
    """llama.cpp's batch API as llama_cpp's bindings expose it, recording what the side asks: contexts
    made from a model's params, a ``llama_batch`` of ``n_tokens`` slots (``seq_id`` a row of pointers per
    token), one ``llama_decode`` that writes the row [seq_id, pos, token, 0] of every token asking for
    logits (``refuse``: the return code instead), ``llama_get_logits_ith`` a float pointer to a row."""

    def __init__(self):
        self.contexts, self.decoded, self.freed, self.refuse, self.blank = [], [], [], 0, ()

    def llama_init_from_model(self, model, params):
        assert model == "the model"
        self.contexts.append({name: getattr(params, name) for name, _ in Params._fields_})
        return len(self.contexts)  # a context's handle

    def llama_batch_init(self, n_tokens, embd, n_seq_max):
        assert embd == 0
        batch = types.SimpleNamespace(n_tokens=0, token=[None] * n_tokens, pos=[None] * n_tokens,
                                      n_seq_id=[None] * n_tokens, logits=[None] * n_tokens,
                                      seq_id=[[None] * n_seq_max for _ in range(n_tokens)])
        self.batches = getattr(self, "batches", []) + [batch]
        return batch

    def llama_decode(self, ctx, batch):
        n = batch.n_tokens
        self.decoded.append((ctx, [(batch.seq_id[i][0], batch.pos[i], batch.token[i], batch.n_seq_id[i],
                                    batch.logits[i]) for i in range(n)]))
        if self.refuse:
            FakeLlama.log(4, b"decode: failed to find a memory slot for batch of size 40\n")
            return self.refuse
        self.rows = np.zeros((n, 4), dtype=np.float32)
        for i in range(n):
            if batch.logits[i] and i not in self.blank:
                self.rows[i] = [batch.seq_id[i][0], batch.pos[i], batch.token[i], 0]
            else:
                self.rows[i] = np.nan
        return 0

    def llama_get_logits_ith(self, ctx, i):
        return self.rows[i].ctypes.data_as(ctypes.POINTER(ctypes.c_float))

    def llama_batch_free(self, batch):
        self.freed.append("batch")

    def llama_free(self, ctx):
        self.freed.append(ctx)


@pytest.fixture
def fake_llama(side, monkeypatch):
    api = FakeBatchAPI()
    fake = types.SimpleNamespace(GGML_TYPE_F32=0, Llama=FakeLlama, llama_log_callback=lambda f: f, logs=[],
                                 api=api, **{name: getattr(api, name) for name in dir(api)
                                             if name.startswith("llama_")})
    fake.llama_log_set = lambda callback, data: fake.logs.append(callback)
    FakeLlama.log = staticmethod(lambda level, text: fake.logs[-1](level, text, None))
    FakeLlama.made, FakeLlama.refuse = [], False
    monkeypatch.setitem(sys.modules, "llama_cpp", fake)
    return fake


def test_the_model_is_loaded_with_a_float32_cache_and_fed_as_asked(side, fake_llama, tmp_path):
    model = side.Model(tmp_path / "model.gguf", 16)
    (llm,) = FakeLlama.made
    assert llm.kwargs == {"n_ctx": 16, "n_threads": 1, "n_threads_batch": 1, "logits_all": True, "type_k": 0,
                          "type_v": 0, "flash_attn": False, "verbose": False}
    ids = np.array([5, 6, 7, 8, 9, 10, 11])
    assert model.prefill(ids[:4]).tolist() == [[p, t, 0, 0] for p, t in enumerate(ids[:4])]
    llm.evals.clear()
    rows = model.decode(ids, 2, 3)
    assert llm.evals == [[5, 6], [7, 8, 9], [10, 11]]  # the prefill of start, then step tokens at a time
    assert rows.tolist() == [[p, t, 0, 0] for p, t in enumerate(ids)][2:]


def test_a_row_llama_cpp_did_not_write_is_not_taken_for_one(side, fake_llama, tmp_path):
    model = side.Model(tmp_path / "model.gguf", 16)
    llm = FakeLlama.made[0]
    model.prefill(np.arange(6))  # rows 0..5 written
    llm.eval = lambda tokens: setattr(llm, "n_tokens", llm.n_tokens + len(tokens))  # writes no rows
    with pytest.raises(RuntimeError, match="no finite logits at position 0"):
        model.prefill(np.arange(6))
    from protocol import NotApplicable

    with pytest.raises(NotApplicable, match="17 tokens past the n_ctx of 16"):
        model.prefill(np.arange(17))


def test_a_batch_is_one_llama_decode_of_every_sequence_in_a_unified_cache(side, fake_llama, tmp_path):
    model = side.Model(tmp_path / "model.gguf", 32)
    llm, api = FakeLlama.made[0], fake_llama.api
    long, short = np.arange(10, 40), np.array([7, 8, 9, 6])
    rows = model.batch([long, short])
    # a context of its own from the model's params: two sequences sharing one cache of 2 x n_ctx, the
    # batch one ubatch; the model's own params (float32 cache, one thread) otherwise, and left as they were
    assert api.contexts == [{"n_ctx": 64, "n_batch": 34, "n_ubatch": 34, "n_seq_max": 2, "n_threads": 1,
                             "type_k": 0, "kv_unified": True}]
    assert (llm.context_params.n_ctx, llm.context_params.n_seq_max, llm.context_params.kv_unified) == (32, 1, False)
    ((ctx, fed),) = api.decoded  # one llama_decode: each token at its own sequence's position, logits for all
    assert fed == [(0, p, t, 1, 1) for p, t in enumerate(long)] + [(1, p, t, 1, 1) for p, t in enumerate(short)]
    assert [r.tolist() for r in rows] == [[[0, p, t, 0] for p, t in enumerate(long)],
                                          [[1, p, t, 0] for p, t in enumerate(short)]]
    assert api.freed == ["batch", ctx] and llm.evals == []  # freed; Llama's own context untouched


def test_a_batch_llama_cpp_refuses_or_leaves_unwritten_is_an_error_not_rows(side, fake_llama, tmp_path):
    model = side.Model(tmp_path / "model.gguf", 32)
    api = fake_llama.api
    api.refuse = 1
    with pytest.raises(RuntimeError, match=r"llama_decode of \[30, 10\] tokens returned 1: decode: failed to "
                                           "find a memory slot"):
        model.batch([np.arange(30), np.arange(10)])
    assert api.freed == ["batch", 1]  # freed all the same
    api.refuse, api.blank = 0, (33,)
    with pytest.raises(RuntimeError, match="no finite logits at position 3 of sequence 1"):
        model.batch([np.arange(30), np.arange(10)])
    from protocol import NotApplicable

    with pytest.raises(NotApplicable, match="33 tokens past the n_ctx of 32"):
        model.batch([np.arange(33), np.arange(4)])


def test_the_protocol_offers_the_batch_and_answers_it(side, fake_llama, tmp_path):
    import protocol

    built = {}
    side.convert = lambda directory, case: tmp_path / "model.gguf"
    side.read_gguf = lambda path: {"keys": {}}
    loaded = protocol.answer(side, {"op": "load", "directory": str(tmp_path), "case": {"original": 2}}, built)
    assert loaded["offers"] == ["batch", "read"]
    got = protocol.answer(side, {"op": "batch", "id": loaded["id"], "seqs": [[5, 6, 7], [9]]}, built)
    assert [protocol.unpack(a).tolist() for a in got["logits"]] == [[[0, 0, 5, 0], [0, 1, 6, 0], [0, 2, 7, 0]],
                                                                    [[1, 0, 9, 0]]]


def test_a_refused_load_says_llama_cpps_own_error(side, fake_llama, tmp_path):
    FakeLlama.refuse = True
    with pytest.raises(RuntimeError) as refused:
        side.Model(tmp_path / "dir" / "model.gguf", 16)
    assert str(refused.value) == ("llama.cpp did not load dir/model.gguf: llama_model_load: error loading model: "
                                  "missing tensor 'blk.0.attn_q.weight' (ValueError: Failed to load model from "
                                  f"file: {tmp_path / 'dir' / 'model.gguf'})")
    assert os.environ.get("GGML_NO_BACKTRACE") == "1"  # an assertion's own line is the side's last


def test_llama_cpp_is_a_model_runtime_with_its_install_said():
    from lexkit.conformance.models import MODEL_RUNTIMES
    from lexkit.conformance.models.llamacpp import LlamaCppModels

    assert MODEL_RUNTIMES.get("llama.cpp") is LlamaCppModels
    runtime = LlamaCppModels(python=sys.executable)
    assert (runtime.side, runtime.probe) == ("llamacpp_side", "llama_cpp")
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF"' in runtime.install and "--no-binary :all:" in runtime.install
    reason = runtime.unavailable()
    if reason is not None:  # this interpreter has no llama_cpp: the reason says how to install it
        assert reason.startswith("llama_cpp does not import") and "--python llama.cpp=ENV/bin/python" in reason


# -- the real one ------------------------------------------------------------------------------------
#: what llama-cpp-python 0.3.36 (llama.cpp of 2026-10-01) does on the battery, and why (each fail is
#: reproduced to float32 precision by lexkit's forward with the named cause planted)
EXPECTED = {
    "models/llama-llama3": "pass",
    "models/qwen2-yarn": "pass",
    "models/llama-yarn-attention-factor": "fail",  # attention_factor 1 replaced by 0.1 ln s + 1
    "models/qwen3-yarn-mscale": "fail",  # mscale/mscale_all_dim never written: 0.1 ln s + 1
    "models/phi3-longrope": "fail",  # long factors by n_ctx, at every length
    "models/mistral-window": "fail",  # no sliding window for the llama architecture
    "models/olmo3-hybrid": "fail",  # sliding layers rotated at the full layers' base
    "models/gpt-oss": "fail",  # YaRN's ramp truncated, the config's truncate: false unread
    "models/gemma3": "fail",  # layers read by the 5:1 pattern (gemma3.cpp's default 6), not layer_types
    "models/olmo3-window-unused": "error",  # GGML_ASSERT(hparams.is_swa_any()) aborts the load
}


@pytest.mark.slow  # ~2 min: 10 conversions and the battery's 2,048-token prefills and batches; fast siblings above
@pytest.mark.skipif(not os.environ.get("LEXKIT_LLAMACPP_PYTHON"), reason="LEXKIT_LLAMACPP_PYTHON unset")
def test_the_battery_through_llama_cpp(tmp_path_factory):
    from lexkit.conformance import models
    from lexkit.conformance.models.llamacpp import LlamaCppModels

    root = os.environ.get("LEXKIT_MODELS_DIR") or tmp_path_factory.mktemp("models")  # checkpoints kept there
    runtime = LlamaCppModels(python=os.environ["LEXKIT_LLAMACPP_PYTHON"])
    assert runtime.unavailable() is None
    results = {r.case: r for r in models.run([runtime], [c for c in models.CASES if c.name in EXPECTED], root)}
    assert {name: r.status for name, r in results.items()} == EXPECTED
    assert results["models/mistral-window"].worst.first == 16  # the first position past the window
    assert results["models/llama-llama3"].worst.error < results["models/llama-llama3"].worst.band
    batched = {c.check: c for c in results["models/llama-llama3"].checks if c.check.startswith("batch@")}
    assert set(batched) == {"batch@2048", "batch@32"} and all(c.ok for c in batched.values())  # one llama_decode
    longrope = {c.check: c for c in results["models/phi3-longrope"].checks}
    assert longrope["batch@32"].first == 1 and longrope["batch@2048"].ok  # long factors, as alone (n_ctx > L)
    assert "GGML_ASSERT(hparams.is_swa_any()) failed" in results["models/olmo3-window-unused"].detail
