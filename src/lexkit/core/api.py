"""The top-level API's one trick: a module that is also its main function.

``lexkit.evaluate(model, docs, lengths)`` calls :func:`lexkit.evaluate.evaluate`, while
``from lexkit.evaluate import evaluate_run`` and ``lexkit.evaluate.windows`` keep working: the
module object itself is callable. Python supports this by assigning a module's ``__class__``
(a subclass of ``types.ModuleType``; the data model's "customizing module attribute access"); the
module's ``__signature__`` is its function's, so ``help()`` and ``inspect.signature`` show the
real parameters. The same for ``lexkit.train`` and ``lexkit.resolution``. A plain function of
the same name in ``lexkit/__init__.py`` would instead hide the module behind it
(``lexkit.training.loop.lr_at`` would stop working, depending on what was imported first).
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable


class CallableModule(types.ModuleType):
    """A module whose call is its ``__main_function__``."""

    __main_function__: Callable

    def __call__(self, *args, **kwargs):
        return self.__main_function__(*args, **kwargs)


def callable_module(name: str, function: Callable) -> None:
    """Make the module ``name`` (already in ``sys.modules``) call ``function`` when called."""
    module = sys.modules[name]
    module.__main_function__ = function
    module.__signature__ = inspect.signature(function)
    module.__class__ = CallableModule
