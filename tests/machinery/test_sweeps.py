"""Multiruns: Optuna searches and a plain `-m` sweep, one run dir per job, on a team's own
module (docs_style.py) with its own search config (configs/hparams_search/docs_style.yaml here).

The searches run the project's own sweeper (src/hydra_plugins/my_project_optuna) for real,
as `python train.py -m ...` in a subprocess, with a few trials of two or three epochs.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml
from omegaconf import OmegaConf
from optuna.trial import TrialState

from . import processes
from .helpers import (
    DOCS_STYLE,
    LOG_DIR_VAR,
    MACHINERY_CONFIGS,
    ROOT,
    clean_env,
    pinned,
    read_metrics,
    run_entry,
)
from .wandb_run import offline_runs, read_wandb_run

COMPLETE, PRUNED, FAIL = TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL


def job_dirs(sweep_dir: Path) -> list[Path]:
    """The numbered job folders Hydra made under the sweep folder (`hydra.sweep.subdir`)."""
    return sorted((p for p in sweep_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def load_study(sweep_dir: Path, name: str = "docs_style") -> optuna.Study:
    """The study the search kept in its sweep directory (the default storage)."""
    return optuna.load_study(study_name=name, storage=f"sqlite:///{sweep_dir / 'optuna.db'}")


def epochs_trained(run_dir: Path) -> int:
    """Epochs with a validation row in the run's CSV log."""
    rows = (run_dir / "csv" / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    val = header.index("val_acc")
    return sum(1 for row in rows[1:] if row.split(",")[val])


@pytest.mark.slow
def test_search_keeps_its_study_in_sqlite_prunes_a_hopeless_trial_and_leaves_results(
    tmp_path: Path,
) -> None:
    # Two good learning rates first, then a hopeless one: at its first epoch it is far behind
    # the median of the two finished trials, so the (default) median pruner stops it.
    result = run_entry(
        "train",
        *DOCS_STYLE,
        "hparams_search=docs_style",
        "hydra.sweeper.n_trials=4",
        "trainer.max_epochs=3",
        "logger=csv",
        "model.lr=tag(log, interval(1e-6, 0.05))",
        "hydra.sweeper.enqueue=[{model.lr:0.01},{model.lr:0.02},{model.lr:1e-6}]",
        "hydra.sweeper.pruner.n_startup_trials=2",
        "hydra.sweeper.pruner.n_warmup_steps=0",
        f"hydra.sweep.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]

    study = load_study(tmp_path)
    trials = study.trials
    assert [t.number for t in trials] == [0, 1, 2, 3]
    assert [t.params["model.lr"] for t in trials[:3]] == [0.01, 0.02, 1e-6]
    assert [t.state for t in trials[:3]] == [COMPLETE, COMPLETE, PRUNED]
    assert trials[3].state in (COMPLETE, PRUNED)
    # Reported every epoch; the pruned trial stopped after its first.
    assert [len(t.intermediate_values) for t in trials[:3]] == [3, 3, 1]

    assert [job.name for job in job_dirs(tmp_path)] == ["0", "1", "2", "3"]
    for trial, job in zip(trials, job_dirs(tmp_path), strict=True):
        cfg = OmegaConf.load(job / "config.yaml")
        # The sampled values reached the run: lr, batch size, and the hidden width.
        assert cfg.model.lr == pytest.approx(trial.params["model.lr"])
        assert cfg.data.batch_size == trial.params["data.batch_size"]
        assert cfg.model.hidden == trial.params["model.hidden"]
        assert (job / "checkpoints" / "last.ckpt").is_file()
        # The run's own record agrees with the study.
        assert read_metrics(job)["val_acc"] == pytest.approx(trial.value)
    pruned = tmp_path / "2"
    assert epochs_trained(pruned) == 1 and (pruned / "metrics.json").is_file()

    best = max((t for t in trials if t.state == COMPLETE), key=lambda t: t.value)
    results = yaml.safe_load((tmp_path / "best_params.yaml").read_text())
    assert results["best_trial"] == best.number
    assert results["best_value"] == pytest.approx(best.value)
    assert results["best_params"] == pytest.approx(best.params)
    assert results["run_dir"] == str(tmp_path / str(best.number))
    assert "Trial 2 pruned: " in result.stdout
    summary = result.stdout[result.stdout.index("The best trial (") :]
    assert f"run_dir: {tmp_path / str(best.number)}" in summary
    # Optuna's plots, to look at: each a real picture
    plots = ("optimization_history.png", "param_importances.png", "intermediate_values.png")
    assert f"Optuna's plots in {tmp_path}: {', '.join(plots)}" in result.stdout
    for name in plots:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert (tmp_path / name).stat().st_size > 10_000, name


def test_the_plots_not_drawn_are_named_with_the_reason(tmp_path: Path) -> None:
    from hydra_plugins.my_project_optuna.plots import PLOTS, save_plots

    study = optuna.create_study()
    assert save_plots(study, tmp_path, "val_acc") == dict.fromkeys(
        PLOTS, "not drawn (no trial completed)"
    )
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
    problems = save_plots(study, tmp_path, "val_acc")
    assert list(problems) == ["intermediate_values.png"] and "no pruning" in problems[PLOTS[2]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(PLOTS[:2])


@pytest.mark.slow
def test_search_killed_mid_trial_continues_its_study_to_the_requested_trials(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "sweep"
    args = [
        *DOCS_STYLE,
        "hparams_search=docs_style",
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.pruner=null",
        "hydra.sweeper.plots=false",  # drawn in the test above
        "trainer.max_epochs=1",
        "logger=csv",
        f"hydra.sweep.dir={sweep}",
    ]
    first = processes.start(
        [sys.executable, str(ROOT / "train.py"), *pinned(args)], cwd=ROOT, env=clean_env()
    )
    deadline = time.monotonic() + 300
    while not (sweep / "1" / "config.yaml").exists():  # trial 1 has started training
        assert first.poll() is None, first.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "trial 1 never started"
        time.sleep(0.05)
    first.kill()  # SIGKILL: no handler runs, the study stays as it was
    first.wait()
    before = load_study(sweep).trials
    assert [t.state for t in before] == [COMPLETE, TrialState.RUNNING]

    result = run_entry("train", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Trial 1 was interrupted" in result.stdout

    trials = load_study(sweep).trials
    # The finished trial is kept as it was, the interrupted one failed; 3 finished in all.
    assert [t.state for t in trials] == [COMPLETE, FAIL, COMPLETE, COMPLETE]
    assert trials[0].value == before[0].value and trials[0].params == before[0].params
    # The resumed search drew new parameters, not the first run's draws again.
    assert trials[2].params["model.lr"] not in {t.params["model.lr"] for t in before}
    assert [job.name for job in job_dirs(sweep)] == ["0", "1", "2", "3"]
    assert not (sweep / "1" / "metrics.json").exists()  # the interrupted run, left as it was
    assert all((sweep / n / "metrics.json").is_file() for n in ("0", "2", "3"))
    assert yaml.safe_load((sweep / "best_params.yaml").read_text())["best_trial"] in (0, 2, 3)


@pytest.mark.exhaustive  # a search's wandb group: the multirun test below; its study: the tests above
def test_a_copy_of_the_search_config_minimises_a_loss_with_one_wandb_group(
    tmp_path: Path,
) -> None:
    """A search for another experiment is a copy with another metric, direction and params."""
    text = (MACHINERY_CONFIGS / "hparams_search" / "docs_style.yaml").read_text()
    for old, new in (
        ("optimized_metric: val_acc", "optimized_metric: val_loss"),
        ("direction: maximize", "direction: minimize"),
        ("model.lr: tag(log, interval(0.001, 0.1))", "model.lr: tag(log, interval(0.003, 0.3))"),
    ):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    configs = tmp_path / "configs" / "hparams_search"
    configs.mkdir(parents=True)
    (configs / "docs_loss.yaml").write_text(text)
    home = tmp_path / "home"
    home.mkdir()
    sweep = tmp_path / "sweep"

    result = run_entry(
        "train",
        f"hydra.searchpath=[file://{tmp_path / 'configs'},file://{MACHINERY_CONFIGS}]",
        "experiment=docs_style",
        "hparams_search=docs_loss",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.plots=false",
        "trainer.max_epochs=2",
        "logger=wandb",
        f"hydra.sweep.dir={sweep}",
        env=clean_env(HOME=str(home)),
    )
    assert result.returncode == 0, result.stderr[-3000:]

    study = load_study(sweep, name="docs_loss")  # named after the search config
    assert study.direction == optuna.study.StudyDirection.MINIMIZE
    losses = {job.name: read_metrics(job)["val_loss"] for job in job_dirs(sweep)}
    assert [t.value for t in study.trials] == pytest.approx([losses["0"], losses["1"]])
    assert all(0.003 <= t.params["model.lr"] <= 0.3 for t in study.trials)
    results = yaml.safe_load((sweep / "best_params.yaml").read_text())
    assert results["direction"] == "minimize" and results["metric"] == "val_loss"
    assert results["best_value"] == pytest.approx(min(losses.values()))

    # Each trial is its own wandb run, all in the group of the sweep folder.
    runs = [read_wandb_run(offline_runs(job)[0]) for job in job_dirs(sweep)]
    assert all(len(offline_runs(job)) == 1 for job in job_dirs(sweep))
    assert runs[0].run_id != runs[1].run_id
    assert runs[0].group == runs[1].group == f"multirun-{sweep.name}"


@pytest.mark.slow
def test_search_with_ddp_trials_runs_each_trial_once_and_prunes_on_every_rank(
    tmp_path: Path,
) -> None:
    """`trainer=ddp_cpu` trials: each trial's second process runs its one job (never a search
    of its own, though the search config sets `hydra.mode: MULTIRUN`), writes nothing outside
    the sweep directory, and stops with rank 0 when the trial is pruned (a rank going on alone
    would hang in the next collective; a search of its own would wait 300 s per trial). The
    search config is lightning-hydra-template's way, `storage: null` (the study in memory),
    which makes Hydra resolve the sweep folder again as it composes: one folder all the same."""
    text = (MACHINERY_CONFIGS / "hparams_search" / "docs_style.yaml").read_text()
    assert text.count("  sweeper:\n") == 1
    configs = tmp_path / "configs" / "hparams_search"
    configs.mkdir(parents=True)
    (configs / "in_memory.yaml").write_text(
        text.replace("  sweeper:\n", "  sweeper:\n    storage: null\n")
    )
    logs = tmp_path / "logs"
    started = time.monotonic()
    result = run_entry(
        "train",
        f"hydra.searchpath=[file://{tmp_path / 'configs'},file://{MACHINERY_CONFIGS}]",
        "experiment=docs_style",
        "hparams_search=in_memory",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.plots=false",
        "trainer=ddp_cpu",
        "trainer.max_epochs=2",
        "logger=csv",
        "hydra.sweeper.enqueue=[{model.lr:0.01},{model.lr:1e-6}]",
        "model.lr=tag(log, interval(1e-6, 0.05))",
        "hydra.sweeper.pruner.n_startup_trials=1",
        "hydra.sweeper.pruner.n_warmup_steps=0",
        env=clean_env(**{LOG_DIR_VAR: str(logs)}),
        timeout=290,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert (result.stdout + result.stderr).count("Starting with 2 processes") == 2
    assert elapsed < 240, f"2 small DDP trials took {elapsed:.0f} s"
    assert [p.name for p in logs.iterdir()] == ["train"]
    assert [p.name for p in (logs / "train").iterdir()] == ["multiruns"]
    sweeps = list((logs / "train" / "multiruns").iterdir())
    assert len(sweeps) == 1, sorted(str(p) for p in sweeps)  # no empty folder beside it
    sweep = sweeps[0]

    assert "Trial 0 complete: " in result.stdout and "Trial 1 pruned: " in result.stdout
    assert [job.name for job in job_dirs(sweep)] == ["0", "1"]
    for job in job_dirs(sweep):
        assert [p.name for p in job.rglob("metrics.json")] == ["metrics.json"]
        assert not list(job.glob("[0-9]*")), f"{job} holds a sweep of its own"
    assert epochs_trained(sweep / "1") == 1


@pytest.mark.slow
def test_multirun_gives_each_job_its_own_run_directory_and_wandb_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    sweep = tmp_path / "sweep"
    result = run_entry(
        "train",
        "-m",
        *DOCS_STYLE,
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
        assert 0.0 < read_metrics(job)["test_acc"] <= 1.0
        assert len(offline_runs(job)) == 1, f"{job} should hold exactly one wandb run"
        runs.append(read_wandb_run(offline_runs(job)[0]))
    # Two runs (the second job did not reuse the first one's), grouped by the sweep.
    assert runs[0].run_id != runs[1].run_id
    assert runs[0].group == runs[1].group == f"multirun-{sweep.name}"
    assert [run.config["model"]["lr"] for run in runs] == [0.001, 0.01]
    assert all(run.exit_code == 0 for run in runs)
    # it ends with a table of its runs: what differs, the optimized metric, where each is
    table = result.stdout[result.stdout.index("2 runs of this multirun:") :].splitlines()
    assert table[1].split() == ["job", "model.lr", "val_acc", "run", "dir"]
    for row, job in zip(table[2:4], jobs, strict=True):
        name, lr, value, where = row.split()
        assert (name, float(lr), where) == (
            job.name,
            OmegaConf.load(job / "config.yaml").model.lr,
            str(job),
        )
        assert float(value) == pytest.approx(read_metrics(job)["val_acc"], abs=1e-4)


# lightning-hydra-template's configs/hparams_search/mnist_optuna.yaml as LHT writes it (its
# comments left out), for hydra-optuna-sweeper.
LHT_SEARCH = """\
# @package _global_
defaults:
  - override /hydra/sweeper: optuna

optimized_metric: "val/acc_best"

hydra:
  mode: "MULTIRUN"
  sweeper:
    _target_: hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper
    storage: null
    study_name: null
    n_jobs: 1
    direction: maximize
    n_trials: 20
    sampler:
      _target_: optuna.samplers.TPESampler
      seed: 1234
      n_startup_trials: 10
    params:
      model.optimizer.lr: interval(0.0001, 0.1)
      data.batch_size: choice(32, 64, 128, 256)
      model.net.lin1_size: choice(64, 128, 256)
      model.net.lin2_size: choice(64, 128, 256)
      model.net.lin3_size: choice(32, 64, 128, 256)
"""


@pytest.mark.slow
def test_lhts_search_config_names_what_to_change_and_then_searches_past_refused_trials(
    tmp_path: Path,
) -> None:
    """LHT's search config, copied in, names hydra-optuna-sweeper's class: one paragraph says
    to delete that line, and nothing is written. With it deleted, its keys (`n_jobs: 1`,
    `storage: null`, `study_name: null`) are this sweeper's; a trial whose batch size (128 or
    256 of LHT's choices) is more than the 64 training digits is refused, marked failed, and the
    search goes on to its trials and its summary. A value every trial shares that is refused
    stops the search after three refused trials, in one paragraph."""
    configs = tmp_path / "configs" / "hparams_search"
    configs.mkdir(parents=True)
    search = configs / "lht_optuna.yaml"
    search.write_text(LHT_SEARCH)
    paths = f"hydra.searchpath=['file://{tmp_path / 'configs'}','file://{MACHINERY_CONFIGS}']"
    common = [paths, "hparams_search=lht_optuna", "experiment=zoo_lht", "trainer.max_epochs=1"]
    common += ["logger=csv", "hydra.sweeper.plots=false"]
    sweep_dir = tmp_path / "sweep"

    refused = run_entry("train", *common, f"hydra.sweep.dir={sweep_dir}")
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "configs/hparams_search/lht_optuna.yaml sets `hydra.sweeper._target_`" in refused.stderr
    assert "delete the `_target_:` line under `hydra.sweeper:`" in refused.stderr
    assert "Traceback" not in refused.stderr and not sweep_dir.exists()

    search.write_text(
        LHT_SEARCH.replace(
            "    _target_: hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper\n", ""
        )
    )
    searched = run_entry(
        "train", *common, "hydra.sweeper.n_trials=1", f"hydra.sweep.dir={sweep_dir}"
    )
    out = searched.stdout + searched.stderr
    assert searched.returncode == 0, out[-3000:]
    assert "A new study created in memory with name: lht_optuna" in out  # storage: null
    failed = re.findall(
        r"Trial (\d+) failed: its values were refused .*data\.batch_size=(\d+)", out
    )
    assert failed and all(int(size) > 64 for _, size in failed), out[-3000:]
    (complete,) = re.findall(r"Trial (\d+) complete: val/acc_best=", out)
    assert int(complete) == len(failed)  # the refused trials came first, then the search went on
    for number, size in failed:
        assert f"data.batch_size={size} is larger than the training split" in out
        assert not (sweep_dir / number).exists()  # a refused run leaves nothing
    best = yaml.safe_load((sweep_dir / "best_params.yaml").read_text())
    assert best["best_trial"] == int(complete) and best["best_params"]["data.batch_size"] <= 64

    stopped = run_entry(
        "train", *common, "data.batch_size=512", f"hydra.sweep.dir={tmp_path / 'stopped'}"
    )
    assert stopped.returncode == 2, stopped.stderr[-3000:]
    assert stopped.stdout.count(" failed: its values were refused") == 3
    assert "The search stopped: trials 0, 1, 2 in a row were refused" in stopped.stderr
    assert "Traceback" not in stopped.stderr


def test_trials_in_parallel_are_refused_in_one_paragraph(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """hydra-optuna-sweeper's `n_jobs` (LHT's searches): 1 is this sweeper's way; more asks
    for trials in parallel, which it does not run."""
    from hydra_plugins.my_project_optuna.sweeper import OptunaSweeper

    with pytest.raises(SystemExit) as stop:
        OptunaSweeper(n_jobs=4).sweep([])
    assert stop.value.code == 2
    assert "hydra.sweeper.n_jobs=4 asks for trials in parallel" in capsys.readouterr().err


def test_the_runs_table_says_when_optimized_metric_was_not_logged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A multirun whose `optimized_metric` none of its runs logged: the table says `not logged`
    (not None), and a note names the metrics they did log and what to set."""
    from my_project.machinery.run.runs_table import RunsTable

    for job, lr in (("0", "0.1"), ("1", "0.2"), ("2", "0.3")):
        (tmp_path / job / ".hydra").mkdir(parents=True)
        (tmp_path / job / ".hydra" / "overrides.yaml").write_text(f"- model.lr={lr}\n")
        if job != "2":  # the last one failed
            (tmp_path / job / "metrics.json").write_text('{"val/acc": 0.5, "test/acc": 0.4}\n')
    config = OmegaConf.create(
        {
            "optimized_metric": "val/acc_best",
            "hydra": {"sweeper": {"_target_": "BasicSweeper"}, "sweep": {"dir": str(tmp_path)}},
        }
    )
    RunsTable().on_multirun_end(config)
    out = capsys.readouterr().out
    table = out[out.index("3 runs of this multirun:") :].splitlines()
    assert [row.split()[2] for row in table[2:5]] == ["not", "not", "failed"], out
    assert "None" not in out
    assert table[5] == (
        "Note: `optimized_metric=val/acc_best` was not logged by any of the runs; their "
        "metrics.json holds test/acc, val/acc. Set `optimized_metric` to the metric to compare the "
        "runs by (e.g. `optimized_metric=test/acc`), in the experiment's config or on the command "
        "line."
    ), out
