"""float32 matmul precision: TensorFloat-32 on GPUs with tensor cores, full float32 elsewhere."""

from __future__ import annotations

from ..errors import UserError

PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision: str | None) -> bool:
    """``torch.set_float32_matmul_precision`` on CUDA GPUs of compute capability 8 or later
    ("high": float32 matmuls as TF32, several times faster for a ~1e-3 relative error; the case
    of Lightning's start-up hint), never on CPUs. ``None`` or "highest": torch's default.
    Whether it was set."""
    if precision not in (None, *PRECISIONS):
        raise UserError(
            f"float32_matmul_precision={precision!r} is not one of {', '.join(PRECISIONS)}. "
            "Use `float32_matmul_precision=high` (TF32 on tensor-core GPUs) or `highest` (exact)."
        )
    import torch

    if precision in (None, "highest") or not torch.cuda.is_available():
        return False
    if torch.cuda.get_device_capability()[0] < 8:
        return False
    torch.set_float32_matmul_precision(precision)
    return True
