"""mlx-lm, in its own environment: ``rope_utils.initialize_rope``'s modules run by
:mod:`lexkit.conformance.sides.mlxlm_side` in the interpreter ``--python mlx-lm=PATH`` names (mlx
pins its own numpy and needs no torch; on Linux CPU ``pip install mlx mlx-cpu mlx-lm``, mlx-cpu alone
gives no ``mlx.core``)."""

from __future__ import annotations

from ..adapter import register
from ..remote import RemoteAdapter


@register
class MlxLm(RemoteAdapter):
    name = "mlx-lm"
    side = "mlxlm_side"
    probe = "mlx_lm"
    install = "python -m venv ENV && ENV/bin/pip install mlx mlx-cpu mlx-lm"
    summary = ("rope_utils.initialize_rope (nn.RoPE, DynamicNTKScalingRoPE, Llama3RoPE, YarnRoPE, SuScaledRoPE), "
               "called on [1, H, L, h] at an offset, out of process")
