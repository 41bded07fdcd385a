"""``lexkit.train``: train a byte-level model (:mod:`lexkit.training.loop`, the loop) under the name users
import. The module is callable: ``lexkit.train(out, model_cfg, train_cfg, corpus=...)`` is
:func:`lexkit.training.loop.train`; the configs come from :func:`lexkit.training.settings.configs`."""

from .core.api import callable_module
from .training.loop import TrainError, lr_at, make_optimizer, train  # noqa: F401 (the loop's public names)
from .training.settings import TrainConfig, configs  # noqa: F401

callable_module(__name__, train)
