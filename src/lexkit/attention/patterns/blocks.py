"""The patterns that cut the input into blocks, whose keys a query loses at a block's edge:

* ``bca:W``: blockwise causal attention (Sun et al. 2022, Sec. 3.3): blocks of W/2; each block sees
  itself causally and all of the previous block.
* ``chunk:W``: chunked attention (Llama 4's local layers): a query sees only the keys of its own
  chunk of W, causally, n <= m and floor(n/W) = floor(m/W) (unlike ``bca``, not the previous one).

Both override ``retained``: what a streaming cache keeps follows the blocks, not a sliding reach.
"""

from __future__ import annotations

from torch import Tensor

from ...core.specs import Param, positive
from .base import Pattern, causal, register


@register
class BCA(Pattern):
    """Blockwise causal attention (Sun et al. 2022, Sec. 3.3): blocks of W/2 tokens; a query sees
    its own block causally and the whole previous block."""

    name = "bca"
    params = {
        "W": Param(int, None, "twice the block size (default: the training length; even)",
                   lambda x: x > 0 and x % 2 == 0, "a positive even integer"),
    }
    positional = "W"
    summary = "blocks of W/2: own block causally + the previous block"

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        block = self.values["W"] // 2
        return causal(q_idx, k_idx) & (k_idx // block >= q_idx // block - 1)

    def retained(self, k_idx: Tensor, q: int) -> Tensor:
        """The previous block and the current one: queries from q on see no key before the
        block preceding q's block."""
        block = self.values["W"] // 2
        return k_idx >= (q // block - 1) * block

    @property
    def reach(self) -> int:
        return self.values["W"]


@register
class Chunk(Pattern):
    """Chunked attention (Llama 4's local RoPE layers, ``attention_chunk_size``): the input in chunks
    of W; a query sees the keys of its own chunk up to itself, n <= m and floor(n/W) = floor(m/W).
    Unlike ``bca`` a chunk never sees the previous one, so the first query of a chunk sees only
    itself."""

    name = "chunk"
    params = {"W": Param(int, None, "chunk size (default: the training length)", positive, "> 0")}
    positional = "W"
    summary = "chunks of W: own chunk causally, nothing before it (Llama 4)"

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        size = self.values["W"]
        return causal(q_idx, k_idx) & (k_idx // size == q_idx // size)

    def retained(self, k_idx: Tensor, q: int) -> Tensor:
        """The current chunk only: queries from q on never see a key before q's chunk."""
        size = self.values["W"]
        return k_idx >= (q // size) * size

    @property
    def reach(self) -> int:
        return self.values["W"]
