"""``passkey``: digits to remember; lexkit's byte needle, or Landmark Attention's standard prompt."""

from __future__ import annotations

from .base import DIGITS, MARK, Document, Haystack, Task, held_out, needle_value, register
from .text import grass_text

# The standard passkey prompt (Landmark Attention llama/run_test.py; YaRN eval/passkey.py; LongLoRA).
PASSKEY_TASK = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
                "I will quiz you about the important information there.")
PASSKEY_NEEDLE = "The pass key is {k}. Remember it. {k} is the pass key."
PASSKEY_QUESTION = "What is the pass key? The pass key is"
_PASSKEY_NEEDLE_BYTES = b"\nthe pass key is " + MARK


@register
class Passkey(Task):
    """A key of digits to remember: lexkit's byte needle, or Landmark Attention's standard prompt."""

    name = "passkey"
    summary = "digits to remember (standard style: the Landmark Attention / YaRN / LongLoRA prompt)"
    size = 5

    @classmethod
    def build(cls, rng, haystack, free, before, depth, size, split, style) -> Document:
        if style == "standard":
            return _standard_passkey(rng, free, before, depth, size, split)
        return _byte_needle(cls.name, rng, haystack, free, before, depth, size, split, DIGITS,
                            _PASSKEY_NEEDLE_BYTES, b".\n")


def _byte_needle(task: str, rng, haystack: Haystack, free: int, before: int, depth: float, size: int, split: str,
                 alphabet: bytes, needle: bytes, tail: bytes) -> Document:
    """``needle`` + a value of ``alphabet`` + ``tail`` at ``before``, the haystack, then ``needle``
    again: the question, answered by the value."""
    value = needle_value(rng, alphabet, size, split)
    head = haystack.take(rng, before) + needle
    text = head + value + tail + haystack.take(rng, free - before) + needle
    return Document(task, text + value, (len(text), len(text) + size), (len(head), len(head) + size), depth,
                    len(alphabet))


def _passkey_text(prefix: str, suffix: str, key: str) -> tuple[str, int]:
    """The standard prompt (lines joined by newlines) and where the key of the needle starts."""
    lines = [PASSKEY_TASK, prefix]
    start = len("\n".join(lines)) + 1 + len("The pass key is ")
    lines += [PASSKEY_NEEDLE.format(k=key), suffix, PASSKEY_QUESTION]
    return "\n".join(lines), start


def passkey_range(digits: int) -> tuple[int, int]:
    """The keys of a standard passkey of ``digits`` digits: Landmark's 1..50000 for the default
    5 (so numbers compare with the papers'), else every number of exactly ``digits`` digits."""
    if digits == Passkey.size:
        return 1, 50000
    return (1 if digits == 1 else 10 ** (digits - 1)), 10**digits - 1


def _standard_passkey(rng, free: int, before: int, depth: float, size: int, split: str) -> Document:
    digits = max(1, size)
    low, top = passkey_range(digits)
    while True:
        key = str(int(rng.integers(low, top + 1)))
        if held_out(key.encode()) == (split == "eval"):
            break
    free += 3 * (digits - len(key))  # the key is written three times: a shorter one leaves more filler
    before = min(before, free)
    prompt, start = _passkey_text(grass_text(before), grass_text(free - before), key)
    text = (prompt + " " + key).encode()
    answer = (len(prompt), len(text))  # with its leading space: the model continues "...is"
    return Document("passkey", text, answer, (start, start + len(key)), float(depth), len(DIGITS))
