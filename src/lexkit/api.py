"""The top-level API's one trick: a module that is also its main function.

``lexkit.evaluate(model, docs, lengths)`` calls :func:`lexkit.evaluate.evaluate`, while
``from lexkit.evaluate import evaluate_run`` and ``lexkit.evaluate.windows`` keep working: the
module object itself is callable (its class is swapped for a subclass with ``__call__``). The
same for ``lexkit.train`` and ``lexkit.resolution``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable


def callable_module(name: str, function: Callable) -> None:
    """Make the module ``name`` (already in ``sys.modules``) call ``function`` when called."""

    class CallableModule(types.ModuleType):
        __doc__ = sys.modules[name].__doc__

        def __call__(self, *args, **kwargs):
            return function(*args, **kwargs)

    sys.modules[name].__class__ = CallableModule
