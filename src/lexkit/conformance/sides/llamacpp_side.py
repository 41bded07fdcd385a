"""llama.cpp's side of whole models (:mod:`protocol`, ``lexkit conformance --models``), through
llama-cpp-python, converted and loaded as a user converts and loads a Hugging Face checkpoint:

* the checkpoint directory is copied to ``DIRECTORY/llamacpp/VERSION-KEY/hf`` (KEY: a hash of the
  converter's files; the original files are never touched), with lexkit's own files left out (a
  ``reference*.safetensors`` that an older lexkit kept inside the directory would read as a weight shard;
  the harness keeps its reference beside the directory now);
* a tokenizer is written beside the copy when the checkpoint has none (the battery's have none, and the
  converter refuses a model without one): ``tokenizer.model``, a sentencepiece unigram model of exactly
  ``vocab_size`` pieces (``<unk> <s> </s>`` at 0, 1, 2 as the battery's config says, then plain pieces),
  written as protobuf bytes by :func:`tokenizer_model` (no sentencepiece needed to write it), and the
  ``tokenizer_config.json`` and ``special_tokens_map.json`` of a Llama tokenizer (Phi-3's converter
  reads ``tokenizer_class``);
* llama.cpp's own ``convert_hf_to_gguf.py --outtype f32`` (from the llama-cpp-python sdist's
  ``vendor/llama.cpp``: :func:`converter`) writes ``model.gguf``, kept for the next run; a model class
  of the converter that reads only BPE tokenizers (OLMo 2/3, gpt-oss) is given this side's
  sentencepiece vocabulary (:data:`LAUNCH`: the GGUF's tokenizer keys only, not its weights or RoPE);
* ``llama_cpp.Llama(model_path, n_ctx=32·L (the longest sequence the battery asks), n_threads=1,
  logits_all=True, type_k=type_v=GGML_TYPE_F32, flash_attn=False)``, every other argument the binding's
  default. The float32 KV cache and flash attention off make its arithmetic float32 (llama.cpp's
  default f16 cache alone is ~1e-2 off the float64 reference, far outside the band).

``prefill(ids)``: ``reset(); eval(ids)``, the ``scores`` row of every position; ``decode(ids, start,
step)``: ``reset(); eval(ids[:start])``, then ``eval`` of ``step`` tokens at a time through llama.cpp's
own KV cache, the rows of each step. ``scores`` keeps the rows of an earlier eval after ``reset()``,
so it is filled with NaN first: a row llama.cpp did not write cannot pass for one it did. ``batch(seqs)``:
llama.cpp's batch API, which ``Llama`` does not use (it evaluates one sequence): every token of every
sequence in one ``llama_batch`` (its ``seq_id`` and its position in its own sequence, logits for all),
one ``llama_decode`` in a context made for it from the same model (``Model.batch_params``: a unified KV
cache of sequences x 32·L, ``n_seq_max`` the number of sequences, one ubatch), each sequence's rows.

A converter that refuses the checkpoint, or a llama.cpp that refuses the GGUF, is an error cell with
their own last line. :func:`read_gguf` (``Model.read()``): what the GGUF holds of each case's RoPE and
window (its keys with rope/sliding_window/yarn, and the rope tensors). Install: see
``lexkit.conformance.models.llamacpp.LlamaCppModels.install``.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
from protocol import NotApplicable

#: ggml's abort (a GGML_ASSERT in llama.cpp: the process dies, no exception) otherwise runs gdb for a
#: backtrace, whose last line would stand for the cause in the harness's message; without it the
#: assertion's own line is the last the side prints
os.environ.setdefault("GGML_NO_BACKTRACE", "1")

#: the environment variable that names llama.cpp's convert_hf_to_gguf.py
CONVERTER_ENV = "LEXKIT_LLAMACPP_CONVERTER"
#: how to get the converter, said when it is missing
GET_CONVERTER = ("llama.cpp's convert_hf_to_gguf.py is not in the llama-cpp-python wheel: unpack the sdist of the "
                 "same version (pip download --no-deps --no-binary :all: llama-cpp-python==VERSION; tar xzf it into "
                 "ENV/src/) and set " + CONVERTER_ENV + "=ENV/src/llama_cpp_python-VERSION/vendor/llama.cpp/"
                 "convert_hf_to_gguf.py, or leave it unset to find it under sys.prefix/src/*/vendor/llama.cpp/; "
                 "it needs torch (CPU), transformers, sentencepiece and its gguf-py in the same environment")
#: the marker of a tokenizer this side wrote (beside the copy the converter reads)
MARK = ".lexkit-tokenizer"
#: bumped when what this side writes beside the copy changes (part of the cache key)
WRITER = "2"


def info() -> dict:
    import llama_cpp

    return {"name": "llama.cpp", "version": getattr(llama_cpp, "__version__", ""),
            "summary": "convert_hf_to_gguf.py --outtype f32, llama_cpp.Llama (f32 KV cache, flash attention off, "
                       "logits_all) eval and scores; whole models only"}


def supports(config: dict) -> str | None:
    return ("llama.cpp offers no rotary embedding to call alone (its RoPE is a ggml op inside a model's graph): "
            "only whole models, lexkit conformance --models")


# -- the converter ---------------------------------------------------------------------------------
def converter(environ=None, prefix: str | None = None) -> Path:
    """llama.cpp's ``convert_hf_to_gguf.py``: ``$LEXKIT_LLAMACPP_CONVERTER``, else the one under
    ``PREFIX/src/*/vendor/llama.cpp/`` (the sdist unpacked into the environment; the newest name first).
    FileNotFoundError saying how to get it."""
    environ = os.environ if environ is None else environ
    given = environ.get(CONVERTER_ENV)
    if given:
        path = Path(given)
        if path.is_dir():
            path = path / "convert_hf_to_gguf.py"
        if not path.is_file():
            raise FileNotFoundError(f"{CONVERTER_ENV}={given}: no such file; {GET_CONVERTER}")
        return path
    root = Path(sys.prefix if prefix is None else prefix) / "src"
    found = sorted(root.glob("*/vendor/llama.cpp/convert_hf_to_gguf.py"), reverse=True)
    if not found:
        raise FileNotFoundError(f"no convert_hf_to_gguf.py under {root}/*/vendor/llama.cpp/ and {CONVERTER_ENV} "
                                f"unset; {GET_CONVERTER}")
    return found[0]


def converter_key(path: Path) -> str:
    """A hash of the converter's files (the script, its ``conversion`` package, its ``gguf-py``) and of
    what this side writes: a new converter converts again."""
    digest = hashlib.sha256(WRITER.encode())
    root = path.parent
    files = [path] + sorted((root / "conversion").glob("*.py")) + sorted((root / "gguf-py" / "gguf").glob("*.py"))
    for f in files:
        if f.is_file():
            digest.update(f.relative_to(root).as_posix().encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()[:12]


# -- a sentencepiece tokenizer.model, as protobuf bytes ---------------------------------------------
def _varint(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF  # negative int32 fields go as 10-byte two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint((field << 3) | wire)


def _bytes(field: int, payload: bytes) -> bytes:
    return _key(field, 2) + _varint(len(payload)) + payload


def _int(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(value)


def _float(field: int, value: float) -> bytes:
    return _key(field, 5) + struct.pack("<f", value)


# sentencepiece_model.proto: ModelProto.SentencePiece.Type
NORMAL, UNKNOWN, CONTROL = 1, 2, 3


def pieces(n: int) -> list[tuple[str, float, int]]:
    """``n`` pieces: ``<unk> <s> </s>`` (ids 0, 1, 2), then ``▁``, the printable ASCII characters, each
    after ``▁``, then pairs of letters, as many as fill ``n``; scores falling by 0.01."""
    if n < 4:
        raise ValueError(f"a vocabulary of {n}: a sentencepiece model here needs at least 4 pieces")
    specials = [("<unk>", 0.0, UNKNOWN), ("<s>", 0.0, CONTROL), ("</s>", 0.0, CONTROL)]
    chars = [chr(c) for c in range(33, 127)]
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    words = ["\u2581"] + chars + ["\u2581" + c for c in chars] + [a + b for a in letters for b in letters]
    if n - 3 > len(words):
        words += [f"\u2581w{i}" for i in range(n - 3 - len(words))]
    return specials + [(w, -1.0 - 0.01 * i, NORMAL) for i, w in enumerate(words[:n - 3])]


def tokenizer_model(n: int) -> bytes:
    """A sentencepiece ``ModelProto`` of ``n`` pieces (:func:`pieces`): a unigram model, no byte
    fallback, unk/bos/eos 0/1/2, no pad, the identity normalizer with a dummy prefix."""
    body = b"".join(_bytes(1, _bytes(1, p.encode()) + _float(2, s) + _int(3, t)) for p, s, t in pieces(n))
    trainer = (_int(3, 1)  # model_type: UNIGRAM
               + _int(4, n)  # vocab_size
               + _int(35, 0)  # byte_fallback: off (256 byte pieces do not fit in 256)
               + _int(40, 0) + _int(41, 1) + _int(42, 2) + _int(43, -1))  # unk, bos, eos, pad ids
    normalizer = _bytes(1, b"identity") + _int(3, 1) + _int(4, 0) + _int(5, 1)
    return body + _bytes(2, trainer) + _bytes(3, normalizer)


def write_tokenizer(directory: Path, vocab_size: int) -> None:
    """``tokenizer.model`` of ``vocab_size`` pieces and a Llama tokenizer's config files in ``directory``."""
    special = {"<unk>": 0, "<s>": 1, "</s>": 2}
    config = {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
              "pad_token": None, "add_bos_token": True, "add_eos_token": False, "legacy": False,
              "clean_up_tokenization_spaces": False, "sp_model_kwargs": {},
              "added_tokens_decoder": {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                                "single_word": False, "special": True} for t, i in special.items()}}
    (directory / "tokenizer.model").write_bytes(tokenizer_model(vocab_size))
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (directory / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, indent=2))


# -- conversion ------------------------------------------------------------------------------------
def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("Writing:")] or lines  # tqdm's progress
    return lines[-1] if lines else "(no output)"


def checkpoint_file(path: Path) -> bool:
    """Whether ``path`` is one of a checkpoint's own files (copied for the converter): not a folder
    (this side's cache), not a dot file (lexkit's ``.lexkit-ready``), not reference logits an older lexkit kept
    in the directory (``reference*.safetensors``, which the converter would read as a weight shard)."""
    name = path.name
    return path.is_file() and not name.startswith(".") and not (name.startswith("reference")
                                                               and name.endswith(".safetensors"))


#: runs convert_hf_to_gguf.py (argv[1]) as ``python convert_hf_to_gguf.py ARGS`` does, with one change
#: where the tokenizer is this side's (its MARK beside it): a model class that reads only BPE
#: tokenizers (``TextModel.set_vocab`` is ``_set_vocab_gpt2``: OLMo 2/3, gpt-oss) writes this side's
#: sentencepiece vocabulary instead, as Llama's does; a byte-level BPE of 256 tokens has no pre-tokenizer
#: hash the converter knows (``get_vocab_base_pre`` raises), nor merges llama.cpp would load. Only the
#: GGUF's tokenizer keys differ: its weights, RoPE and windows are the converter's own.
LAUNCH = """
import runpy, sys
from pathlib import Path
script = Path(sys.argv[1])
sys.argv = [str(script), *sys.argv[2:]]  # the marker's name last, taken off below
sys.path.insert(0, str(script.parent))
import conversion.base as base
MARK = sys.argv.pop()
bpe = base.TextModel._set_vocab_gpt2
def vocab(self):
    if (Path(self.dir_model) / MARK).is_file():
        base.logger.warning("lexkit: a sentencepiece vocabulary in place of a BPE one (lexkit's tokenizer)")
        return self._set_vocab_sentencepiece()
    return bpe(self)
base.TextModel._set_vocab_gpt2 = vocab
runpy.run_path(str(script), run_name="__main__")
"""


def convert(directory: str | Path, case: dict, script: Path | None = None) -> Path:
    """The GGUF of the checkpoint in ``directory`` (converted once per converter, then read from
    ``DIRECTORY/llamacpp/``). RuntimeError with the converter's last line where it refuses."""
    directory = Path(directory)
    script = converter() if script is None else script
    import llama_cpp

    where = directory / "llamacpp" / f"{getattr(llama_cpp, '__version__', 'x')}-{converter_key(script)}"
    gguf = where / "model.gguf"
    if gguf.is_file():
        return gguf
    hf = where / "hf"
    shutil.rmtree(hf, ignore_errors=True)
    hf.mkdir(parents=True)
    for item in directory.iterdir():
        if checkpoint_file(item):
            shutil.copy2(item, hf / item.name)
    if not any((hf / name).is_file() for name in ("tokenizer.model", "tokenizer.json")):
        write_tokenizer(hf, int(case["config"]["vocab_size"]))
        (hf / MARK).write_text("tokenizer.model written by lexkit's llamacpp_side\n")
    partial = where / "model.gguf.partial"
    done = subprocess.run([sys.executable, "-c", LAUNCH, str(script), str(hf), "--outtype", "f32", "--outfile",
                           str(partial), MARK], capture_output=True, text=True, errors="replace")
    (where / "convert.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0 or not partial.is_file():
        raise RuntimeError(f"convert_hf_to_gguf.py refused {case.get('name', directory.name)} "
                           f"(exit {done.returncode}): {_last_line(done.stdout + done.stderr)}")
    partial.rename(gguf)
    return gguf


def read_gguf(path: str | Path) -> dict:
    """What a GGUF holds of RoPE and windows: its keys with rope, sliding_window, yarn or context_length
    in their names (arrays as lists), ``general.architecture``, and each tensor with rope in its name
    (its values)."""
    try:
        from gguf import GGUFReader
    except ImportError:  # the converter's own gguf-py
        sys.path.insert(0, str(converter().parent / "gguf-py"))
        from gguf import GGUFReader
    from gguf.constants import GGUFValueType

    reader = GGUFReader(str(path))
    keys = {}
    for name, field in reader.fields.items():
        if name == "general.architecture" or any(s in name for s in ("rope", "sliding_window", "yarn",
                                                                     "context_length")):
            if field.types and field.types[0] == GGUFValueType.ARRAY:
                keys[name] = [field.parts[i].tolist()[0] for i in field.data]
            else:
                value = field.contents()
                keys[name] = value.item() if hasattr(value, "item") else value
    tensors = {t.name: [float(v) for v in np.asarray(t.data).ravel()] for t in reader.tensors if "rope" in t.name}
    return {"keys": keys, "tensors": tensors}


# -- llama.cpp's log: its last lines, for the message of a refusal ---------------------------------
LOG: collections.deque = collections.deque(maxlen=50)
_CALLBACK = None


def _listen() -> None:
    """llama.cpp's log callback replaced by one that keeps its lines (and passes warnings and errors to
    stderr, which the harness drains): a refused load says why in the log, not in the exception."""
    global _CALLBACK
    if _CALLBACK is not None:
        return
    import ctypes

    import llama_cpp

    @llama_cpp.llama_log_callback
    def callback(level, text, user_data):
        line = text.decode("utf-8", "replace")
        LOG.append((level, line))
        if level in (3, 4):  # GGML_LOG_LEVEL_WARN, _ERROR
            sys.stderr.write(line)

    _CALLBACK = callback
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))


def _said() -> str:
    """llama.cpp's first error line since the log was cleared (the cause; those after it say what
    failed because of it), else its last line."""
    errors = [text for level, text in LOG if level == 4 and text.strip()]
    if errors:
        return errors[0].strip()
    lines = [text for _, text in LOG if text.strip()]
    return lines[-1].strip() if lines else "(nothing in its log)"


# -- whole models ----------------------------------------------------------------------------------
class Model:
    """A GGUF in ``llama_cpp.Llama`` (see the module's docstring)."""

    def __init__(self, gguf: Path, n_ctx: int) -> None:
        import llama_cpp

        _listen()
        LOG.clear()
        self.gguf, self.n_ctx = gguf, n_ctx
        try:
            self.llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=n_ctx, n_threads=1, n_threads_batch=1,
                                       logits_all=True, type_k=llama_cpp.GGML_TYPE_F32,
                                       type_v=llama_cpp.GGML_TYPE_F32, flash_attn=False, verbose=False)
        except Exception as exc:
            raise RuntimeError(f"llama.cpp did not load {gguf.parent.name}/{gguf.name}: {_said()} "
                               f"({type(exc).__name__}: {str(exc).strip()})") from None

    def _run(self, ids: np.ndarray, start: int, step: int | None) -> np.ndarray:
        if len(ids) > self.n_ctx:
            raise NotApplicable(f"{len(ids)} tokens past the n_ctx of {self.n_ctx} this side allocates")
        llm, ids = self.llm, [int(i) for i in ids]
        llm.reset()
        llm.scores[:] = np.nan  # rows of an earlier eval stay after reset()
        if step is None:
            llm.eval(ids)
        else:
            llm.eval(ids[:start])
            for at in range(start, len(ids), step):
                llm.eval(ids[at:at + step])
        rows = np.array(llm.scores[start:len(ids)], dtype=np.float32)
        if not np.isfinite(rows).all():
            bad = int(np.nonzero(~np.isfinite(rows).all(-1))[0][0]) + start
            raise RuntimeError(f"llama.cpp wrote no finite logits at position {bad}")
        return rows

    def prefill(self, ids: np.ndarray) -> np.ndarray:
        return self._run(ids, 0, None)

    def batch(self, seqs: list) -> list:
        """The sequences in one ``llama_decode`` through llama.cpp's own batch API (llama-cpp-python's
        low-level bindings: ``Llama`` evaluates one sequence): a ``llama_batch_init`` of every token, each
        with its sequence's ``seq_id`` and its position in that sequence, logits for every token, in a
        context of :meth:`batch_params` made beside the model's own (same weights); each sequence's rows,
        read by ``llama_get_logits_ith``."""
        import llama_cpp

        lengths = [len(ids) for ids in seqs]
        for n in lengths:
            if n > self.n_ctx:
                raise NotApplicable(f"{n} tokens past the n_ctx of {self.n_ctx} a sequence is allocated")
        total = sum(lengths)
        LOG.clear()
        ctx = llama_cpp.llama_init_from_model(self.llm.model, self.batch_params(len(seqs), total))
        if not ctx:
            raise RuntimeError(f"llama.cpp made no context of {len(seqs)} sequences: {_said()}")
        batch = llama_cpp.llama_batch_init(total, 0, 1)
        try:
            at = 0
            for seq, ids in enumerate(seqs):
                for pos, token in enumerate(ids):
                    batch.token[at], batch.pos[at] = int(token), pos
                    batch.n_seq_id[at], batch.seq_id[at][0], batch.logits[at] = 1, seq, 1
                    at += 1
            batch.n_tokens = total
            code = llama_cpp.llama_decode(ctx, batch)
            if code != 0:
                raise RuntimeError(f"llama_decode of {lengths} tokens returned {code}: {_said()}")
            vocab = self.llm.n_vocab()
            rows = np.full((total, vocab), np.nan, dtype=np.float32)
            for i in range(total):
                row = llama_cpp.llama_get_logits_ith(ctx, i)
                if row:
                    rows[i] = np.ctypeslib.as_array(row, shape=(vocab,))
        finally:
            llama_cpp.llama_batch_free(batch)
            llama_cpp.llama_free(ctx)
        out, at = [], 0
        for seq, n in enumerate(lengths):
            block = rows[at:at + n]
            if not np.isfinite(block).all():
                bad = int(np.nonzero(~np.isfinite(block).all(-1))[0][0])
                raise RuntimeError(f"llama.cpp wrote no finite logits at position {bad} of sequence {seq}")
            out.append(block)
            at += n
        return out

    def batch_params(self, n_seqs: int, total: int):
        """The batch's ``llama_context_params``: the model's own (``Llama.context_params``: f32 cache,
        flash attention off, one thread, the config's RoPE), with ``n_seq_max`` = the number of sequences,
        ``kv_unified`` (one cache whose cells the sequences share, kept apart by their ``seq_id`` in the
        mask, as llama-cpp-python's own ``embed`` batches; with a stream per sequence llama.cpp splits a
        batch into equal ubatches, L/2 tokens of each and then the long one alone, not one forward pass),
        ``n_ctx`` = sequences x the n_ctx of one (each may grow to the 32·L it is allocated alone; unified,
        llama.cpp's ``n_ctx_seq`` is all of it: past L, as alone, so LongRoPE chooses as alone), and
        ``n_batch`` = ``n_ubatch`` = the batch's tokens, so that one ``llama_decode`` is one ubatch."""
        params = type(self.llm.context_params).from_buffer_copy(self.llm.context_params)
        params.n_seq_max, params.kv_unified = n_seqs, True
        params.n_ctx = n_seqs * self.n_ctx
        params.n_batch = params.n_ubatch = total
        return params

    def decode(self, ids: np.ndarray, start: int, step: int) -> np.ndarray:
        return self._run(ids, start, step)

    def read(self) -> dict:
        return read_gguf(self.gguf)


def model_supports(case: dict) -> str | None:
    return None  # the converter and llama.cpp say what they refuse (an error cell with their line)


def load_model(directory: str, case: dict) -> Model:
    gguf = convert(directory, case)
    model = Model(gguf, 32 * int(case["original"]))  # the battery's longest sequence: 32·L
    sys.stderr.write(f"llamacpp_side: {case.get('name')}: {json.dumps(model.read())}\n")
    return model
