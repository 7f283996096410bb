"""Lightning's own callbacks as options of the team's runs: an EMA of the weights
(`callbacks=[default,ema]`, Lightning's EMAWeightAveraging), validated and checkpointed as
Lightning does and exact on resume; throughput (`callbacks=[default,throughput]`, Lightning's
ThroughputMonitor), counting the samples of any batch."""

from __future__ import annotations

import csv
import signal
from pathlib import Path

import pytest
import torch
from torchmetrics.classification import MulticlassAccuracy

from .docs_style import LitClassifier, LitDataModule
from .helpers import DOCS_STYLE, FAST, read_metrics, run_entry
from .test_resume import RUN, assert_same_run, checkpoint, start_paused_run, stop

EMA = ["callbacks=[default,ema]", "callbacks.ema.decay=0.9"]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def ema_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted EMA run (2 epochs of 16 steps, deterministic)."""
    run_dir = tmp_path_factory.mktemp("ema_reference")
    result = run_entry("train", *RUN, *EMA, f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


@pytest.mark.slow
def test_ema_killed_mid_epoch_then_resumed_equals_an_uninterrupted_run(
    ema_reference: Path, tmp_path: Path
) -> None:
    run_dir, marker = tmp_path / "run", tmp_path / "paused"
    code, _ = stop(start_paused_run(run_dir, marker, *EMA), signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert checkpoint(run_dir)["global_step"] == 25  # mid-epoch, with the average's state
    result = run_entry("train", f"resume={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_run(run_dir, ema_reference)  # metrics, `state_dict` (the average), CSV log
    got, want = checkpoint(run_dir), checkpoint(ema_reference)
    for part in ("current_model_state", "averaging_state"):
        assert got[part].keys() == want[part].keys()
        for key, value in want[part].items():
            assert torch.equal(got[part][key], value), (part, key)


@pytest.mark.slow
def test_ema_weights_are_what_is_validated_checkpointed_and_tested(ema_reference: Path) -> None:
    (best,) = (ema_reference / "checkpoints").glob("epoch_*.ckpt")
    saved = torch.load(best, weights_only=True)
    averaged, trained = saved["state_dict"], saved["current_model_state"]
    assert not torch.equal(averaged["net.0.weight"], trained["net.0.weight"])
    assert int(saved["averaging_state"]["n_averaged"]) == saved["global_step"]

    data = LitDataModule()
    data.setup("fit")

    def accuracy(weights: dict, x: torch.Tensor, y: torch.Tensor) -> float:
        model = LitClassifier(16, 4)
        model.load_state_dict(weights)
        with torch.no_grad():
            return MulticlassAccuracy(4)(model.eval()(x), y).item()

    rows = [r for r in read_csv(ema_reference / "csv" / "metrics.csv") if r.get("val_acc")]
    logged = float(rows[saved["epoch"]]["val_acc"])
    assert logged == pytest.approx(accuracy(averaged, *data.val_set.tensors), abs=1e-6)
    # train.py tests the best checkpoint: the averaged weights
    data.setup("test")
    tested = accuracy(averaged, *data.test_set.tensors)
    assert read_metrics(ema_reference)["test_acc"] == pytest.approx(tested, abs=1e-6)


@pytest.mark.slow
def test_throughput_counts_the_samples_of_each_batch_in_the_logs(tmp_path: Path) -> None:
    result = run_entry(
        "train",
        *DOCS_STYLE,
        *FAST,
        "callbacks=[default,throughput]",
        "callbacks.throughput.window_size=2",
        f"hydra.run.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # Lightning logs a stage's rates every `log_every_n_steps` training steps
    rows = read_csv(tmp_path / "csv" / "metrics.csv")
    train = [r for r in rows if r.get("train/device/samples_per_sec")]
    assert len(train) == 3  # steps 10, 20, 30 of 32
    for row in train:  # (x, y) batches of 32 samples
        samples, batches = row["train/device/samples_per_sec"], row["train/device/batches_per_sec"]
        assert float(samples) / float(batches) == pytest.approx(32, rel=1e-6)
