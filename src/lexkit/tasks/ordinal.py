"""``ordinal``: the structure of MRCR (multi-round co-reference), in RULER's words for the standard style."""

from __future__ import annotations

from ..core.specs import Param
from .base import DIGITS, LETTERS, MARK, MAX_LINKS, Document, Task, register
from .text import RULER_DIGITS, RULER_NEEDLE, distinct, filler, random_word, weave

#: letters of the byte style's cue
ORDINAL_CUE = 3
ORDINAL_TASK = ("The special magic number of one word is given several times within the following text, a "
                "different number each time. Make sure to memorize them in order. I will quiz you about them "
                "afterwards.")
ORDINAL_QUESTION = ("What is the {nth} special magic number for {word} mentioned in the provided text? "
                    "The {nth} special magic number for {word} mentioned in the provided text is")


@register
class Ordinal(Task):
    """The structure of MRCR (multi-round co-reference: Vodrahalli et al., "Michelangelo", 2024;
    OpenAI's openai/mrcr): one cue given ``count`` times, each time with another value, and the
    question asks for the value of its ``which``-th occurrence (1 = the first; ``any``: drawn per
    document). The asked occurrence is the needle (at ``depth``), the earlier ones before it and
    the later ones after, so neither recency nor primacy answers but for one position."""

    name = "ordinal"
    summary = "one cue ~key=value given `count` times with different values; asked for the i-th (MRCR)"
    size = 4
    params = {
        "count": Param(int, 4, "times the cue is given", lambda n: 2 <= n <= MAX_LINKS, f"2..{MAX_LINKS}"),
        "which": Param(str, "any", "the occurrence asked for, 1..count, or any (drawn per document)",
                       lambda w: w == "any" or (w.isascii() and w.isdigit() and w[0] != "0"), "any or 1..count"),
    }

    @classmethod
    def check_params(cls, values):
        if values["which"] != "any" and int(values["which"]) > values["count"]:
            raise ValueError(f"task ordinal: parameter which={values['which']} is out of range (must be any or "
                             f"1..count, count={values['count']})")

    @classmethod
    def default_size(cls, style: str) -> int:
        """4 letters in lexkit's byte needles, RULER's 7 digits in the standard style."""
        return RULER_DIGITS if style == "standard" else cls.size

    @classmethod
    def build(cls, rng, haystack, free, before, depth, size, split, style, count=4, which="any") -> Document:
        standard = style == "standard"
        alphabet = DIGITS[1:] if standard else LETTERS  # RULER's numbers of nonzero digits; letters
        values = distinct(rng, alphabet, size, split, count, cls.name)
        i = int(rng.integers(1, count + 1)) if which == "any" else int(which)
        if standard:  # RULER's needle, one word throughout; the answer after a space, as the passkey's
            cue = random_word(rng, set()).decode()
            head, lead, tail = (ORDINAL_TASK + "\n").encode(), b" ", b"."
            given = b" " + RULER_NEEDLE.split("{value}")[0].format(word=cue).encode()

            def question(j: int) -> bytes:
                return ("\n" + ORDINAL_QUESTION.format(nth=_nth(j), word=cue)).encode()
        else:  # ~cue=value, asked as ~cue#2=
            cue = random_word(rng, set(), ORDINAL_CUE).decode()
            head, lead, tail = b"", b"", b""
            given = MARK + cue.encode() + b"="

            def question(j: int) -> bytes:
                return MARK + cue.encode() + b"#" + str(j).encode() + b"="
        # a question shorter than the longest (fewer digits, a shorter ordinal word) leaves the rest to
        # the filler, before and after the needle in the depth's proportion: every document has one length
        spare = max(len(question(j)) for j in range(1, count + 1)) - len(question(i))
        free, before = free + spare, before + round(spare * depth / 100)
        cuts = sorted(int(c) for c in rng.integers(0, before + 1, i - 1)) + [before] + sorted(
            int(c) for c in rng.integers(before, free + 1, count - i))  # occurrence order, the asked at `before`
        body, starts = weave(free, [(cut, given + v + tail) for cut, v in zip(cuts, values)],
                              filler(rng, haystack, style, free))
        text = head + body + question(i)
        at = [len(head) + s + len(given) for s in starts]  # where each occurrence's value starts
        return Document(cls.name, text + lead + values[i - 1], (len(text), len(text) + len(lead) + size),
                        (at[i - 1], at[i - 1] + size), float(depth), len(alphabet),
                        tuple((a, a + size) for j, a in enumerate(at) if j != i - 1))


def _nth(i: int) -> str:
    """``first``, ``second``, ... ``tenth``, then ``11th``, ``21st``, ``22nd``, ``23rd``, ..."""
    words = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
    if i <= len(words):
        return words[i - 1]
    suffix = "th" if i % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(i % 10, "th")
    return f"{i}{suffix}"
