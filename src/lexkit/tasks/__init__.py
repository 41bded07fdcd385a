"""Retrieval tasks: documents that hide a needle in a haystack and ask for it back (one room per task;
:mod:`.base` the document, the registry and the specs, :mod:`.text` the pieces several tasks share).

Every document is ``text`` = haystack before + needle + haystack after + question + answer, and
knows where its answer is: ``answer`` is the byte span the model must produce (the prompt is
everything before it) and ``needle`` the span where the same bytes were given earlier. The
tasks, each in two styles but ``induction``:

* ``copy`` (induction / repeated sequence, Olsson et al.; TransformerLens' ``induction_loss``): a
  random segment of ``size`` letters a-z after a marker, the haystack, the marker again, the
  segment again.
* ``passkey``: ``size`` random digits to remember. Byte style (lexkit's byte models): the needle
  ``\\nthe pass key is ~{key}.\\n`` and the question ``\\nthe pass key is ~``: the marker byte
  ``~`` (rare in source code, and removed from every haystack) is the unique prefix a byte-level
  induction head can match. Standard style (tokenizer models): exactly the prompt of Landmark
  Attention's ``run_test.py``, copied by YaRN's ``eval/passkey.py`` and LongLoRA (task sentence,
  the grass-is-green filler sliced in characters before and after the needle, "The pass key is
  {k}. Remember it. {k} is the pass key.", "What is the pass key? The pass key is"; k uniform in
  1..50000), so numbers for a pretrained model compare with the published ones; another ``size``
  than the default 5 draws keys of exactly that many digits.
* ``multikey`` (RULER's ``niah_multikey``): ``MULTIKEY_NEEDLES`` needles of the same form with
  distinct words and keys; one is asked for, so recall is separated from recency. Byte style
  ``\\n{word} ~{key}\\n`` asked as ``\\n{word} ~``; standard style RULER's needle "One of the
  special magic numbers for {word} is: {value}." in the grass filler, values of 7 digits as
  RULER's (or ``size``).
* ``induction``: a copy needle in a trained format drawn per document (the training mix of the skill).
* ``kvthread`` (Needle Threading, Roberts et al., ICLR 2025; HashHop, magicproduct/hash-hop):
  ``chains`` chains of ``hops`` + 1 random hashes of ``size`` symbols a-z, A-Z, each link an
  assignment scattered through the haystack; asked for the hash ``hops`` links forward from a
  chain's first hash, or backward from its last. Byte style: links ``~A=B``, the question
  ``~A>>`` (one arrow a hop; ``<`` backward); standard style: links "A = B." in the grass filler,
  the question in words. The needle is the link that holds the answer.
* ``ordinal`` (the structure of MRCR): one cue given ``count`` times with distinct values, asked
  for the value of its ``which``-th occurrence. Byte style ``~cue=value`` asked as ``~cue#2=``;
  standard style RULER's needle, one word throughout, "What is the second special magic number
  for {word} ...".
* ``khop`` (k-hop induction heads, Sanford, Hsu and Telgarsky 2024): a *labelling* task, no
  needle and no haystack: a sequence over a small alphabet, every position labelled with the
  symbol ``hops`` induction hops back (:attr:`Document.targets`); trained and probed in a mix only.

Neither of the last two can be answered by copying what follows the question's cue: a copier
gives the 1-hop value (kvthread forward), nothing (backward: the asked hash is never a key) or
the latest occurrence's value (ordinal). Their parameters are set in the task's spec,
``kvthread:hops=3,direction=backward`` (:func:`parse`, as a scheme's or a pattern's).

Depth (percent, the needle-in-a-haystack convention): the share of the haystack placed before
the needle; 0 puts the needle first, 100 right before the question (the other pieces of a
kvthread or ordinal document may stand anywhere, ordinal's later occurrences after it). The
haystack of the byte style is text of a corpus (``Haystack``); the marker byte never occurs in it.

No leaks between training and evaluation: a needle value (segment, key, each hash of a kvthread
chain, each value of an ordinal cue) belongs to the evaluation split or the training split by a
hash of its bytes (:func:`held_out`), generators draw from seeds salted by split, and the
training mix takes its haystack from the training documents, evaluation from validation documents.

**The registry.** Tasks are kept by name (:data:`TASKS`), like position schemes and attention
patterns: a task is a :class:`Task` subclass registered with :func:`register`, and a module that
registers its own is loaded with ``--import MODULE`` (``lexkit tasks --import MODULE`` lists it;
``lexkit retrieval --task``, ``lexkit train --mix`` and the study take its name)::

    @tasks.register
    class Reverse(tasks.Task):
        name = "reverse"  # the registry key and the salt of its documents' seeds
        size = 8  # default needle size; mix_sizes: the range a training mix draws from
        summary = "a segment of letters, asked for backwards"
        params = {}  # name -> specs.Param, set in a spec ``reverse:key=value``; mix_choices: what a mix draws

        @classmethod
        def build(cls, rng, haystack, free, before, depth, size, split, style, **params):
            ...  # a Document of exactly free + minimum_length bytes (tests/fixtures/my_task.py)

A document's generator is seeded by (split, seed, the task's *name*, length, depth, index)
(:func:`rng_for`; with the parameters given other than their defaults, :func:`seed_name`), so
adding or removing a task changes no other task's documents. Whatever changes a task's documents
(its builder: bump its ``version``; the seeding rule: :data:`SEEDING`; its parameters: part of
its canonical spec) changes its :func:`identity`, which caches of scored documents are keyed by.
"""

# each import registers its task, in this order (the registry lists them so)
# isort: off
from . import copy  # noqa: F401
from . import passkey  # noqa: F401
from . import multikey  # noqa: F401
from . import induction  # noqa: F401
from . import kvthread  # noqa: F401
from . import ordinal  # noqa: F401
from . import khop  # noqa: F401
# isort: on
from .base import (  # noqa: F401 (the package's interface)
    DIGITS,
    LETTERS,
    MARK,
    MAX_LINKS,
    MIN_FITTING_SIZE,
    SEEDING,
    SPLITS,
    STYLES,
    TASKS,
    Document,
    Haystack,
    Task,
    canonical,
    chance_bits,
    check_depth,
    check_format,
    check_scored,
    check_task,
    describe,
    documents,
    draw_spec,
    fitting_size,
    get,
    guess_rate,
    has_curriculum,
    held_out,
    identity,
    make,
    minimum_length,
    mix_sizes,
    mix_specs,
    names,
    needle_value,
    parse,
    register,
    rng_for,
    seed_name,
    task_seed,
)
from .copy import Copy  # noqa: F401
from .induction import Induction  # noqa: F401
from .khop import KHOP_NONE, KHop, hop_targets  # noqa: F401
from .kvthread import ARROWS, DIRECTIONS, HASH, KVTHREAD_QUESTION, SUPERVISION, KVThread  # noqa: F401
from .multikey import MULTIKEY_NEEDLES, Multikey  # noqa: F401
from .ordinal import Ordinal  # noqa: F401
from .passkey import PASSKEY_NEEDLE, PASSKEY_QUESTION, PASSKEY_TASK, Passkey, passkey_range  # noqa: F401
from .text import GRASS, RULER_DIGITS, RULER_NEEDLE, RULER_QUESTION, RULER_TASK  # noqa: F401
