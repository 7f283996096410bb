"""The lean training step and the fast data paths: no host sync per step, identical results
with `data.on_device=true`, batches equal to a plain DataLoader's, and the benchmark command."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hydra.utils import instantiate
from lightning.pytorch import Callback, Trainer
from torch.overrides import TorchFunctionMode
from torch.utils.data import DataLoader, TensorDataset

from my_project.data.digits import DigitsDataModule
from my_project.machinery.data.batching import DeviceBatches, TensorBatchDataset, keep_batch
from my_project.machinery.devices.precision import set_float32_matmul_precision
from my_project.machinery.errors import UserError
from my_project.machinery.run.build import instantiate_group
from my_project.machinery.run.train import train
from my_project.models.classifier import ImageClassifier

from .helpers import compose_config, read_metrics

# Calls that make the host wait for the device (or would, on a GPU): reading a value out of a
# tensor, or an op whose output size depends on the data.
HOST_SYNCS = {
    torch.Tensor.item,
    torch.Tensor.tolist,
    torch.Tensor.cpu,
    torch.Tensor.numpy,
    torch.Tensor.__bool__,
    torch.Tensor.__float__,
    torch.Tensor.__int__,
    torch.Tensor.__index__,
    torch.Tensor.__format__,
    torch.Tensor.__repr__,
    torch.equal,
    torch.unique,
    torch.Tensor.unique,
    torch.nonzero,
    torch.Tensor.nonzero,
    torch.masked_select,
    torch.Tensor.masked_select,
}


class HostSyncCounter(TorchFunctionMode):
    """Counts host-syncing tensor calls while active (every torch call passes through here)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[str] = collections.Counter()
        self.ignored: set[int] = set()

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in HOST_SYNCS and not (args and id(args[0]) in self.ignored):
            self.calls[getattr(func, "__name__", str(func))] += 1
        return func(*args, **(kwargs or {}))


class CountHostSyncsInSteps(Callback):
    """Activates the counter from the start to the end of each training batch (step,
    backward, optimizer step and every hook in between), after the first batch."""

    def __init__(self) -> None:
        self.counter = HostSyncCounter()
        self.steps = 0

    def on_train_batch_start(self, trainer: Trainer, pl_module: Any, batch: Any, idx: int) -> None:
        if idx >= 1:
            # An optimizer's step counter lives on the host by design: reading it is no sync.
            self.counter.ignored = {
                id(state["step"])
                for optimizer in trainer.optimizers
                for state in optimizer.state.values()
                if "step" in state
            }
            self.counter.__enter__()

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: Any, out: Any, b: Any, idx: int
    ) -> None:
        if idx >= 1:
            self.counter.__exit__(None, None, None)
            self.steps += 1


def fit_counting_syncs(
    tmp_path: Path, model_class: type = ImageClassifier
) -> CountHostSyncsInSteps:
    cfg = compose_config(["logger=none", "callbacks=progress_bar"], tmp_path)
    datamodule = instantiate(cfg.data)
    model = instantiate(
        cfg.model,
        _target_=f"{model_class.__module__}.{model_class.__qualname__}",
        num_classes=10,
        image_shape=[1, 8, 8],
        _convert_="all",
    )
    watch = CountHostSyncsInSteps()
    trainer = Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        callbacks=[watch, *instantiate_group(cfg.callbacks)],
    )
    trainer.fit(model, datamodule=datamodule)
    return watch


def test_training_steps_make_no_host_sync(tmp_path: Path) -> None:
    watch = fit_counting_syncs(tmp_path)
    assert watch.steps >= 15
    assert watch.counter.calls == {}


class ReadsLossEveryStep(ImageClassifier):
    """What the check is there to catch: a `.item()` in the hot path."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        self.last_loss = loss.item()
        return loss


def test_host_sync_check_catches_an_item_call_in_the_step(tmp_path: Path) -> None:
    watch = fit_counting_syncs(tmp_path, ReadsLossEveryStep)
    assert watch.counter.calls["item"] == watch.steps


def _fit_metrics(tmp_path: Path, on_device: bool) -> dict[str, float]:
    run_dir = tmp_path / f"on_device_{on_device}"
    run_dir.mkdir()  # Hydra's job of making the run directory, in a real run
    cfg = compose_config(
        [
            "trainer.max_epochs=3",
            "trainer.accelerator=cpu",
            "logger=none",
            "callbacks=model_checkpoint",
            f"data.on_device={str(on_device).lower()}",
        ],
        run_dir,
    )
    train(cfg)
    return read_metrics(run_dir)


def test_on_device_data_trains_exactly_like_the_dataloader_path(tmp_path: Path) -> None:
    """Same seed, same shuffles, same dropout: the switch changes speed, not results."""
    loader, on_device = _fit_metrics(tmp_path, False), _fit_metrics(tmp_path, True)
    assert loader["test/acc"] > 0.8
    assert on_device == loader


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
    data = DigitsDataModule()
    assert data.hparams.on_device == "auto"
    data.setup()
    assert isinstance(_attached(data, "cpu").train_dataloader(), DeviceBatches)
    assert isinstance(_attached(data, "cpu").test_dataloader(), DeviceBatches)
    assert isinstance(_attached(data, "cpu", num_workers=2).train_dataloader(), DataLoader)
    on_gpu = _attached(data, "cuda").train_dataloader()  # built, not iterated: no GPU needed
    assert isinstance(on_gpu, DataLoader) and on_gpu.pin_memory
    forced = _attached(DigitsDataModule(on_device=True), "cpu", num_workers=2)
    forced.setup()
    assert isinstance(forced.train_dataloader(), DeviceBatches)


def test_on_device_rejects_anything_but_true_false_or_auto() -> None:
    with pytest.raises(UserError, match=r"data.on_device='yes'.*expected true .* false .* auto"):
        DigitsDataModule(on_device="yes")


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


@pytest.mark.parametrize(("workload", "repeats"), [("mlp", 2), ("cnn", 1)])
def test_bench_writes_json_png_and_ends_with_the_ratio(
    workload: str, repeats: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from my_project.machinery.bench import main

    main(
        [
            "--workload", workload, "--device", "cpu", "--steps", "3", "--warmup", "1",
            "--repeats", str(repeats), "--samples", "300", "--out", str(tmp_path),
        ]
    )  # fmt: skip
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads((tmp_path / f"bench_{workload}_cpu.json").read_text())
    assert lines[-1] == f"ratio {result['ratio']:.3f}" and result["ratio"] > 0
    assert result["paired_ratio"] > 0
    assert set(result["methods"]) == {"raw", "template", "raw_template_data"}
    assert all(len(m["samples_per_s"]) == repeats for m in result["methods"].values())
    assert result["batch_size"] == (64 if workload == "mlp" else 128)
    png = (tmp_path / f"bench_{workload}_cpu.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_disabling_the_progress_bar_in_the_trainer_drops_the_callback(tmp_path: Path) -> None:
    cfg = compose_config(["+trainer.enable_progress_bar=false"], tmp_path)
    callbacks = instantiate_group(cfg.callbacks)
    assert not any("Progress" in type(cb).__name__ for cb in callbacks)
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=False)
    assert trainer.progress_bar_callback is None
    default = instantiate_group(compose_config([], tmp_path).callbacks)
    assert any(type(cb).__name__ == "ThrottledProgressBar" for cb in default)


def test_compiled_model_keeps_checkpoint_keys(tmp_path: Path) -> None:
    def build(compile_: bool) -> ImageClassifier:
        cfg = compose_config([f"model.compile={str(compile_).lower()}"], tmp_path)
        return instantiate(cfg.model, num_classes=10, image_shape=[1, 8, 8], _convert_="all")

    compiled, plain = build(True), build(False)
    assert compiled.net._compiled_call_impl is not None and plain.net._compiled_call_impl is None
    assert compiled.state_dict().keys() == plain.state_dict().keys()
    plain.load_state_dict(compiled.state_dict())


def test_unknown_matmul_precision_is_a_user_error() -> None:
    with pytest.raises(UserError, match="float32_matmul_precision='fast'"):
        set_float32_matmul_precision("fast")
    assert set_float32_matmul_precision("highest") is False


def test_throttled_bar_ends_showing_the_last_epoch_exactly(tmp_path: Path) -> None:
    """With updates due only once (an hour apart), every later batch and epoch start is
    skipped or updated in place; the end of training must still leave the bar at the last
    epoch, all its batches done, with the metrics of the end."""
    from my_project.machinery.callbacks.progress import ThrottledProgressBar

    cfg = compose_config(["logger=none"], tmp_path)
    bar = ThrottledProgressBar(min_interval=3600)
    trainer = Trainer(
        max_epochs=3,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        callbacks=[bar],
    )
    model = instantiate(cfg.model, num_classes=10, image_shape=[1, 8, 8], _convert_="all")
    trainer.fit(model, datamodule=instantiate(cfg.data))
    task = bar.train_progress_bar
    assert task.total == 20 and task.completed == 20
    assert "Epoch 2/2" in task.description
    assert bar._metric_component is not None
    shown = bar._metric_component._metrics
    assert shown["val/acc"] == pytest.approx(float(trainer.callback_metrics["val/acc"]))
