"""The model floor: the byte-level decoder over a layer stack (:mod:`.gpt`), sampling with the one
decoding loop (:mod:`.sample`) and Hugging Face models behind the same calls (:mod:`.hf`).
``from lexkit.model import GPT, ModelConfig`` reads the decoder's two public names."""

from .gpt import BOS, GPT, VOCAB, ModelConfig  # noqa: F401
