"""Lightning's ``ModelCheckpoint``, whose state follows its run directory when the directory was
moved or copied (rsync from a cluster, a restored backup) and the run is resumed there.

Lightning reloads a checkpoint callback's state only where its ``dirpath`` is the saved one;
anywhere else it forgets the best score and the best files, so the resumed run saves its next
epoch as the best, however bad, and tests it. Here the saved paths under the old ``dirpath`` are
mapped to the new one when every file they name is there (the checkpoints moved with it); a
resume of the same run where they are not is refused before it starts (:func:`check_moved_run`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import ModelCheckpoint

from ..errors import UserError, more

PATH_KEYS = ("best_model_path", "kth_best_model_path", "last_model_path")


class MovableCheckpoint(ModelCheckpoint):
    @property
    def state_key(self) -> str:
        """Lightning's own key (it starts with the class's name): checkpoints saved by a plain
        ``ModelCheckpoint`` resume into this one. A subclass keeps its own."""
        key, name = super().state_key, MovableCheckpoint.__qualname__
        if key.startswith(name + "{"):
            key = ModelCheckpoint.__qualname__ + key.removeprefix(name)
        return key

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = state_dict.get("dirpath")
        if saved and self.dirpath and saved != self.dirpath:
            moved = moved_state(state_dict, str(self.dirpath))
            if not missing_files(moved):
                state_dict = moved
        super().load_state_dict(state_dict)


def moved_state(state: dict[str, Any], dirpath: str) -> dict[str, Any]:
    """``state`` (a ``ModelCheckpoint``'s) with ``dirpath`` and the paths under its old one in
    ``dirpath``."""
    old = Path(state["dirpath"])

    def moved(path: str) -> str:
        inside = bool(path) and Path(path).is_relative_to(old)
        return str(Path(dirpath) / Path(path).relative_to(old)) if inside else path

    paths = {key: moved(state[key]) for key in PATH_KEYS if isinstance(state.get(key), str)}
    best = {moved(path): score for path, score in (state.get("best_k_models") or {}).items()}
    return {**state, **paths, "best_k_models": best, "dirpath": dirpath}


def missing_files(state: dict[str, Any]) -> list[str]:
    """The checkpoint files ``state`` names that do not exist."""
    named = [*(state.get("best_k_models") or {}), *(state.get(key) for key in PATH_KEYS)]
    return sorted({path for path in named if path and not Path(path).is_file()})


def check_moved_run(
    ckpt_path: str, checkpoint: dict[str, Any], output_dir: Path, callbacks: list[Any]
) -> None:
    """A resume of a run directory that was moved or copied (the checkpoint is in this run's
    directory, and its checkpoint callbacks' saved ``dirpath`` is another): a callback whose best
    files are not in its new ``dirpath``, or Lightning's own ``ModelCheckpoint`` (which reloads
    its state only in its old one), would forget the best score and save a worse epoch as the
    best. Refused before anything runs."""
    if not Path(ckpt_path).resolve().is_relative_to(Path(output_dir).resolve()):
        return  # another run's checkpoint, continued in a new run directory
    states = checkpoint.get("callbacks") or {}
    for callback in [c for c in callbacks if isinstance(c, ModelCheckpoint) and c.dirpath]:
        state = states.get(callback.state_key)
        if not isinstance(state, dict) or state.get("dirpath") in (None, callback.dirpath):
            continue
        saved = state["dirpath"]
        missing = missing_files(moved_state(state, str(callback.dirpath)))
        if isinstance(callback, MovableCheckpoint) and not missing:
            continue
        where = f"{ckpt_path} was saved with its checkpoints in {saved}; this run keeps them in"
        lost = "so the run would forget its best checkpoint and save a worse one as the best"
        if missing:
            raise UserError(
                f"{where} {callback.dirpath}, which lacks {', '.join(missing[:3])}"
                f"{more(missing, 3)}, {lost}. Move or copy the run directory "
                f"with all its checkpoints (or put them back in {saved}), then resume it again."
            )
        raise UserError(
            f"{where} {callback.dirpath}, and Lightning's {type(callback).__qualname__} reloads "
            f"its best score only where it was saved, {lost}. Make the callback's `_target_` "
            f"{MovableCheckpoint.__module__}.{MovableCheckpoint.__qualname__} (Lightning's "
            "ModelCheckpoint, whose state follows a moved run directory)."
        )
