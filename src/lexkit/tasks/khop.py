"""``khop``: k-hop induction heads (Sanford, Hsu and Telgarsky 2024), the k-hop target at every position."""

from __future__ import annotations

from ..core.specs import Param
from . import needles
from .base import LETTERS, MAX_LINKS, Document, Task, register

#: the target where the k-hop chain runs out (their code's "does not exist" symbol; ``~`` is lexkit's marker)
KHOP_NONE = b"_"
#: the most symbols of a k-hop alphabet (letters a-z)
KHOP_ALPHABET = len(LETTERS)
#: a k-hop document's bytes with no free length: one input symbol and one labelled one
KHOP_MINIMUM = 2


def hop_targets(seq: bytes, hops: int) -> bytes:
    """``hop_k(seq)`` at every position (:class:`KHop`): the symbol reached after ``hops`` hops from each
    position, :data:`KHOP_NONE` where a hop finds no earlier occurrence (``hops`` 0: ``seq`` itself)."""
    after = [-1] * len(seq)  # find_1 of each position: one past the latest earlier occurrence of its symbol
    latest: dict[int, int] = {}
    for i, symbol in enumerate(seq):
        after[i] = latest[symbol] + 1 if symbol in latest else -1
        latest[symbol] = i
    out = bytearray()
    for i in range(len(seq)):
        at = i
        for _ in range(hops):
            at = after[at] if at >= 0 else -1
        out += bytes([seq[at]]) if at >= 0 else KHOP_NONE
    return bytes(out)


@register
class KHop(Task):
    """k-hop induction heads (Sanford, Hsu and Telgarsky, "Transformers, parallel computation, and
    logarithmic depth", ICML 2024, arXiv 2402.09268, Section 5 and their code,
    github.com/chsanford/hop-induction-heads). For a sequence ``X`` over an alphabet, with
    positions 1..N::

        find_1(X, i) = max({j <= i : X_{j-1} = X_i} U {0})       (one past the latest earlier X_i)
        find_k(X, i) = find_1(X, find_{k-1}(X, i))                 (find_0(X, i) = i)
        hop_k(X)_i   = X_{find_k(X, i)}, or "none" where find_k(X, i) = 0

    so ``hop_1`` is the induction head's target (what followed the previous occurrence of the
    current symbol) and each further hop applies it again from where the last one landed. Their
    models are trained to output ``hop_k(X)_i`` at *every* position ``i``, the "none" positions
    included; their sequences have 100 symbols over 4 letters, no symbol twice in a row (as their
    code draws them).

    Here: the document's text is ``X`` (``alphabet`` letters a, b, ..., its length the document's:
    in a training mix the training length), no symbol twice in a row, ``X`` of the document's split
    by :func:`lexkit.tasks.held_out` of its bytes; :attr:`Document.targets` holds what each position
    must produce, ``hop_k(X)`` of the symbol it reads (``_`` for "none"), the first position (BOS)
    the first symbol, and the answer span covers every labelled position, 1..N-1 (what the mix's
    probe scores: ``val_khop_exact`` is the share of sequences right at every position). It is a
    *labelling* task (:attr:`Task.labels`): no needle is asked after a haystack, the haystack and the
    depth are not used, and ``lexkit retrieval`` does not score it. Their recipe trains hop counts
    0..16 together, the count given as a first token; a ``khop:hops=K`` document is one fixed K."""

    name = "khop"
    summary = ("k-hop induction heads: letters of a small alphabet, the symbol k hops back labelled at every "
               "position (Sanford, Hsu, Telgarsky 2024)")
    size = 1  # no needle: the sequence is the whole document
    styles = ("bytes",)
    labels = True
    params = {
        "hops": Param(int, 2, "induction hops from each position to its target (0: the symbol itself)",
                      lambda k: 0 <= k <= MAX_LINKS, f"0..{MAX_LINKS}"),
        "alphabet": Param(int, 4, "symbols of the sequence (letters a, b, ...)",
                          lambda a: 2 <= a <= KHOP_ALPHABET, f"2..{KHOP_ALPHABET}"),
    }

    @classmethod
    def build(cls, rng, haystack, free, before, depth, size, split, style, hops=2, alphabet=4) -> Document:
        n = free + KHOP_MINIMUM
        while True:
            seq = bytearray([LETTERS[int(rng.integers(0, alphabet))]])
            for _ in range(n - 1):  # no symbol twice in a row: one of the alphabet's others
                step = int(rng.integers(1, alphabet))
                seq.append(LETTERS[(LETTERS.index(seq[-1]) + step) % alphabet])
            if needles.held_out(bytes(seq)) == (split == "eval"):
                break
        text = bytes(seq)
        targets = text[:1] + hop_targets(text, hops)[:-1]
        return Document(cls.name, text, (1, n), (0, n - 1), float(depth), alphabet + 1, targets=targets)
