"""The data floor: the corpus (:mod:`.corpus`: the stdlib's source by default, a file, a directory, a
glob or a Hugging Face dataset, split by a fixed rule) and the training mix of retrieval documents
(:mod:`.mix`). ``from lexkit.data import Corpus`` reads the corpus's public class."""

from .corpus import Corpus, load_corpus  # noqa: F401
