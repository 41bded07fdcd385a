"""Attention patterns (mask predicates), the layer modifiers (``modifiers``) and the kernels that run them."""

from .cache import KVCache
from .kernels import KERNELS, Attention, choose_kernel, kernel_label, record_kernels
from .patterns import (
    PATTERNS,
    Both,
    Either,
    First,
    Layered,
    Pattern,
    create,
    describe,
    intersect,
    layer_patterns,
    names,
    pattern_help,
    register,
)

__all__ = [
    "KERNELS", "PATTERNS", "Attention", "Both", "Either", "First", "KVCache", "Layered", "Pattern", "choose_kernel",
    "create", "describe", "intersect", "kernel_label", "layer_patterns", "names", "pattern_help", "record_kernels",
    "register",
]
