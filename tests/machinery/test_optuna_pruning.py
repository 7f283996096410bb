"""A search job from the inside: the pruning callback with a real Trainer, and the command
that re-runs a search job in a DDP child.

`train()` runs in this process inside Hydra's state for job 0 of `train.py -m
hparams_search=docs_style` (a team's module and search config), with a real Optuna trial
handed over as the sweeper does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict

from my_project.machinery.callbacks.optuna_pruning import TRIALS
from my_project.machinery.errors import report_user_errors
from my_project.machinery.run.train import train
from my_project.machinery.strategies.ddp import hydra_job_command

from .helpers import CONFIG_DIR, DOCS_STYLE, FAST, pinned
from .test_sweeps import epochs_trained

SEARCH = [*DOCS_STYLE, "hparams_search=docs_style", *FAST]


def search_job(overrides: list[str], job_dir: Path) -> DictConfig:
    """Enter Hydra's state for job 0 of a search; return the job's config (no `hydra` node)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("train", overrides=pinned(overrides), return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(job_dir)
        cfg.hydra.runtime.cwd = str(job_dir.parent)
        cfg.hydra.job.num = 0
    HydraConfig.instance().set_config(cfg)
    job_cfg = cfg.copy()
    with open_dict(job_cfg):
        del job_cfg["hydra"]  # as Hydra hands a job its config
    return job_cfg


@pytest.fixture
def hydra_state() -> Iterator[None]:
    yield
    HydraConfig.instance().cfg = None


@pytest.mark.slow
@pytest.mark.parametrize(
    ("lower", "pruned_at", "epochs"),
    [(0.99, 0, 1), (0.0, None, 3)],
    ids=["rejected-after-epoch-0", "kept-to-the-end"],
)
def test_each_epoch_is_reported_and_a_rejected_trial_stops_with_its_run_complete(
    tmp_path: Path, hydra_state: None, lower: float, pruned_at: int | None, epochs: int
) -> None:
    cfg = search_job([*SEARCH, "trainer.max_epochs=3"], tmp_path)
    # ThresholdPruner: prunes as soon as a reported value is below `lower`.
    study = optuna.create_study(
        direction="maximize", pruner=optuna.pruners.ThresholdPruner(lower=lower)
    )
    TRIALS[0] = trial = study.ask()
    try:
        metrics = train(cfg)
    finally:
        TRIALS.pop(0)

    assert trial.user_attrs.get("pruned_at_epoch") == pruned_at
    reported = study.trials[0].intermediate_values
    assert sorted(reported) == list(range(epochs))
    assert reported[epochs - 1] == pytest.approx(metrics["val_acc"])
    assert epochs_trained(tmp_path) == epochs
    assert (tmp_path / "metrics.json").is_file() and "test_acc" in metrics


@pytest.mark.slow
def test_a_search_metric_the_model_does_not_log_is_one_clear_error(
    tmp_path: Path, hydra_state: None, capsys
) -> None:
    cfg = search_job([*SEARCH, "trainer.max_epochs=1", "optimized_metric=val/nope"], tmp_path)
    with pytest.raises(SystemExit) as info:
        report_user_errors(train)(cfg)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "optimized_metric=val/nope is not among the metrics logged at validation" in err
    assert "val_acc" in err and "Traceback" not in err


def test_ddp_child_of_a_search_job_runs_that_one_job_though_the_config_asks_for_multirun(
    tmp_path: Path, hydra_state: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hparams_search sets `hydra.mode: MULTIRUN` in its config, not with `-m`: the child's
    command must still make a single run, or it starts a search of its own."""
    job_dir = tmp_path / "sweep" / "0"
    monkeypatch.setattr(sys, "argv", ["train.py", "hparams_search=docs_style", "trainer.devices=2"])
    search_job(
        [*DOCS_STYLE, "hparams_search=docs_style", "trainer.devices=2", "model.lr=0.01"], job_dir
    )
    assert HydraConfig.get().mode == RunMode.MULTIRUN

    command, _ = hydra_job_command()
    overrides = [arg for arg in command if "=" in arg and not arg.startswith("-")]
    HydraConfig.instance().cfg = None
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        child = compose("train", overrides=overrides, return_hydra_config=True)
    assert child.hydra.mode == RunMode.RUN
    assert child.hydra.run.dir == str(job_dir) and child.model.lr == 0.01
