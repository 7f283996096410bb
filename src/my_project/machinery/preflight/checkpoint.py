"""Checkpoints that do not exist, cannot be read, or belong to another model.

Without these, a checkpoint of another model fails with a long key list from
``load_state_dict``, and a truncated one with a pickle error.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from ..errors import UserError


def check_checkpoint_path(ckpt_path: str | None, what: str = "ckpt_path") -> str | None:
    """Return the checkpoint path if it is a file; say clearly what it is if it is not."""
    if ckpt_path is None:
        return None
    path = Path(ckpt_path)
    if path.is_dir():
        found = sorted(str(p.relative_to(path)) for p in path.rglob("*.ckpt"))[:5]
        listed = f" It holds {', '.join(found)}." if found else " It holds no `.ckpt` file."
        raise UserError(
            f"{what}={ckpt_path} is a directory, not a checkpoint file.{listed} Pass a file, "
            f"e.g. `{what}=logs/train/runs/<run>/checkpoints/last.ckpt`."
        )
    if not path.is_file():  # missing, or a pipe (reading one would wait), a socket, a device
        hint = ""
        if path.parent.is_dir():
            found = sorted(p.name for p in path.parent.glob("*.ckpt") if p.is_file())
            hint = f" Checkpoints in {path.parent}: {', '.join(found) or 'none'}."
        problem = "is a pipe, socket or device" if path.exists() else "does not exist"
        raise UserError(
            f"{what}={ckpt_path} {problem}.{hint} Pass the path of a `.ckpt` file, e.g. "
            f"`{what}=logs/train/runs/<run>/checkpoints/last.ckpt`."
        )
    return str(path)


def read_checkpoint(ckpt_path: str, what: str = "ckpt_path") -> dict[str, Any]:
    """The checkpoint's contents, on the CPU, if it is an intact Lightning checkpoint of plain
    data (`reliability/atomic_io.py`: its digest, or its zip's CRCs, verified first); else a
    UserError saying what the file is (empty, damaged, not a checkpoint, a bare tensor...)."""
    import torch

    from ..reliability.atomic_io import check_intact

    with open(ckpt_path, "rb") as handle:
        start = handle.read(4)
    if start != b"PK\x03\x04":
        raise UserError(
            f"{what}={ckpt_path} is {'not a checkpoint' if start else 'an empty file (0 bytes)'}"
            ": torch.save writes a zip archive, and this file is not one. Pass a checkpoint "
            "written by this project's train.py (a run's checkpoints/*.ckpt; last.ckpt is "
            "written atomically, always complete)."
        )
    check_intact(ckpt_path, what)
    try:
        checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:
        unsafe = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(error))
        if unsafe:
            raise UserError(
                f"{what}={ckpt_path} holds a pickled {unsafe[1]}, and unpickling a class from a "
                "file can run any code, so only plain data (tensors, numbers, strings, lists, "
                "dicts) is read from a checkpoint, as this project's own hold. If you trust the "
                "file, load it with `torch.load(path, weights_only=False)` and save its "
                "`state_dict` and plain hyperparameters again."
            ) from error
        raise UserError(
            f"{what}={ckpt_path} cannot be read as a checkpoint ({type(error).__name__}: "
            f"{(str(error).strip().splitlines() or [''])[0][:200]}). Use another one."
        ) from error
    weights = checkpoint.get("state_dict") if isinstance(checkpoint, dict) else None
    if not isinstance(weights, dict):
        holds = type(checkpoint).__name__
        raise UserError(
            f"{what}={ckpt_path} is not a Lightning checkpoint: it holds a {holds}"
            f"{' without a state_dict' if isinstance(checkpoint, dict) else ''}. Pass a "
            "checkpoint written by this project's train.py (a run's checkpoints/*.ckpt)."
        )
    return checkpoint


def check_finite(ckpt_path: str, weights: dict[str, Any], allow: bool = False) -> None:
    """``weights`` (a model's parameters) that hold NaN or inf are a UserError (``allow``: a
    warning): every result computed with them is meaningless. Buffers and metric states may
    hold inf (an attention mask, a running maximum's start). A sum in float64 is NaN or inf
    exactly when a float32, float16 or bfloat16 weight is."""
    from torch import Tensor, float64

    bad = [
        key
        for key, value in weights.items()
        if isinstance(value, Tensor)
        and value.is_floating_point()
        and not value.sum(dtype=float64).isfinite()
    ]
    if not bad:
        return
    where = f"NaN or inf in {', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}"
    if allow:
        print(f"Warning: {ckpt_path} holds non-finite weights ({where}).", file=sys.stderr)
        return
    raise UserError(
        f"{ckpt_path} holds non-finite weights ({where}), so whatever is computed with them "
        "is meaningless. Use an earlier checkpoint of its run (a run stopped by a non-finite "
        "loss keeps its last good last.ckpt), or evaluate it anyway with `eval.py "
        f"ckpt_path={ckpt_path} allow_non_finite=true`."
    )


def epochs_done(checkpoint: dict[str, Any]) -> int | None:
    """How many epochs the checkpoint's training ran through (its training batches), as
    Lightning's fit loop counts them; None when the checkpoint does not say."""
    try:
        progress = checkpoint["loops"]["fit_loop"]["epoch_progress"]["current"]
        return int(progress["processed"])
    except (KeyError, TypeError, ValueError):
        return None


def check_resumed_progress(
    ckpt_path: str, checkpoint: dict[str, Any], max_epochs: Any, max_steps: Any
) -> None:
    """A resume that asks for fewer epochs (or steps) than the checkpoint has trained, in one
    line: Lightning stops with a traceback once the run directory is written (epochs), or
    trains nothing without a word (steps)."""
    done = epochs_done(checkpoint)
    if done is not None and _limit(max_epochs) is not None and done > max_epochs:
        raise UserError(
            f"{ckpt_path} has trained {done} epoch{'s' if done != 1 else ''}, more than "
            f"trainer.max_epochs={max_epochs} asks for. Ask for more to train further (e.g. "
            f"`trainer.max_epochs={done + 10}`), or `trainer.max_epochs={done}` to only test it."
        )
    steps = checkpoint.get("global_step")
    if isinstance(steps, int) and _limit(max_steps) is not None and steps > max_steps:
        raise UserError(
            f"{ckpt_path} has trained {steps} steps, more than trainer.max_steps={max_steps} "
            f"asks for. Ask for more to train further, `trainer.max_steps={steps}` to only "
            "test it, or `trainer.max_steps=-1` for no limit."
        )


def _limit(value: Any) -> int | None:
    """A limit of the Trainer (`max_epochs`, `max_steps`); None for none (-1, null)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def check_checkpoint_matches(ckpt_path: str, model: Any) -> dict[str, Any]:
    """The checkpoint is readable and holds weights of exactly this model's shapes.

    Returns the checkpoint's training progress: ``epoch``, ``global_step``, ``epochs_done``
    and ``logger_step``, the first step at which the resumed run logs (loggers count batches,
    ``global_step`` optimizer steps; see `logger_step`).
    """
    checkpoint = read_checkpoint(ckpt_path)
    weights = checkpoint["state_dict"]
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
    check_finite(ckpt_path, {k: weights[k] for k, _ in model.named_parameters()})
    progress = {k: checkpoint.get(k) for k in ("epoch", "global_step")}
    return {
        **progress,
        "epochs_done": epochs_done(checkpoint),
        "logger_step": logger_step(checkpoint),
    }


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
