"""The lean training step and the fast data paths, for any module: the template adds no host
sync to a step, `data.on_device=true` gives the DataLoader path's results, batches equal a
plain DataLoader's, the lean-step patches change no result, and the benchmark command."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hydra.utils import instantiate
from lightning.pytorch import LightningModule, Trainer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from my_project.machinery.callbacks.lean_steps import LeanSteps
from my_project.machinery.data.batching import DeviceBatches, TensorBatchDataset, keep_batch
from my_project.machinery.devices.precision import set_float32_matmul_precision
from my_project.machinery.errors import UserError
from my_project.machinery.run.build import instantiate_group
from my_project.machinery.run.train import train

from .docs_style import LitClassifier, LitDataModule
from .helpers import DOCS_STYLE, compose_config, read_metrics
from .host_syncs import CountHostSyncsInSteps
from .toy_data import ToyInMemoryData


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
    watch = fit_counting_syncs(SyncFree(), tmp_path)
    assert watch.steps >= 15
    assert watch.counter.calls == {}


def test_host_sync_check_catches_an_item_call_in_the_step(tmp_path: Path) -> None:
    watch = fit_counting_syncs(ItemEveryStep(), tmp_path)
    assert watch.counter.calls["item"] == watch.steps


def _fit(tmp_path: Path, name: str, *overrides: str) -> dict[str, float]:
    run_dir = tmp_path / name
    run_dir.mkdir()  # Hydra's job of making the run directory, in a real run
    cfg = compose_config(
        [
            *DOCS_STYLE,
            "trainer.max_epochs=3",
            "logger=none",
            "callbacks=model_checkpoint",
            *overrides,
        ],
        run_dir,
    )
    train(cfg)
    return read_metrics(run_dir)


def test_on_device_data_trains_exactly_like_the_dataloader_path(tmp_path: Path) -> None:
    """Same seed, same shuffles: the switch changes speed, not results."""
    loader = _fit(tmp_path, "loader", "data=toy_in_memory", "data.on_device=false")
    on_device = _fit(tmp_path, "on_device", "data=toy_in_memory", "data.on_device=true")
    assert loader["test_acc"] > 0.6
    assert on_device == loader


@pytest.mark.slow
def test_lean_steps_change_no_result(tmp_path: Path) -> None:
    """The same seeded run with and without the patches: the same metrics to the last bit."""
    lean = _fit(tmp_path, "lean", "callbacks=[model_checkpoint,lean_steps]")
    plain = _fit(tmp_path, "plain")
    assert lean == plain and lean["test_acc"] > 0.5


def test_lean_steps_are_in_place_only_while_a_trainer_runs() -> None:
    from lightning.pytorch.trainer import call
    from lightning.pytorch.trainer.connectors.logger_connector.result import _ResultMetric

    before = (_ResultMetric.to, call._call_callback_hooks, "__setattr__" in vars(LightningModule))
    seen: dict[str, Any] = {}

    class Look(LeanSteps):
        def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
            seen["patched"] = _ResultMetric.to is not before[0]
            seen["setattr"] = "__setattr__" in vars(LightningModule)

    trainer = Trainer(
        max_steps=2, accelerator="cpu", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
        callbacks=[Look()],
    )  # fmt: skip
    trainer.fit(LitClassifier(16, 4), datamodule=LitDataModule())
    assert seen == {"patched": True, "setattr": True}
    after = (_ResultMetric.to, call._call_callback_hooks, "__setattr__" in vars(LightningModule))
    assert after == before
    # The step signatures Lightning reads every batch are stored on the functions, and true.
    for name in ("training_step", "validation_step", "test_step"):
        function = getattr(LitClassifier, name)
        assert "__signature__" in vars(function)
        assert list(inspect.signature(function).parameters) == ["self", "batch", "batch_idx"]


def _attached(data: Any, device: str, num_workers: int = 0) -> Any:
    """``data`` as a Trainer on ``device`` would see it (only what the loaders read)."""
    data.hparams.num_workers = num_workers
    data.trainer = SimpleNamespace(
        strategy=SimpleNamespace(root_device=torch.device(device)),
        world_size=1,
        global_rank=0,
        overfit_batches=0,
    )
    return data


def test_on_device_auto_slices_in_place_on_cpu_and_streams_to_accelerators() -> None:
    """`auto` (the default): on CPU the splits already are where the model is, so batches are
    sliced from them; with workers, or on an accelerator, batches come from a DataLoader."""
    data = ToyInMemoryData()
    assert data.hparams.on_device == "auto"
    data.setup()
    assert isinstance(_attached(data, "cpu").train_dataloader(), DeviceBatches)
    assert isinstance(_attached(data, "cpu").test_dataloader(), DeviceBatches)
    assert isinstance(_attached(data, "cpu", num_workers=2).train_dataloader(), DataLoader)
    on_gpu = _attached(data, "cuda").train_dataloader()  # built, not iterated: no GPU needed
    assert isinstance(on_gpu, DataLoader) and on_gpu.pin_memory
    forced = _attached(ToyInMemoryData(on_device=True), "cpu", num_workers=2)
    forced.setup()
    assert isinstance(forced.train_dataloader(), DeviceBatches)


def test_on_device_rejects_anything_but_true_false_or_auto() -> None:
    with pytest.raises(UserError, match=r"data.on_device='yes'.*expected true .* false .* auto"):
        ToyInMemoryData(on_device="yes")


def test_template_batches_equal_a_plain_dataloaders() -> None:
    images, labels = torch.rand(100, 1, 8, 8), torch.arange(100)

    def batches(dataset: Any, **options: Any) -> tuple[list[Any], DataLoader]:
        torch.manual_seed(3)
        loader = DataLoader(dataset, batch_size=32, shuffle=True, **options)
        return list(loader), loader

    plain, _ = batches(TensorDataset(images, labels))
    batched, loader = batches(TensorBatchDataset(images, labels), collate_fn=keep_batch)
    torch.manual_seed(3)
    sliced = list(DeviceBatches.from_loader(loader, (images, labels)))
    assert [len(b[1]) for b in batched] == [32, 32, 32, 4] == [len(b[1]) for b in sliced]
    for (x0, y0), (x1, y1), (x2, y2) in zip(plain, batched, sliced, strict=True):
        assert torch.equal(x0, x1) and torch.equal(y0, y1)
        assert torch.equal(x0, x2) and torch.equal(y0, y2)


def test_device_batches_shard_by_rank_under_ddp() -> None:
    """Training shards are the DistributedSampler's (equal sizes); evaluation shards cover
    every sample exactly once (no padding duplicates)."""
    size, world = 271, 2
    tensors = (torch.arange(size),)
    dataset = TensorBatchDataset(*tensors)

    def shards(shuffle: bool) -> list[DeviceBatches]:
        loader = DataLoader(dataset, batch_size=64, shuffle=shuffle, collate_fn=keep_batch)
        return [DeviceBatches.from_loader(loader, tensors, r, world, seed=7) for r in range(world)]

    train_shards = [torch.cat([b[0] for b in s]).tolist() for s in shards(True)]
    assert [len(s) for s in train_shards] == [136, 136]  # padded to equal lengths
    assert set(train_shards[0]) | set(train_shards[1]) == set(range(size))
    eval_shards = [torch.cat([b[0] for b in s]).tolist() for s in shards(False)]
    assert sorted(eval_shards[0] + eval_shards[1]) == list(range(size))
    assert [len(s) for s in shards(False)] == [3, 3]


@pytest.mark.parametrize("repeats", [1, 2])
def test_bench_times_any_module_and_writes_json_and_the_ratio(
    repeats: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A team's own module and data, named by overrides (the built-in workloads are the
    example's: tests/project)."""
    from my_project.machinery.bench import main

    main(
        [
            "--workload", "none", *DOCS_STYLE, "--device", "cpu", "--steps", "3",
            "--warmup", "1", "--repeats", str(repeats), "--out", str(tmp_path),
        ]
    )  # fmt: skip
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads((tmp_path / "bench_custom_cpu.json").read_text())
    assert lines[-1] == f"ratio {result['ratio']:.3f}" and result["ratio"] > 0
    assert result["paired_ratio"] > 0 and result["overrides"] == DOCS_STYLE
    assert set(result["methods"]) == {"raw", "template", "raw_template_data"}
    assert all(len(m["samples_per_s"]) == repeats for m in result["methods"].values())
    assert result["batch_size"] == 32


def test_disabling_the_progress_bar_in_the_trainer_drops_the_callback(tmp_path: Path) -> None:
    cfg = compose_config([*DOCS_STYLE, "+trainer.enable_progress_bar=false"], tmp_path)
    callbacks = instantiate_group(cfg.callbacks)
    assert not any("Progress" in type(cb).__name__ for cb in callbacks)
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=False)
    assert trainer.progress_bar_callback is None
    default = instantiate_group(compose_config(DOCS_STYLE, tmp_path).callbacks)
    assert any(type(cb).__name__ == "ThrottledProgressBar" for cb in default)


def test_unknown_matmul_precision_is_a_user_error() -> None:
    with pytest.raises(UserError, match="float32_matmul_precision='fast'"):
        set_float32_matmul_precision("fast")
    assert set_float32_matmul_precision("highest") is False


def test_throttled_bar_ends_showing_the_last_epoch_exactly() -> None:
    """With updates due only once (an hour apart), every later batch and epoch start is
    skipped or updated in place; the end of training must still leave the bar at the last
    epoch, all its batches done, with the metrics of the end."""
    from my_project.machinery.callbacks.progress import ThrottledProgressBar

    bar = ThrottledProgressBar(min_interval=3600)
    trainer = Trainer(
        max_epochs=3,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        callbacks=[bar],
    )
    trainer.fit(LitClassifier(16, 4), datamodule=LitDataModule())
    task = bar.train_progress_bar
    assert task.total == 16 and task.completed == 16
    assert "Epoch 2/2" in task.description
    assert bar._metric_component is not None
    shown = bar._metric_component._metrics
    assert shown["val_acc"] == pytest.approx(float(trainer.callback_metrics["val_acc"]))


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

    main(
        [
            "--workload", "none", *DOCS_STYLE, f"model._target_={__name__}.OneCycleFromTheTrainer",
            f"data._target_={__name__}.StreamedData", "--steps", "20", "--warmup", "1",
            "--repeats", "1", "--out", str(tmp_path),
        ]
    )  # fmt: skip
    result = json.loads((tmp_path / "bench_custom_cpu.json").read_text())
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"ratio {result['ratio']:.3f}"
    assert all(m["median"] > 0 for m in result["methods"].values())
