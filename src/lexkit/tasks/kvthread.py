"""``kvthread``: Needle Threading (Roberts et al., ICLR 2025) and HashHop (magicproduct/hash-hop)."""

from __future__ import annotations

from ..core.specs import Param
from . import needles
from .base import LETTERS, MARK, MAX_LINKS, Document, Task, register
from .text import distinct, filler, weave

#: the symbols of a kvthread hash (HashHop's: a-z and A-Z)
HASH = LETTERS + needles.CAPITALS
DIRECTIONS = ("forward", "backward")
#: kvthread's supervision: the asked hop count's answer alone, or an answer at every hop count
#: (Sanford, Hsu and Telgarsky 2024 supervise every position of k-hop induction; in a language
#: model's terms, the shorter questions of the same chain follow the asked one, answered)
SUPERVISION = ("answer", "every")
#: the byte style's question: the hash it starts from, then one arrow per hop
ARROWS = {"forward": b">", "backward": b"<"}
KVTHREAD_STANDARD_SIZE = 8
KVTHREAD_TASK = ("Some assignments of random hashes, each written A = B, are hidden within the following text. "
                 "Make sure to memorize them. I will quiz you about chains of them afterwards.")
KVTHREAD_PAIR = "{key} = {value}."
KVTHREAD_QUESTION = {
    "forward": "Start at {hash} and follow the assignments {hops} forward (A = B leads from A to B). Which hash do "
               "you reach? The hash {hops} after {hash} is",
    "backward": "Start at {hash} and follow the assignments {hops} backward (A = B leads back from B to A). Which "
                "hash do you reach? The hash {hops} before {hash} is",
}


@register
class KVThread(Task):
    """Needle Threading (Roberts et al., "Needle Threading: Can LLMs Follow Threads through
    Near-Million-Scale Haystacks?", ICLR 2025) and HashHop (magicproduct/hash-hop): ``chains``
    chains of ``hops`` + 1 random hashes, each link an assignment ``A = B``; the links of every
    chain are scattered through the haystack in random order and the question asks for the hash
    ``hops`` links forward from the first hash of one chain, or backward from its last. The link
    that holds the answer is the needle (at ``depth``); the other chains are distractors of the
    same shape, so the answer is no chain's end by position alone."""

    name = "kvthread"
    summary = ("hash links ~A=B scattered in the haystack; asked for the hash `hops` links forward or backward "
               "(Needle Threading, HashHop)")
    size = 4
    params = {
        "hops": Param(int, 2, "links from the asked hash to the answer", lambda k: 1 <= k <= MAX_LINKS,
                      f"1..{MAX_LINKS}"),
        "direction": Param(str, "forward", "forward: from a chain's first hash; backward: from its last",
                           lambda d: d in DIRECTIONS, " or ".join(DIRECTIONS)),
        "chains": Param(int, 2, "chains in the document: one asked, the others distractors",
                        lambda c: 1 <= c <= MAX_LINKS, f"1..{MAX_LINKS}"),
        "supervise": Param(str, "answer", "answer: the question's hash alone; every: after it, the asked chain "
                           "also asked 1..hops-1 hops from the same start, each answered (a hop answer at every link)",
                           lambda v: v in SUPERVISION, " or ".join(SUPERVISION)),
    }
    mix_choices = {"hops": (1, 2), "direction": DIRECTIONS}
    curriculum = {"hops": (1,)}  # one hop first (Guo et al. 2025's phase before two; Sanford et al. 2024)

    @classmethod
    def default_size(cls, style: str) -> int:
        """4 symbols in lexkit's byte needles (a 2-hop document fits 64 bytes), 8 in the standard style."""
        return KVTHREAD_STANDARD_SIZE if style == "standard" else cls.size

    @classmethod
    def build(cls, rng, haystack, free, before, depth, size, split, style, hops=2, direction="forward",
              chains=2, supervise="answer") -> Document:
        hashes = distinct(rng, HASH, size, split, (hops + 1) * chains, cls.name)  # chain c: [c * (hops + 1):]
        links = [(hashes[c * (hops + 1) + j], hashes[c * (hops + 1) + j + 1]) for c in range(chains)
                 for j in range(hops)]
        forward = direction == "forward"
        asked = hops - 1 if forward else 0  # the link that holds the answer: the asked chain's last or first
        start = hashes[0] if forward else hashes[hops]
        reached = [hashes[k] if forward else hashes[hops - k] for k in range(hops + 1)]  # k hops from start
        answer = reached[hops]
        standard = style == "standard"
        if standard:  # " A = B." in the grass; the answer after a space, as the passkey's
            head, lead = (KVTHREAD_TASK + "\n").encode(), b" "
            pieces = [b" " + KVTHREAD_PAIR.format(key=k.decode(), value=v.decode()).encode() for k, v in links]
            key_at, value_at = 1, 1 + size + len(" = ")

            def ask(k: int) -> bytes:
                hop_text = f"{k} hop" + ("s" if k > 1 else "")
                return ("\n" + KVTHREAD_QUESTION[direction].format(hash=start.decode(), hops=hop_text)).encode()
        else:  # ~A=B, asked as ~A>> (one arrow a hop)
            head, lead = b"", b""
            pieces = [MARK + k + b"=" + v for k, v in links]
            key_at, value_at = len(MARK), len(MARK) + size + 1

            def ask(k: int) -> bytes:
                return MARK + start + ARROWS[direction] * k
        question = ask(hops)
        # supervise=every: the shorter questions after the answer (never in its prompt), each answered
        tail = b"".join(ask(k) + lead + reached[k] for k in range(1, hops)) if supervise == "every" else b""
        cuts = [before] + [int(c) for c in rng.integers(0, free + 1, len(links) - 1)]  # the others: anywhere
        order = [asked] + [i for i in range(len(links)) if i != asked]
        body, starts = weave(free, [(cut, pieces[i]) for cut, i in zip(cuts, order)],
                              filler(rng, haystack, style, free))
        text = head + body + question
        at = [len(head) + s for s in starts]  # where each link starts, the asked one first
        needle = at[0] + (value_at if forward else key_at)
        other = value_at if forward else key_at  # the other links' values (forward) or keys (backward)
        return Document(cls.name, text + lead + answer + tail, (len(text), len(text) + len(lead) + size),
                        (needle, needle + size), float(depth), len(HASH),
                        tuple((a + other, a + other + size) for a in at[1:]))
