"""lexkit's version (one place; the package and every document lexkit writes read it here)."""

__version__ = "0.1.0"
