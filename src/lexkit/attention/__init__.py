"""Attention patterns (mask predicates) and the kernels that run them."""

from .cache import KVCache
from .kernels import KERNELS, Attention, choose_kernel, kernel_label, record_kernels, reference_attention
from .patterns import Both, Pattern, create, describe, names, register

__all__ = [
    "KERNELS", "Attention", "Both", "KVCache", "Pattern", "choose_kernel", "create", "describe", "kernel_label",
    "names", "record_kernels", "reference_attention", "register",
]
