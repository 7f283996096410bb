"""Checkpoints that do not exist, cannot be read, or belong to another model.

Without these, a checkpoint of another model fails with a long key list from
``load_state_dict``, and a truncated one with a pickle error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UserError


def check_checkpoint_path(ckpt_path: str | None, what: str = "ckpt_path") -> str | None:
    """Return the checkpoint path if it exists; say clearly if it does not."""
    if ckpt_path is None:
        return None
    path = Path(ckpt_path)
    if not path.is_file():
        hint = ""
        if path.parent.is_dir():
            found = sorted(p.name for p in path.parent.glob("*.ckpt"))
            hint = f" Checkpoints in {path.parent}: {', '.join(found) or 'none'}."
        raise UserError(
            f"{what}={ckpt_path} does not exist.{hint} Pass the path of a `.ckpt` file, e.g. "
            f"`{what}=logs/train/runs/<run>/checkpoints/last.ckpt`."
        )
    return str(path)


def check_checkpoint_matches(ckpt_path: str, model: Any) -> dict[str, Any]:
    """The checkpoint is readable and holds weights of exactly this model's shapes.

    Returns the checkpoint's training progress: ``epoch``, ``global_step`` and
    ``logger_step``, the first step at which the resumed run logs (loggers count batches,
    ``global_step`` optimizer steps; see `logger_step`).
    """
    import torch

    try:
        checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:
        raise UserError(
            f"ckpt_path={ckpt_path} cannot be read as a checkpoint ({type(error).__name__}: "
            f"{str(error).splitlines()[0][:200]}). It may be truncated or not a checkpoint; use "
            "another one (checkpoints/last.ckpt is written atomically and is always complete)."
        ) from error
    weights = checkpoint.get("state_dict") if isinstance(checkpoint, dict) else None
    if not isinstance(weights, dict):
        raise UserError(
            f"ckpt_path={ckpt_path} is not a Lightning checkpoint (no state_dict). Pass a "
            "checkpoint written by this project's train.py."
        )
    expected = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    problems = [f"{k} missing" for k in expected if k not in weights]
    problems += [
        f"{k} has shape {tuple(weights[k].shape)}, the model needs {tuple(v.shape)}"
        for k, v in expected.items()
        if k in weights and tuple(weights[k].shape) != tuple(v.shape)
    ]
    from lightning.pytorch.utilities.model_helpers import is_overridden
    from torchmetrics import Metric  # metric states are optional in a checkpoint

    metrics = tuple(f"{n}." for n, m in model.named_modules() if isinstance(m, Metric))
    # A module that makes layers in `configure_model` has them only once a fit or a load
    # has called it: their weights are not unexpected yet.
    if not is_overridden("configure_model", model):
        problems += [
            f"unexpected {k}" for k in weights if k not in expected and not k.startswith(metrics)
        ]
    if problems:
        saved_net = checkpoint.get("hyper_parameters", {}).get("net")
        hint = f" The checkpoint's network is {saved_net}." if saved_net else ""
        raise UserError(
            f"ckpt_path={ckpt_path} is a checkpoint of a different model: "
            f"{'; '.join(problems[:3])}{' ...' if len(problems) > 3 else ''}.{hint} Use the "
            "same model overrides as the run that wrote it (e.g. `model/net=cnn`), or "
            "`resume=<its run dir>`, which reloads that run's config."
        )
    progress = {k: checkpoint.get(k) for k in ("epoch", "global_step")}
    progress["logger_step"] = logger_step(checkpoint)
    return progress


def logger_step(checkpoint: dict[str, Any]) -> int:
    """The step at which a run resumed from ``checkpoint`` logs its first row: the loggers'
    count of batches (``_batches_that_stepped``; a GAN's ``global_step`` counts two optimizer
    steps a batch, accumulation one every N). A checkpoint saved at the end of a training
    batch holds the count before that batch (whose row is logged after the save, at that
    count), and Lightning adds the batch when it resumes; one saved at an epoch's end holds it
    whole (the rows logged after it, a test's, are logged again)."""
    loops = checkpoint.get("loops", {}).get("fit_loop", {})
    count = loops.get("epoch_loop.state_dict", {}).get("_batches_that_stepped")
    if count is None:
        return int(checkpoint.get("global_step") or 0)
    total = loops.get("epoch_loop.batch_progress", {}).get("total", {})
    at_batch_end = total.get("completed", 0) == total.get("processed", 0) - 1
    return int(count) + (1 if at_batch_end else 0)
