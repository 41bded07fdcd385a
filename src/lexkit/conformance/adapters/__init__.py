"""The adapters for the implementations installable beside lexkit, one file each; importing this
package registers them (in the order the report's columns take). Each imports its runtime only when
it builds, so a missing one is skipped by name (:meth:`Adapter.unavailable`)."""

# isort: off
from . import lexkit  # noqa: F401
from . import hf  # noqa: F401
from . import xtransformers  # noqa: F401
from . import torchtune  # noqa: F401
from . import litgpt  # noqa: F401
from . import mlxlm  # noqa: F401
from . import vllm  # noqa: F401
# isort: on
