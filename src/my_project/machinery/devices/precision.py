"""float32 matmul precision: TensorFloat-32 on GPUs with tensor cores, full float32 elsewhere."""

from __future__ import annotations

from ..errors import UserError

PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision: str | None) -> bool:
    """``torch.set_float32_matmul_precision`` on CUDA GPUs of compute capability 8 or later
    ("high": TF32, several times faster for a ~1e-3 relative error), never on CPUs; whether
    it was set. ``None`` or "highest": torch's default."""
    if precision not in (None, *PRECISIONS):
        raise UserError(
            f"float32_matmul_precision={precision!r} is not one of {', '.join(PRECISIONS)}. "
            "Use `float32_matmul_precision=high` (TF32 on tensor-core GPUs) or `highest` (exact)."
        )
    import torch

    if precision in (None, "highest") or not torch.cuda.is_available():
        return False
    if torch.cuda.get_device_capability()[0] < 8:  # no tensor cores for TF32
        return False
    torch.set_float32_matmul_precision(precision)
    return True
