"""``lexkit inspect``'s two instruments, which tell retrieval failures apart: the byte table (:mod:`.bytes`:
what training showed each byte and where its embedding row went) and the needle mass
(:mod:`.needle_mass`: where a layer's attention goes when the answer is due). docs/inspect.md."""
