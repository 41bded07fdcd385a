"""Table E's configurations: the methods the field uses to stretch RoPE, applied to the study's
own ``rope`` run, beside the local patterns of the essay *Length Extrapolation and Local Attention*
(window, BCA) and the xPos of *A Length-Extrapolatable Transformer*. Table G scores the same ones on
its rope row (:mod:`lexkit.study.tables.retrieval`).

Two kinds of configuration, as data (the tables run them, cache them and report them):

* **no fine-tune** (:func:`methods`): the trained ``rope`` weights evaluated under another scheme
  (PI, NTK, dynamic NTK, YaRN, Llama 3, ReRoPE, leaky ReRoPE), log-n scaling, or attention sinks.
  Every scaling targets the study's longest length: ``factor`` = longest / training length (how a
  scaling is deployed: set for the context one wants), so 1x shows what it costs inside the
  training length. ReRoPE keeps exact positions below w = half the training length; the leaky
  form compresses distances past w by k = 16 (the reference's constant).
* **fine-tuned at 4x** (:func:`finetunes`): the ``rope`` run continued with ``--init`` at 4x its
  training length for a few steps under no scaling, PI and YaRN at factor 4 (the short fine-tune
  PI and YaRN rely on), each evaluated under causal attention and under ``window``/``bca`` at its
  new length.
"""

from __future__ import annotations

import dataclasses

#: The relative compression of leaky ReRoPE past w (the reference implementation's k).
LEAKY_K = 16
#: The fine-tune's length, in multiples of the training length.
FINETUNE_MULTIPLE = 4


@dataclasses.dataclass(frozen=True)
class Method:
    """One configuration of a trained ``rope`` run: the scheme its weights run under, the
    attention pattern, and log-n scaling."""

    label: str
    scheme: str
    pattern: str = "causal"
    logn: bool = False


def methods(train_len: int, longest: int) -> list[Method]:
    """The no-fine-tune configurations for a ``rope`` run trained at ``train_len`` and evaluated
    up to ``longest`` tokens."""
    factor = max(1.0, longest / train_len)
    w = max(1, train_len // 2)
    scaled = [("PI (linear)", "linear"), ("NTK-aware", "ntk"), ("dynamic NTK", "dynamic"), ("YaRN", "yarn"),
              ("Llama 3", "llama3")]
    out = [Method("rope", "rope")]
    out += [Method(f"{label} x{factor:g}", f"rope:scaling={kind},factor={factor:g}") for label, kind in scaled]
    out += [
        Method(f"ReRoPE w={w}", f"rerope:w={w}"),
        Method(f"leaky ReRoPE w={w}, k={LEAKY_K}", f"rerope:w={w},k={LEAKY_K}"),
        Method("log-n", "rope", logn=True),
        Method(f"leaky ReRoPE w={w}, k={LEAKY_K} + log-n", f"rerope:w={w},k={LEAKY_K}", logn=True),
        Method(f"sinks:{train_len} (text positions)", "rope", f"sinks:{train_len}"),
        Method(f"sinks:{train_len} (cache positions)", "rope", f"sinks:{train_len},pos=cache"),
    ]
    return out


@dataclasses.dataclass(frozen=True)
class Finetune:
    """A continuation of the ``rope`` run at ``train_len`` under ``scheme`` (``original_len`` is
    pinned to the parent's length by :func:`lexkit.training.runs.configs_from_run`), then evaluated under
    each of ``patterns`` (trained by :func:`lexkit.study.tables.extension.finetune.finetune`)."""

    label: str
    scheme: str
    train_len: int
    patterns: tuple[str, ...]


def finetunes(train_len: int) -> list[Finetune]:
    n = FINETUNE_MULTIPLE * train_len
    patterns = ("causal", f"window:{n}", f"bca:{n}")
    f = FINETUNE_MULTIPLE
    return [
        Finetune(f"rope, fine-tuned at {n}", "rope", n, patterns),
        Finetune(f"PI x{f}, fine-tuned at {n}", f"rope:scaling=linear,factor={f}", n, patterns),
        Finetune(f"YaRN x{f}, fine-tuned at {n}", f"rope:scaling=yarn,factor={f}", n, patterns),
    ]
