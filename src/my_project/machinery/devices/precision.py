"""float32 matmul precision: TensorFloat-32 on GPUs with tensor cores, full float32 elsewhere."""

from __future__ import annotations

from ..errors import UserError

PRECISIONS = ("highest", "high", "medium")


def has_tensor_cores() -> bool:
    """True on CUDA GPUs of the Ampere generation or later (where TF32 matmuls exist)."""
    import torch

    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8


def set_float32_matmul_precision(precision: str | None) -> bool:
    """Apply ``torch.set_float32_matmul_precision(precision)`` where it pays; say if it did.

    Only on GPUs with tensor cores (the case Lightning's start-up hint is about): there
    "high" runs float32 matmuls as TF32, several times faster for a ~1e-3 relative error.
    On CPUs it is left alone, so CPU results do not depend on this setting. ``None`` or
    "highest" keeps torch's default.
    """
    if precision is not None and precision not in PRECISIONS:
        raise UserError(
            f"float32_matmul_precision={precision!r} is not one of {', '.join(PRECISIONS)}. "
            "Use `float32_matmul_precision=high` (TF32 on tensor-core GPUs) or `highest` (exact)."
        )
    if precision in (None, "highest") or not has_tensor_cores():
        return False
    import torch

    torch.set_float32_matmul_precision(precision)
    return True
