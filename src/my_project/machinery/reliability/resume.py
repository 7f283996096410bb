"""Continuing a run: `resume=<run dir>` and `ckpt_path=last`.

``python train.py resume=RUN_DIR [overrides]`` re-runs the run's newest command (the overrides
Hydra saved in ``.hydra/``) plus the new overrides, into RUN_DIR, from its newest checkpoint (or a
typed ``ckpt_path=``). Hydra's record of it goes to ``.hydra/resume_<time>/``.
"""

from __future__ import annotations

import csv
import re
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..distributed import is_rank_zero
from ..errors import UserError
from .requeue import checkpoint_to_continue
from .run_dir import held_by_another_process, in_use_message, note_new_folder
from .secrets import MASK

RESUME_KEY = "resume"
LAST = "last"


def override_key(override: str) -> str:
    """`+a.b=1` -> `a.b`, `model/net=cnn` -> `model/net`, `~x` -> `x`."""
    return override.split("=", 1)[0].lstrip("+~")


def expand_resume_argument(argv: Sequence[str]) -> list[str]:
    """Replace `resume=RUN_DIR` by the run's saved overrides + directory + checkpoint."""
    resume = [arg for arg in argv if override_key(arg) == RESUME_KEY and "=" in arg]
    if not resume:
        return list(argv)
    run_dir = Path(resume[-1].split("=", 1)[1]).expanduser()
    # The newest command of the run: its latest resume's (which may have asked for more
    # epochs: resuming again continues from there), else its start's.
    first = run_dir / ".hydra" / "overrides.yaml"
    saved_path = max(run_dir.glob(".hydra/resume_*/overrides.yaml"), default=first)
    # a run still going (it may have no checkpoint yet); the launcher's own processes (DDP's
    # other ranks, srun's other tasks) rerun this command while it holds the directory
    if is_rank_zero() and held_by_another_process(run_dir):
        raise UserError(f"resume={run_dir}: {in_use_message(run_dir)}")
    problem = (
        "no such run directory"
        if not run_dir.is_dir()
        else f"{saved_path} is missing, so the run's command cannot be rebuilt"
        if not saved_path.is_file()
        else "the run has no checkpoint to continue from"
        if newest_checkpoint(run_dir) is None
        else ""
    )
    if problem:
        raise UserError(
            f"resume={run_dir}: {problem}. Pass the directory of a run of train.py that saved a "
            "checkpoint (logs/train/runs/<run>), or start the run again."
        )
    saved = saved_overrides(saved_path, run_dir)
    new = [arg for arg in argv if override_key(arg) != RESUME_KEY]
    typed = {override_key(o) for o in new}  # a typed `ckpt_path=` continues from that file
    dropped = typed | {"ckpt_path", "hydra.run.dir", RESUME_KEY}
    kept = [o for o in saved if override_key(o) not in dropped and o != "~" + RESUME_KEY]
    if masked := [override_key(o) for o in kept if MASK in o]:  # it would pass the mask on
        raise UserError(
            f"resume={run_dir}: the original command set {', '.join(masked)} to a secret, which "
            f"was masked before saving. Pass it again, e.g. `{masked[0]}=...`, or better, read it "
            "from an environment variable in the config (`${oc.env:NAME}`)."
        )
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    note_new_folder(run_dir / ".hydra" / f"resume_{stamp}")
    return [
        *kept,
        *new,
        f"hydra.run.dir={run_dir}",
        f"hydra.output_subdir=.hydra/resume_{stamp}",
        *([] if "ckpt_path" in typed else [f"ckpt_path={LAST}"]),
        f"{RESUME_KEY}={run_dir}",
    ]


def saved_overrides(saved_path: Path, run_dir: Path) -> list[str]:
    """The overrides the run was started with, and its ``hydra.searchpath`` (in `hydra.yaml`)."""
    path = saved_path
    try:
        saved = OmegaConf.to_container(OmegaConf.load(path))
        assert isinstance(saved, list) and all(isinstance(o, str) for o in saved)
        path = saved_path.parent / "hydra.yaml"
        found = (
            OmegaConf.select(OmegaConf.load(path), "hydra.overrides.hydra")
            if path.is_file()
            else []
        )
    except Exception as error:  # yaml's errors, a file that is not text, not a list
        raise UserError(
            f"resume={run_dir}: {path} cannot be read ({type(error).__name__}), so the run's "
            "command cannot be rebuilt. Restore the file, or start again with the original "
            f"overrides and `ckpt_path={run_dir}/checkpoints/last.ckpt`."
        ) from error
    return saved + [str(o) for o in found or [] if override_key(str(o)) == "hydra.searchpath"]


def newest(paths: list[Path]) -> Path | None:
    return max(paths, key=lambda p: p.stat().st_mtime) if paths else None


def newest_checkpoint(run_dir: Path) -> Path | None:
    """What a resume of ``run_dir`` continues from: its newest `last*.ckpt`, else its newest
    checkpoint (a run stopped before its first `last.ckpt` may have saved a best one)."""
    folder = Path(run_dir) / "checkpoints"
    return newest(list(folder.glob("last*.ckpt"))) or newest(list(folder.glob("*.ckpt")))


def trained_model(ckpt_path: Path) -> str | None:
    """The `model._target_` of the run that wrote ``ckpt_path`` (its `config.yaml` beside its
    checkpoints/), ``None`` where that does not say."""
    saved = ckpt_path.parent.parent / "config.yaml"
    try:
        config = OmegaConf.load(saved) if saved.is_file() else None
    except Exception:  # yaml's errors, a file that is not text: as if it were not there
        return None
    if not isinstance(config, DictConfig):
        return None
    target = OmegaConf.select(config, "model._target_", throw_on_resolution_failure=False)
    return target if isinstance(target, str) else None


def resolve_checkpoint_path(
    ckpt_path: str | None, output_dir: Path, model: str | None = None
) -> str | None:
    """`last`: :func:`newest_checkpoint` of this run, else the newest last.ckpt of the runs
    beside it that trained ``model`` (a `model._target_`; a run whose config does not say is
    taken at its word): the newest run may be of another model, whose weights would be refused
    only after its epochs were. A restarted job (`requeue.py`): the newest checkpoint of its
    run, whatever it asked."""
    if (continued := checkpoint_to_continue(output_dir)) is not None:
        return str(continued)
    if ckpt_path != LAST:
        return ckpt_path
    if (found := newest_checkpoint(output_dir)) is not None:
        return str(found)
    others = sorted(
        output_dir.parent.glob("*/checkpoints/last.ckpt"), key=lambda p: -p.stat().st_mtime
    )
    if not others:
        raise UserError(
            f"ckpt_path=last: there is no checkpoints/last.ckpt in {output_dir} nor in any other "
            f"run under {output_dir.parent}. Pass a checkpoint path, or `resume=<run dir>`."
        )
    trained = {path: trained_model(path) for path in others}
    same = [path for path in others if model is None or trained[path] in (model, None)]
    if not same:
        newest_one = others[0]
        raise UserError(
            f"ckpt_path=last: no run under {output_dir.parent} trained this run's model "
            f"(model._target_={model}); the newest last.ckpt there, {newest_one}, is of "
            f"{trained[newest_one]}. Pass a checkpoint of this model "
            "(`ckpt_path=logs/train/runs/<run>/checkpoints/last.ckpt`), or `resume=<run dir>` "
            "to continue another run with its own config."
        )
    skipped = others.index(same[0])
    print(
        f"ckpt_path=last: continuing from {same[0]}, the newest last.ckpt of the runs there"
        + (
            f" that trained {model}, passing over {skipped} newer of other models."
            if skipped
            else "."
        )
    )
    return str(same[0])


def keep_csv_history(loggers: list[Any], resumed_step: int) -> None:
    """Keep the rows before ``resumed_step`` (`preflight.checkpoint.logger_step`) that an earlier
    part of this run wrote to `metrics.csv`, which Lightning's CSV logger deletes when it starts
    (the resumed run logs the later ones again); without its warning that "previous log files"
    will be deleted, false here."""
    from lightning.pytorch.loggers import CSVLogger

    if not is_rank_zero():
        return
    for logger in loggers:
        path = Path(logger.log_dir) / "metrics.csv" if isinstance(logger, CSVLogger) else None
        if path is None:
            continue
        header, rows = [], []
        if path.is_file():
            with open(path, newline="") as handle:
                reader = csv.DictReader(handle)
                header = list(reader.fieldnames or [])
                rows = [r for r in reader if r.get("step") and int(r["step"]) < resumed_step]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", _CSV_LOG_DELETED, UserWarning)
            writer = logger.experiment  # deletes the old file
        writer.metrics_keys = sorted(set(writer.metrics_keys) | set(header))
        writer.metrics = [{k: v for k, v in r.items() if v != ""} for r in rows] + writer.metrics
        writer.save()


_CSV_LOG_DELETED = r"Experiment logs directory .* exists and is not empty\. Previous log files in"


def quiet_own_checkpoints_warning(output_dir: Path, callbacks: list[Any]) -> None:
    """A resumed run's checkpoint directory holds its own checkpoints: Lightning's warning that
    it "exists and is not empty" is false, quieted for this run's directories (by its text)."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    dirs = {str(cb.dirpath) for cb in callbacks if isinstance(cb, ModelCheckpoint) and cb.dirpath}
    for folder in (*sorted(dirs), f"{output_dir}/", f"{Path(output_dir).resolve()}/"):
        message = rf"Checkpoint directory {re.escape(folder)}.* exists and is not empty\.$"
        warnings.filterwarnings("ignore", message, UserWarning)
