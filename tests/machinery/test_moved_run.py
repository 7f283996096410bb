"""A run directory moved or copied (rsync from a cluster, a restored backup) and resumed there
continues as it would have in place: the same best checkpoint, the same test metrics; where its
checkpoints did not move with it, the resume is refused before anything runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from .helpers import DOCS_STYLE, one_paragraph_error, read_metrics, run_main_in_process

# The lowest validation accuracy is the best: an early epoch, which a resume that forgot the
# best score would replace by the first epoch it trains.
RUN = [*DOCS_STYLE, "trainer.max_epochs=2", "logger=csv", "trainer.deterministic=true"]
RUN += ["seed=7", "monitor_mode=min", "test=false"]
MORE = ["trainer.max_epochs=3", "test=true"]


def best_state(run_dir: Path) -> dict:
    """The monitored checkpoint callback's state in the run's last.ckpt."""
    saved = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    (state,) = [s for key, s in saved["callbacks"].items() if "'monitor': 'val_acc'" in key]
    return state


def checkpoint_names(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / "checkpoints").iterdir())


def files(run_dir: Path) -> tuple[set[Path], dict[Path, int]]:
    """The run directory's files, and its checkpoints' times (its train.log records a refusal)."""
    saved = {p: p.stat().st_mtime_ns for p in (run_dir / "checkpoints").iterdir()}
    return set(run_dir.rglob("*")), saved


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 2 epochs (resumed in place by the last test of the module only)."""
    logs = tmp_path_factory.mktemp("trained")
    with pytest.MonkeyPatch.context() as monkeypatch:
        args = [*RUN, f"hydra.run.dir={logs / 'run'}"]
        code, err = run_main_in_process("train", args, logs, monkeypatch)
    assert code == 0, err[-3000:]
    return logs / "run"


def test_our_checkpoint_callback_reads_the_state_lightnings_saved() -> None:
    """Runs saved before with Lightning's own ``ModelCheckpoint`` resume into ours."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    from my_project.machinery.callbacks.last_checkpoint import LastCheckpoint
    from my_project.machinery.callbacks.movable_checkpoint import MovableCheckpoint

    kwargs = {"monitor": "val_acc", "mode": "min", "every_n_epochs": 1}
    assert MovableCheckpoint(**kwargs).state_key == ModelCheckpoint(**kwargs).state_key
    assert LastCheckpoint().state_key.startswith("LastCheckpoint{")


def test_a_moved_run_whose_best_checkpoint_stayed_behind_is_refused(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its best checkpoint missing, or its callback Lightning's own (which forgets the best
    score in another directory): refused in one paragraph, nothing written."""
    moved = tmp_path / "run"
    shutil.copytree(trained, moved)
    best = Path(best_state(trained)["best_model_path"]).name
    (moved / "checkpoints" / best).unlink()
    before = files(moved)
    code, err = run_main_in_process("train", [f"resume={moved}", *MORE], tmp_path, monkeypatch)
    message = one_paragraph_error(code, err)
    old, new = (trained / "checkpoints").resolve(), (moved / "checkpoints").resolve()
    assert message.startswith(
        f"Error: {moved}/checkpoints/last.ckpt was saved with its checkpoints in {old}; this run "
        f"keeps them in {new}, which lacks {new / best}, so the run would forget its best "
        "checkpoint and save a worse one as the best. Move or copy the run directory with all"
    ), message
    assert files(moved) == before
    shutil.copy2(trained / "checkpoints" / best, moved / "checkpoints" / best)
    before = files(moved)
    lightnings = "callbacks.model_checkpoint._target_=lightning.pytorch.callbacks.ModelCheckpoint"
    args = [f"resume={moved}", *MORE, lightnings]
    message = one_paragraph_error(*run_main_in_process("train", args, tmp_path, monkeypatch))
    assert f"keeps them in {new}, and Lightning's ModelCheckpoint reloads its best" in message
    assert "Make the callback's `_target_` " in message, message
    assert files(moved) == before


def test_a_moved_run_directory_resumes_exactly_as_in_place(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recwarn: pytest.WarningsRecorder
) -> None:
    """Copied elsewhere and resumed for one more epoch: the same checkpoints, the same best one
    and score, the same test metrics as the run resumed where it was trained; no checkpoint of
    the old directory touched; without Lightning's warning that the state is not reloaded."""
    moved = tmp_path / "elsewhere" / "run"
    shutil.copytree(trained, moved)
    before = files(trained)
    code, err = run_main_in_process("train", [f"resume={moved}", *MORE], tmp_path, monkeypatch)
    assert code == 0, err[-3000:]
    assert not [w for w in recwarn if "dirpath has changed" in str(w.message)]
    # the old directory is left as it was (no checkpoint of it deleted or rewritten)
    assert files(trained) == before
    code, err = run_main_in_process("train", [f"resume={trained}", *MORE], tmp_path, monkeypatch)
    assert code == 0, err[-3000:]
    in_place, elsewhere = best_state(trained), best_state(moved)
    assert Path(in_place["best_model_path"]).name != "epoch_002.ckpt"  # the test could fail
    assert checkpoint_names(moved) == checkpoint_names(trained)
    assert elsewhere["dirpath"] == str((moved / "checkpoints").resolve())
    assert elsewhere["best_model_path"] == str(
        (moved / "checkpoints" / Path(in_place["best_model_path"]).name).resolve()
    )
    assert torch.equal(elsewhere["best_model_score"], in_place["best_model_score"])
    assert read_metrics(moved) == read_metrics(trained)
    weights = [torch.load(d / "checkpoints" / "last.ckpt")["state_dict"] for d in (moved, trained)]
    assert all(torch.equal(weights[0][k], v) for k, v in weights[1].items())
    assert "test_acc" in read_metrics(moved)  # of the best checkpoint
