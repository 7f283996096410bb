"""Multiruns: an Optuna search (`hparams_search=mlp`) and a plain `-m` sweep, one run dir per job."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from .helpers import clean_env, read_metrics, run_entry
from .wandb_run import offline_runs, read_wandb_run


def job_dirs(sweep_dir: Path) -> list[Path]:
    """The numbered job folders Hydra made under the sweep folder (`hydra.sweep.subdir`)."""
    return sorted((p for p in sweep_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


@pytest.mark.slow
def test_optuna_sweep_runs_two_trials_and_reports_the_best(tmp_path: Path) -> None:
    result = run_entry(
        "train",
        "hparams_search=mlp",
        "hydra.sweeper.n_trials=2",
        "trainer.max_epochs=2",
        "logger=csv",
        f"hydra.sweep.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = job_dirs(tmp_path)
    assert [job.name for job in jobs] == ["0", "1"]

    trials = []
    for job in jobs:
        cfg = OmegaConf.load(job / "config.yaml")
        # The sampled width reached the network; the sampled values lie in the search space.
        assert cfg.model.net.hidden == [cfg.width, cfg.width]
        assert cfg.width in (32, 64, 128, 256) and cfg.data.batch_size in (32, 64, 128)
        assert 0.0003 <= cfg.model.lr <= 0.03
        assert (job / "checkpoints" / "last.ckpt").is_file()
        params = {"model.lr": cfg.model.lr, "data.batch_size": cfg.data.batch_size}
        trials.append((read_metrics(job)["val/acc_best"], {**params, "width": cfg.width}))
    assert trials[0][1] != trials[1][1], "both trials ran the same parameters"

    results = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    best_value, best_params = max(trials, key=lambda trial: trial[0])
    assert results["best_value"] == pytest.approx(best_value)
    assert results["best_params"] == pytest.approx(best_params)


@pytest.mark.slow
def test_multirun_gives_each_job_its_own_run_directory_and_wandb_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    sweep = tmp_path / "sweep"
    result = run_entry(
        "train",
        "-m",
        "model.lr=0.001,0.01",
        "trainer.max_epochs=1",
        "logger=wandb",
        f"hydra.sweep.dir={sweep}",
        env=clean_env(HOME=str(home)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = job_dirs(sweep)
    assert [job.name for job in jobs] == ["0", "1"]
    assert [OmegaConf.load(job / "config.yaml").model.lr for job in jobs] == [0.001, 0.01]
    runs = []
    for job in jobs:
        assert 0.0 < read_metrics(job)["test/acc"] <= 1.0
        assert len(offline_runs(job)) == 1, f"{job} should hold exactly one wandb run"
        runs.append(read_wandb_run(offline_runs(job)[0]))
    # Two runs (the second job did not reuse the first one's), grouped by the sweep.
    assert runs[0].run_id != runs[1].run_id
    assert runs[0].group == runs[1].group == f"multirun-{sweep.name}"
    assert [run.config["model"]["lr"] for run in runs] == [0.001, 0.01]
    assert all(run.exit_code == 0 for run in runs)
