"""The contract, as a team meets it: its own LightningModule and LightningDataModule, written
as the Lightning docs write them, in a folder of its own (nothing imported from this
project), configured by two yaml files found through `hydra.searchpath`, with no edit to the
template. They train in one process, with `trainer.devices=2` (DDP) and `trainer.strategy=dp`,
evaluate and predict, and the DDP test metrics equal a one-process evaluation exactly on a
test set of prime size."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .helpers import PACKAGE, clean_env, read_metrics, run_entry

HERE = Path(__file__).resolve().parent
ADOPTED = "Model and data: as the run that wrote the checkpoint trained them"
MODEL_YAML = """\
_target_: lit_mine.LitClassifier
num_features: ${data.num_features}
num_classes: ${data.num_classes}
lr: 0.01
"""
DATA_YAML = """\
_target_: lit_mine.LitDataModule
num_features: 16
num_classes: 4
test_size: 89
batch_size: 32
"""


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], dict[str, str]]:
    """The team's folder: its code and its two configs; the overrides and environment that
    point the template at them."""
    root = tmp_path_factory.mktemp("team")
    (root / "code").mkdir()
    source = (HERE / "docs_style.py").read_text()
    assert PACKAGE not in source  # it knows nothing of the template
    (root / "code" / "lit_mine.py").write_text(source)
    for group, text in (("model", MODEL_YAML), ("data", DATA_YAML)):
        (root / "configs" / group).mkdir(parents=True)
        (root / "configs" / group / "mine.yaml").write_text(text)
    overrides = [f"hydra.searchpath=['file://{root / 'configs'}']", "model=mine", "data=mine"]
    return root, overrides, clean_env(PYTHONPATH=str(root / "code"))


def train(team: tuple[Path, list[str], dict[str, str]], name: str, *extra: str) -> Path:
    root, overrides, env = team
    run_dir = root / "runs" / name
    result = run_entry(
        "train",
        *overrides,
        "monitor=val_acc",  # the metric its validation logs
        "trainer.max_epochs=2",
        "logger=csv",
        *extra,
        f"hydra.run.dir={run_dir}",
        env=env,
        timeout=420,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    # Then the next steps with its checkpoint (`record.next_steps`).
    assert f"Everything this run wrote is in {run_dir}" in result.stdout.splitlines()
    return run_dir


@pytest.fixture(scope="module")
def one_process(team: tuple[Path, list[str], dict[str, str]]) -> Path:
    return train(team, "one")


@pytest.fixture(scope="module")
def two_processes(team: tuple[Path, list[str], dict[str, str]]) -> Path:
    return train(team, "ddp", "trainer.devices=2", "trainer.strategy=ddp")


@pytest.mark.slow
def test_a_teams_module_trains_with_plots_and_run_records(one_process: Path) -> None:
    assert read_metrics(one_process)["test_acc"] > 0.5
    for name in ("learning_curves.png", "confusion_matrix.png", "run_info.json", "config.yaml"):
        assert (one_process / name).is_file(), name
    assert json.loads((one_process / "run_info.json").read_text())["world_size"] == 1


@pytest.mark.slow
def test_ddp_test_metrics_equal_a_one_process_evaluation_of_the_same_checkpoint(
    team: tuple[Path, list[str], dict[str, str]], two_processes: Path
) -> None:
    root, overrides, env = team
    ddp = read_metrics(two_processes)
    assert json.loads((two_processes / "run_info.json").read_text())["world_size"] == 2
    best = next((two_processes / "checkpoints").glob("epoch_*.ckpt"))
    out = root / "runs" / "eval"
    result = run_entry(
        "eval", *overrides, f"ckpt_path={best}", "logger=none", f"hydra.run.dir={out}", env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert ADOPTED not in result.stdout  # the command line named model and data
    single = read_metrics(out)
    assert single["test_acc"] == ddp["test_acc"]  # 89 samples, each counted once
    assert single["test_loss"] == pytest.approx(ddp["test_loss"], rel=1e-6)


@pytest.mark.slow
def test_dp_trains_a_teams_module_like_one_device(
    team: tuple[Path, list[str], dict[str, str]], one_process: Path
) -> None:
    dp = train(team, "dp", "trainer.strategy=dp", "trainer.devices=2")  # CPU: nothing split
    assert read_metrics(dp) == read_metrics(one_process)


@pytest.mark.slow
def test_predict_writes_the_modules_outputs_for_the_test_split(
    team: tuple[Path, list[str], dict[str, str]], one_process: Path
) -> None:
    root, overrides, env = team
    best = next((one_process / "checkpoints").glob("epoch_*.ckpt"))
    out = root / "runs" / "predict"
    result = run_entry("predict", *overrides, f"ckpt_path={best}", f"hydra.run.dir={out}", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    header, *rows = (out / "predictions.csv").read_text().splitlines()
    # a classifier without predict_step: its class and probabilities
    assert header == "index,target,prediction,prob_0,prob_1,prob_2,prob_3" and len(rows) == 89


@pytest.mark.slow
def test_eval_and_predict_given_only_a_checkpoint_use_the_model_and_data_of_its_run(
    team: tuple[Path, list[str], dict[str, str]], one_process: Path
) -> None:
    """`python eval.py ckpt_path=...` as the README writes it: no `model=mine data=mine`,
    no search path; the run's config.yaml beside its checkpoints says what it trained."""
    root, _, env = team
    best = next((one_process / "checkpoints").glob("epoch_*.ckpt"))
    out = root / "runs" / "eval-alone"
    result = run_entry("eval", f"ckpt_path={best}", "logger=none", f"hydra.run.dir={out}", env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert ADOPTED in result.stdout
    assert read_metrics(out)["test_acc"] == read_metrics(one_process)["test_acc"]

    out = root / "runs" / "predict-alone"
    result = run_entry("predict", f"ckpt_path={best}", f"hydra.run.dir={out}", env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    rows = (out / "predictions.csv").read_text().splitlines()[1:]
    assert len(rows) == 89  # the team's test split, not the entry config's default data


@pytest.mark.slow
def test_a_module_that_needs_what_nobody_gives_is_named(
    team: tuple[Path, list[str], dict[str, str]], tmp_path: Path
) -> None:
    """Without the interpolations in its config, the model's required arguments are missing:
    one paragraph naming them (Python's own words, with the config node), nothing run."""
    root, _, env = team
    bare = tmp_path / "configs"
    shutil.copytree(root / "configs", bare)
    (bare / "model" / "mine.yaml").write_text("_target_: lit_mine.LitClassifier\n")
    result = run_entry(
        "train",
        f"hydra.searchpath=['file://{bare}']",
        "model=mine",
        "data=mine",
        f"hydra.run.dir={tmp_path / 'run'}",
        env=env,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    message = " ".join(result.stderr.split())
    assert (
        "`model.num_features` and `model.num_classes` have no value: lit_mine.LitClassifier "
        "needs them (TypeError:" in message
    )
    assert "'num_features' and 'num_classes'" in message
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()
