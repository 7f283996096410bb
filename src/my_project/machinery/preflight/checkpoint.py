"""Checkpoints that do not exist, cannot be read, are damaged, or belong to another model.

Without these, a checkpoint of another model fails with a long key list from
``load_state_dict``, a truncated one with a pickle error, and a damaged one not at all.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from ..distributed import is_rank_zero
from ..errors import UserError, more
from ..reliability.resume import trained_model


def check_checkpoint_path(ckpt_path: str | None, what: str = "ckpt_path") -> str | None:
    """Return the checkpoint path if it is a file; say clearly what it is if it is not."""
    if ckpt_path is None or Path(ckpt_path).is_file():
        return ckpt_path
    path = Path(ckpt_path)
    if path.is_dir():
        found = sorted(str(p.relative_to(path)) for p in path.rglob("*.ckpt"))[:5]
        problem = f"is a directory, not a checkpoint file. It holds {', '.join(found) or 'none'}."
    else:  # missing, or a pipe (reading one would wait), a socket, a device
        problem = "is not a regular file." if path.exists() else "does not exist."
        if found := sorted(p.name for p in path.parent.glob("*.ckpt") if p.is_file()):
            problem += f" Checkpoints in {path.parent}: {', '.join(found)}."
    raise UserError(
        f"{what}={ckpt_path} {problem} Pass a `.ckpt` file, e.g. "
        f"`{what}=logs/train/runs/<run>/checkpoints/last.ckpt`."
    )


def read_checkpoint(ckpt_path: str, what: str = "ckpt_path") -> dict[str, Any]:
    """The checkpoint's contents, on the CPU, if it is an intact Lightning checkpoint of plain
    data (every zip entry's CRC verified first); else a UserError saying what the file is."""
    import torch

    from ..reliability.atomic_io import damage

    with open(ckpt_path, "rb") as handle:
        start = handle.read(4)
    problem = (
        "torch.save writes a zip archive, and this file is not one"
        if start != b"PK\x03\x04"
        else damage(ckpt_path)
    )
    if problem is not None:
        what_is = "is an empty file (0 bytes)" if not start else "cannot be read as a checkpoint"
        raise UserError(
            f"{what}={ckpt_path} {what_is}: {problem}. Pass another checkpoint (a run's "
            "checkpoints/*.ckpt; an earlier one of its run), or restore the file from a copy."
        )
    try:
        checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:
        unsafe = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(error))
        raise UserError(
            f"{what}={ckpt_path} holds a pickled {unsafe[1]}, and unpickling a class can run any "
            "code, so only plain data is read from a checkpoint. If you trust the file, save its "
            "`state_dict` and plain hyperparameters again."
            if unsafe
            else f"{what}={ckpt_path} cannot be read ({type(error).__name__}: {error})."
        ) from error
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("state_dict"), dict):
        raise UserError(
            f"{what}={ckpt_path} is not a Lightning checkpoint: it holds a "
            f"{type(checkpoint).__name__} without a state_dict. Pass a checkpoint written by "
            "train.py (a run's checkpoints/*.ckpt)."
        )
    return checkpoint


def check_finite(ckpt_path: str, weights: dict[str, Any]) -> None:
    """``weights`` (a model's parameters, not its buffers: a mask may hold inf) holding NaN or
    inf are a UserError (a float64 sum is not finite exactly when one of them is not)."""
    from torch import Tensor, float64

    bad = [
        key
        for key, value in weights.items()
        if isinstance(value, Tensor)
        and value.is_floating_point()
        and not value.sum(dtype=float64).isfinite()
    ]
    if bad:
        raise UserError(
            f"{ckpt_path} holds non-finite weights (NaN or inf in {', '.join(bad[:3])}"
            f"{' ...' if len(bad) > 3 else ''}), so whatever is computed with them is "
            "meaningless. Use an earlier checkpoint of its run."
        )


def check_resumed_progress(
    ckpt_path: str, checkpoint: dict[str, Any], trainer: Any, model: str | None = None
) -> None:
    """A resume that asks for fewer epochs (or steps) than the checkpoint has trained: Lightning
    stops with a traceback once the run directory is written (epochs), or trains nothing
    without a word (steps). A checkpoint whose run trained another ``model`` (a
    `model._target_`) says so instead: more epochs would only meet that refusal next."""
    loops = checkpoint.get("loops", {}).get("fit_loop", {})
    epochs = loops.get("epoch_progress", {}).get("current", {}).get("processed")
    done = {"max_epochs": epochs, "max_steps": checkpoint.get("global_step")}
    for key, count in done.items():
        limit = trainer.get(key)
        if isinstance(count, int) and isinstance(limit, int) and 0 <= limit <= count:
            unit = "epoch" if key == "max_epochs" else "step"
            if limit == count:  # Lightning would only test it, without a word
                note = f"{ckpt_path} has trained all {count}: nothing to train, only the test"
                _notes.append(f"Note: trainer.{key}={limit}; {note} runs.")
                continue
            theirs = trained_model(Path(ckpt_path))
            if model is not None and theirs is not None and theirs != model:
                raise UserError(
                    f"ckpt_path={ckpt_path} is a checkpoint of a different model: the run that "
                    f"wrote it trained {theirs}, this run's model is {model}. Give the model "
                    "overrides of the run that wrote it (a `resume=` reloads that run's config)."
                )
            raise UserError(
                f"{ckpt_path} has trained {count} {unit}{'s' if count != 1 else ''}, more than "
                f"trainer.{key}={limit} asks for. Ask for more to train further (e.g. "
                f"`trainer.{key}={count + 10}`), or `trainer.{key}={count}` to only test it."
            )


_notes: list[str] = []  # what a resume will do, said once every check has passed


def forget_notes() -> None:
    _notes.clear()


def print_notes() -> None:
    """The notes of the checks, once all have passed: a refused run says only its Error."""
    if is_rank_zero():  # every process of a DDP run checks its config
        for note in _notes:
            print(note, file=sys.stderr)
    _notes.clear()


def check_resumed_processes(ckpt_path: str, trainer: Any) -> None:
    """A checkpoint saved mid-epoch by another number of processes than this run starts: its
    position in the epoch counts the batches of the old shares of the data, so the rest of that
    epoch and its validation would be skipped or run twice. An epoch-end one resumes on any."""
    checkpoint = read_checkpoint(ckpt_path)
    fit_loop = checkpoint.get("loops", {}).get("fit_loop", {})
    progress = fit_loop.get("epoch_loop.batch_progress", {})
    ranks = next(
        (
            state["ranks"]
            for state in (checkpoint.get("callbacks") or {}).values()
            if isinstance(state, dict) and isinstance(state.get("ranks"), list)
        ),
        None,
    )  # every process's state (`callbacks/rank_states.py`): as many as the run had
    if ranks is None or len(ranks) == trainer.world_size or progress.get("is_last_batch", True):
        return
    batches = progress.get("current", {}).get("processed", 0)
    if not batches:
        return  # saved as the epoch began: nothing of it is done
    epoch, was, now = checkpoint.get("epoch", 0), len(ranks), trainer.world_size
    raise UserError(
        f"{ckpt_path} was saved in the middle of epoch {epoch} (after {batches} batches of each "
        f"of {was} process{'es' if was != 1 else ''}), and this run starts {now} "
        f"process{'es' if now != 1 else ''}: the rest of that epoch and its validation would be "
        "counted in the old processes' batches, and skipped or run twice. Resume with the "
        f"devices it had (`trainer.devices={was}` on one machine) to finish the epoch, then "
        "change them from a checkpoint saved at an epoch's end (`ckpt_path=` a run's "
        "checkpoints/epoch_*.ckpt, or its last.ckpt once an epoch has ended)."
    )


def check_resumed_batch_size(ckpt_path: str, batch_size: int | None) -> None:
    """A checkpoint saved mid-epoch with another training batch size than this run's: its
    position in the epoch counts batches of the old size, so the rest of that epoch would be
    skipped or trained twice. Known where the loader saved its batch size (a `resumable_loader`
    one); an epoch-end checkpoint resumes with any."""
    checkpoint = read_checkpoint(ckpt_path)
    fit_loop = checkpoint.get("loops", {}).get("fit_loop", {})
    progress = fit_loop.get("epoch_loop.batch_progress", {})
    batches = progress.get("current", {}).get("processed", 0)
    if progress.get("is_last_batch", True) or not batches or batch_size is None:
        return
    states = fit_loop.get("state_dict", {}).get("combined_loader", [])
    saved = next(
        (s["batch_size"] for s in states if isinstance(s, dict) and s.get("batch_size")), None
    )
    if saved is None or saved == batch_size:
        return
    raise UserError(
        f"{ckpt_path} was saved in the middle of epoch {checkpoint.get('epoch', 0)} (after "
        f"{batches} batches of {saved} examples), and this run's training batches hold "
        f"{batch_size}: the rest of that epoch would be counted in batches of {saved}, and "
        f"skipped or trained twice. Resume with the batch size it had (`data.batch_size={saved}` "
        "where the data's batch_size is the loader's) to finish the epoch, then change it from a "
        "checkpoint saved at an epoch's end (`ckpt_path=` a run's checkpoints/epoch_*.ckpt, or "
        "its last.ckpt once an epoch has ended)."
    )


def check_checkpoint_matches(ckpt_path: str, model: Any) -> dict[str, Any]:
    """The checkpoint holds finite weights of exactly this model's names and shapes (``model``
    with the layers it builds in ``setup`` or ``configure_model``, as Lightning will load it);
    its ``epoch``, ``global_step`` and ``logger_step``."""
    from torchmetrics import Metric  # metric states are optional in a checkpoint

    checkpoint = read_checkpoint(ckpt_path)
    weights = checkpoint["state_dict"]
    expected = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    strict = getattr(model, "strict_loading", True)
    problems = [f"{k} missing" for k in expected if k not in weights and strict]
    problems += [
        f"{k} has shape {tuple(weights[k].shape)}, the model needs {tuple(v.shape)}"
        for k, v in expected.items()
        if k in weights and tuple(weights[k].shape) != tuple(v.shape)
    ]
    metrics = tuple(f"{n}." for n, m in model.named_modules() if isinstance(m, Metric))
    unexpected = [k for k in weights if k not in expected and not k.startswith(metrics)]
    problems += [f"unexpected {k}" for k in unexpected if strict]
    if problems and compiled_names_differ(set(expected), set(weights)):
        raise UserError(
            f"ckpt_path={ckpt_path} holds the weights of a network compiled with torch.compile "
            "(named `..._orig_mod...`) where this run's is not, or the other way round: "
            f"{'; '.join(problems[:2])}. Resume with the `compile` setting of the run that "
            "wrote it (eval.py, predict.py, serve.py and export.py read either)."
        )
    if problems:
        raise UserError(
            f"ckpt_path={ckpt_path} is a checkpoint of a different model: "
            f"{'; '.join(problems[:3])}{more(problems, 3)}. Give the model "
            "overrides of the run that wrote it (a `resume=` reloads that run's config)."
        )
    check_finite(ckpt_path, {k: weights[k] for k, _ in model.named_parameters() if k in weights})
    progress = {k: checkpoint.get(k) for k in ("epoch", "global_step")}
    return {**progress, "logger_step": logger_step(checkpoint)}


def compiled_names_differ(ours: set[str], theirs: set[str]) -> bool:
    """Whether two sets of weight names differ, and only by torch.compile's ``_orig_mod``."""

    def plain(names: set[str]) -> set[str]:
        return {re.sub(r"(^|\.)_orig_mod(?=\.|$)", "", name) for name in names}

    return ours != theirs and plain(ours) == plain(theirs)


def logger_step(checkpoint: dict[str, Any]) -> int:
    """The step at which a run resumed from ``checkpoint`` logs its first row: the loggers'
    count of batches (not ``global_step``: a GAN's counts two a batch), plus the batch a save at
    a batch's end holds before it (Lightning adds it when it resumes)."""
    loops = checkpoint.get("loops", {}).get("fit_loop", {})
    count = loops.get("epoch_loop.state_dict", {}).get("_batches_that_stepped")
    if count is None:
        return int(checkpoint.get("global_step") or 0)
    total = loops.get("epoch_loop.batch_progress", {}).get("total", {})
    at_batch_end = total.get("completed", 0) == total.get("processed", 0) - 1
    return int(count) + (1 if at_batch_end else 0)
