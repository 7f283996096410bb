"""The regression example, end to end: `experiment=diabetes` trains in one process, with
`trainer.devices=2` (DDP) and `trainer.strategy=dp`, evaluates and predicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..machinery.helpers import read_metrics, run_entry

RECIPE = ["experiment=diabetes", "logger=csv"]


def train(run_dir: Path, *extra: str) -> Path:
    result = run_entry("train", *RECIPE, *extra, f"hydra.run.dir={run_dir}", timeout=420)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return run_dir


@pytest.fixture(scope="module")
def recipe_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(tmp_path_factory.mktemp("diabetes"))


@pytest.mark.slow
def test_the_recipe_explains_a_good_part_of_the_variance(recipe_run: Path) -> None:
    metrics = read_metrics(recipe_run)
    assert metrics["test/r2"] > 0.3 and metrics["test/mse"] < 4500
    assert (recipe_run / "predictions.png").is_file()  # predicted against true
    assert not (recipe_run / "confusion_matrix.png").exists()


@pytest.mark.slow
def test_eval_and_predict_agree_with_the_training_run(recipe_run: Path, tmp_path: Path) -> None:
    best = next((recipe_run / "checkpoints").glob("epoch_*.ckpt"))
    data = ["data=diabetes", "model=regressor"]
    result = run_entry("eval", *data, f"ckpt_path={best}", f"hydra.run.dir={tmp_path / 'eval'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_metrics(tmp_path / "eval")["test/r2"] == read_metrics(recipe_run)["test/r2"]
    result = run_entry(
        "predict", *data, f"ckpt_path={best}", f"hydra.run.dir={tmp_path / 'predict'}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    header, *rows = (tmp_path / "predict" / "predictions.csv").read_text().splitlines()
    assert header == "index,target,prediction" and len(rows) == 66
    assert "RMSE" in result.stdout


@pytest.mark.exhaustive  # a regressor under DDP in the slow tier: the zoo's metric_sum (test_zoo.py)
def test_ddp_evaluation_equals_one_process(tmp_path: Path) -> None:
    run = train(
        tmp_path / "ddp", "trainer.max_epochs=5", "trainer.devices=2", "trainer.strategy=ddp"
    )
    best = next((run / "checkpoints").glob("epoch_*.ckpt"))
    result = run_entry(
        "eval",
        "data=diabetes",
        "model=regressor",
        f"ckpt_path={best}",
        f"hydra.run.dir={tmp_path / 'eval'}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    single, ddp = read_metrics(tmp_path / "eval"), read_metrics(run)
    assert single["test/r2"] == pytest.approx(ddp["test/r2"], rel=1e-5)
    assert single["test/mse"] == pytest.approx(ddp["test/mse"], rel=1e-5)


@pytest.mark.exhaustive  # dp in the slow tier: test_dp.py and test_bring_your_own.py
def test_dp_trains_like_one_device(tmp_path: Path) -> None:
    one = train(tmp_path / "one", "trainer.max_epochs=5")
    dp = train(tmp_path / "dp", "trainer.max_epochs=5", "trainer.strategy=dp", "trainer.devices=2")
    assert read_metrics(dp) == read_metrics(one)
