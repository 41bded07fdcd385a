"""Attention patterns (mask predicates), the layer modifiers (``modifiers``) and the kernels that run them."""

from .cache import KVCache
from .kernels import KERNELS, Attention, choose_kernel, kernel_label, record_kernels
from .patterns import (
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
    register,
)

__all__ = [
    "KERNELS", "Attention", "Both", "Either", "First", "KVCache", "Layered", "Pattern", "choose_kernel", "create",
    "describe", "intersect", "kernel_label", "layer_patterns", "names", "record_kernels",
    "register",
]
