"""The out-of-process side of ``lexkit conformance``: a loop that answers the harness on stdin/stdout,
one JSON object a line, for a *side* module that builds a runtime's rotary embedding. It runs in the
runtime's own interpreter (``--python NAME=PATH``), which need not have lexkit or torch: this file and
the side module are plain Python, with numpy and the runtime only.

Requests (harness -> side) and answers (side -> harness), each request numbered by ``seq`` and its
answer carrying the same ``seq`` (an answer to another request is a broken protocol, not an answer)::

    {"seq": S, "op": "hello"}                         -> {"seq": S, "name", "version", "summary"}
    {"seq": S, "op": "supports", "config": C}         -> {"seq": S, "reason": null | "why it cannot express C"}
    {"seq": S, "op": "build", "config": C}            -> {"seq": S, "id": N, "checks": ["tables", "rotate", ...]}
    {"seq": S, "op": "call", "id": N, "check": K, "pos": [...], "x": X}
        K = frequencies -> {"inv_freq": [r/2], "a": float}
        K = tables      -> {"cos": [n][r/2], "sin": [n][r/2]}
        K = rotate      -> {"y": [H][n][h]}   (X: [H][n][h], pairs (i, i + r/2))
        K = scores      -> {"s": [H][n][n]}   (with "q" and "k" in place of "x": q·k/√h after the transform)
        K = rotate_batch -> {"y": [B][H][n][h]}   (X: [B][H][n][h], pos: [B][n], each row at its own positions)
    {"seq": S, "op": "model_supports", "case": M}     -> {"seq": S, "reason": null | "why it cannot run M"}
    {"seq": S, "op": "load", "directory": D, "case": M}  -> {"seq": S, "id": N, "offers": ["batch", "read"]}
    {"seq": S, "op": "batch", "id": N, "seqs": [[n1], [n2]]}  -> {"seq": S, "logits": [A1, A2]}
        (the sequences in one forward pass as the runtime batches them, where it offers "batch")
    {"seq": S, "op": "prefill", "id": N, "ids": [n]}  -> {"seq": S, "logits": A}   (A: [n][V])
    {"seq": S, "op": "decode", "id": N, "ids": [n], "start": s, "step": k}  -> {"seq": S, "logits": A}
        (a prefill of ids[:s] into the runtime's cache, then ids[s:] k at a time: [n - s][V])
    {"seq": S, "op": "read", "id": N}                -> {"seq": S, "read": {...} | null}
        (what the runtime read from the config: its RoPE and windows, as its own objects hold them)
    {"op": "bye"}

Any answer may be {"seq": S, "error": "Type: first line"} instead (the runtime refused a config or a
call), or {"seq": S, "na": "reason"} where the side raised :class:`NotApplicable` (a call the runtime's
engine would not serve: the case is n/a, not an error). C is a
:class:`lexkit.conformance.RopeConfig` as JSON: its fields, ``dtype`` a name (``float32``,
``bfloat16``), ``leak`` null for infinity, ``layers`` a list of [type, C]. Floats travel as JSON
numbers (shortest repr: float64 values exactly). The side module defines ``info() -> dict``,
``supports(config) -> str | None`` and ``build(config) -> object`` with any of the methods
``frequencies(pos)``, ``tables(pos)``, ``rotate(x, pos)``, ``scores(q, k, pos)``, ``rotate_batch(x, pos)``
on numpy arrays. A side of whole models (``lexkit conformance --models``) defines ``model_supports(case)``
and ``load_model(directory, case)``, an object with ``prefill(ids)`` and ``decode(ids, start, step)``
(numpy in, logits out); M is a model case as JSON (``name``, ``model_type``, ``config``: its transformers
config, ``original``: L, ``window``), D the checkpoint's directory. Logits travel as an array A,
``{"b64": base64 of little-endian float32, "shape": [n, V]}`` (a 2,048 x 256 row block is 2 MB, not
the 10 MB of JSON numbers).

The protocol owns file descriptor 1: :func:`main` moves it to a descriptor of its own (:data:`OUT`) and
points fd 1 at stderr, so whatever a runtime prints, from Python or from C, goes to stderr (which the
harness drains and keeps the last lines of, for the message of a side that dies).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback

#: the protocol's own stream (fd 1 as it was at start); None until :func:`main` runs
OUT = None


class NotApplicable(Exception):
    """Raised by a side for a call its runtime would not serve by its own rule (a position past the
    context its engine allocates): answered as ``{"na": reason}``, the case n/a with that reason."""


def _first(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _plain(value):
    """numpy arrays and scalars as lists and floats."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def pack(array) -> dict:
    """An array as the protocol sends logits: base64 of little-endian float32 and its shape."""
    import base64

    import numpy as np

    a = np.ascontiguousarray(np.asarray(array, dtype="<f4"))
    return {"b64": base64.b64encode(a.tobytes()).decode("ascii"), "shape": list(a.shape)}


def unpack(data: dict):
    """The inverse of :func:`pack` (a float32 numpy array)."""
    import base64

    import numpy as np

    return np.frombuffer(base64.b64decode(data["b64"]), dtype="<f4").reshape(data["shape"])


def answer(side, request: dict, built: dict) -> dict:
    """One request answered by the ``side`` module (``built``: the embeddings and models by id)."""
    import numpy as np

    op = request.get("op")
    if op == "model_supports":
        supports = getattr(side, "model_supports", None)
        if supports is None and not hasattr(side, "load_model"):
            return {"reason": "this side runs no whole models"}
        return {"reason": supports(request["case"]) if supports else None}
    if op == "load":
        model = side.load_model(request["directory"], request["case"])
        built[len(built)] = model
        return {"id": len(built) - 1, "offers": [k for k in ("batch", "read") if hasattr(model, k)]}
    if op == "batch":
        seqs = [np.asarray(ids, dtype=np.int64) for ids in request["seqs"]]
        return {"logits": [pack(rows) for rows in built[request["id"]].batch(seqs)]}
    if op == "prefill":
        return {"logits": pack(built[request["id"]].prefill(np.asarray(request["ids"], dtype=np.int64)))}
    if op == "read":
        model = built[request["id"]]
        return {"read": model.read() if hasattr(model, "read") else None}
    if op == "decode":
        ids = np.asarray(request["ids"], dtype=np.int64)
        return {"logits": pack(built[request["id"]].decode(ids, int(request["start"]), int(request["step"])))}
    if op == "hello":
        return side.info()
    if op == "supports":
        return {"reason": side.supports(request["config"])}
    if op == "build":
        embedding = side.build(request["config"])
        built[len(built)] = embedding
        return {"id": len(built) - 1, "checks": [k for k in ("frequencies", "tables", "rotate", "scores",
                                                            "rotate_batch") if hasattr(embedding, k)]}
    if op == "call":
        embedding, check = built[request["id"]], request["check"]
        pos = np.asarray(request["pos"], dtype=np.int64)
        if check == "frequencies":
            inv, a = embedding.frequencies(pos)
            return {"inv_freq": _plain(inv), "a": float(a)}
        if check == "tables":
            cos, sin = embedding.tables(pos)
            return {"cos": _plain(cos), "sin": _plain(sin)}
        if check in ("rotate", "rotate_batch"):
            method = getattr(embedding, check)
            return {"y": _plain(method(np.asarray(request["x"], dtype=np.float64), pos))}
        if check == "scores":
            q, k = (np.asarray(request[name], dtype=np.float64) for name in ("q", "k"))
            return {"s": _plain(embedding.scores(q, k, pos))}
        raise ValueError(f"unknown check {check!r}")
    raise ValueError(f"unknown op {op!r}")


def _not_applicable(exc: BaseException) -> bool:
    """This protocol's NotApplicable, or lexkit's (an in-process adapter run by the lexkit side)."""
    return isinstance(exc, NotApplicable) or type(exc).__name__ == "NotApplicable"


def own_stdout():
    """fd 1 moved to a descriptor of the protocol's own; fd 1 (and sys.stdout) then write to stderr, so
    no print of a runtime, Python's or C's, reaches the protocol's stream."""
    global OUT
    sys.stdout.flush()
    OUT = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return OUT


def main(module: str) -> None:
    """Serve the side ``module`` (importable from this file's folder) until ``bye`` or end of input."""
    out = own_stdout()  # before the import: a runtime prints while it loads
    side = importlib.import_module(module)
    built: dict = {}
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "bye":
            break
        try:
            reply = answer(side, request, built)
        except Exception as exc:  # the runtime's refusal, or its bug: the harness shows it as a cell
            if _not_applicable(exc):
                reply = {"na": str(exc).strip() or type(exc).__name__}
            else:
                traceback.print_exc(file=sys.stderr)
                reply = {"error": _first(exc)}
        reply["seq"] = request.get("seq")
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1])
