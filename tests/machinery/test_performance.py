"""The lean training step and the fast data path, for any module: the template adds no host
sync to a step (every N steps at most), batches equal a plain DataLoader's, and the benchmark
command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from hydra.utils import instantiate
from lightning.pytorch import LightningModule, Trainer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from my_project.machinery.data.batching import TensorBatchDataset, keep_batch
from my_project.machinery.devices.precision import set_float32_matmul_precision
from my_project.machinery.errors import UserError
from my_project.machinery.run.build import instantiate_group

from .docs_style import LitClassifier, LitDataModule
from .helpers import DOCS_STYLE, compose_config
from .host_syncs import CountHostSyncsInSteps


class SyncFree(LightningModule):
    """A step that makes no host sync of its own: whatever the counter sees is the template's."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class ItemEveryStep(SyncFree):
    """What the check is there to catch: an `.item()` in the hot path."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        self.last_loss = loss.item()
        return loss


def fit_counting_syncs(model: LightningModule, tmp_path: Path) -> CountHostSyncsInSteps:
    """One epoch with every default callback of the template (no loggers)."""
    cfg = compose_config([*DOCS_STYLE, "logger=none"], tmp_path)
    watch = CountHostSyncsInSteps()
    trainer = Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        callbacks=[watch, *instantiate_group(cfg.callbacks)],
    )
    trainer.fit(model, datamodule=LitDataModule())
    return watch


def test_the_templates_callbacks_make_no_host_sync_in_the_steps(tmp_path: Path) -> None:
    """Every hook of every callback of the template, in 15 steps: a sync at most one step in
    ten (the NaN check and the progress bar's metrics, every `log_every_n_steps` steps)."""
    watch = fit_counting_syncs(SyncFree(), tmp_path)
    assert watch.steps >= 15
    synced = [step for step, calls in enumerate(watch.per_step) if calls]
    assert len(synced) <= watch.steps // 10 + 1, watch.per_step


def test_host_sync_check_catches_an_item_call_in_the_step(tmp_path: Path) -> None:
    watch = fit_counting_syncs(ItemEveryStep(), tmp_path)
    assert all(calls["item"] >= 1 for calls in watch.per_step)


def test_template_batches_equal_a_plain_dataloaders() -> None:
    images, labels = torch.rand(100, 1, 8, 8), torch.arange(100)

    def batches(dataset: Any, **options: Any) -> tuple[list[Any], DataLoader]:
        torch.manual_seed(3)
        loader = DataLoader(dataset, batch_size=32, shuffle=True, **options)
        return list(loader), loader

    plain, _ = batches(TensorDataset(images, labels))
    batched, _ = batches(TensorBatchDataset(images, labels), collate_fn=keep_batch)
    assert [len(b[1]) for b in batched] == [32, 32, 32, 4]
    for (x0, y0), (x1, y1) in zip(plain, batched, strict=True):
        assert torch.equal(x0, x1) and torch.equal(y0, y1)


@pytest.mark.parametrize("repeats", [1, 2])
def test_bench_times_any_module_and_prints_the_ratio(
    repeats: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A team's own module and data, named by overrides (the built-in workloads are the
    example's: tests/project)."""
    from my_project.machinery.bench import main

    result = main(
        [
            "--workload", "none", *DOCS_STYLE, "--device", "cpu", "--steps", "3",
            "--warmup", "1", "--repeats", str(repeats),
        ]
    )  # fmt: skip
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == f"ratio {result['ratio']:.3f}" and result["ratio"] > 0
    assert result["cpu_ratio"] > 0 and result["overrides"] == DOCS_STYLE
    assert set(result["samples_per_s"]) == {"raw", "template"}
    assert sum(line.startswith("repeat ") for line in lines) == 2 * repeats
    assert result["batch_size"] == 32


def test_disabling_the_progress_bar_in_the_trainer_drops_the_callback(tmp_path: Path) -> None:
    cfg = compose_config([*DOCS_STYLE, "+trainer.enable_progress_bar=false"], tmp_path)
    callbacks = instantiate_group(cfg.callbacks)
    assert not any("Progress" in type(cb).__name__ for cb in callbacks)
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=False)
    assert trainer.progress_bar_callback is None
    default = instantiate_group(compose_config(DOCS_STYLE, tmp_path).callbacks)
    assert any(type(cb).__name__ == "TQDMProgressBar" for cb in default)


def test_unknown_matmul_precision_is_a_user_error() -> None:
    with pytest.raises(UserError, match="float32_matmul_precision='fast'"):
        set_float32_matmul_precision("fast")
    assert set_float32_matmul_precision("highest") is False


class OneCycleFromTheTrainer(LitClassifier):
    """The Lightning docs' recipe: the schedule sized by `self.trainer`, which the module also
    reads in `setup` and in its step (the bench once crashed: not attached to a Trainer)."""

    def setup(self, stage: str) -> None:
        self.batches_per_epoch = self.trainer.datamodule.batch_size

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        assert self.trainer.optimizers  # a step may ask its trainer
        return super().training_step(batch, batch_idx)

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
        total = self.trainer.estimated_stepping_batches
        schedule = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, self.hparams.lr, total_steps=total
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class Stream(torch.utils.data.IterableDataset):
    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __iter__(self) -> Any:
        return iter(self.dataset)


class StreamedData(LitDataModule):
    """Its training set is an IterableDataset (the bench once asked it to shuffle)."""

    def train_dataloader(self) -> DataLoader:
        return DataLoader(Stream(self.train_set), batch_size=self.batch_size)


def test_bench_times_a_module_that_reads_its_trainer_on_streamed_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from my_project.machinery.bench import main

    result = main(
        [
            "--workload", "none", *DOCS_STYLE, f"model._target_={__name__}.OneCycleFromTheTrainer",
            f"data._target_={__name__}.StreamedData", "--steps", "20", "--warmup", "1",
            "--repeats", "1",
        ]
    )  # fmt: skip
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"ratio {result['ratio']:.3f}"
    assert all(rate > 0 for rate in result["samples_per_s"].values())


@pytest.mark.parametrize("argument", ["--steps=0", "--steps=-5", "--repeats=0"])
def test_bench_refuses_a_count_below_one(argument: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Never a silent default or a clamp in place of what was typed."""
    from my_project.machinery.bench import parse_args

    with pytest.raises(SystemExit) as exited:
        parse_args([argument])
    assert exited.value.code == 2 and "is not a whole number >= 1" in capsys.readouterr().err
