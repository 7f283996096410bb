"""The example's LightningModule: torchmetrics registered as submodules that follow the
model's device, plain hyperparameters, and what it asks of its data."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torchmetrics import Metric

from my_project.data.digits import DigitsDataModule
from my_project.machinery.run.build import model_for_data
from my_project.models.classifier import ImageClassifier

from ..machinery.helpers import compose_config
from .example import CLASSIFIER


def build_model(tmp_path: Path, *overrides: str) -> ImageClassifier:
    """The classifier as train.py builds it: its config plus what the digits data offers."""
    return model_for_data(compose_config([*CLASSIFIER, *overrides], tmp_path), DigitsDataModule())


def metrics_of(model: torch.nn.Module) -> dict[str, Metric]:
    return {name: module for name, module in model.named_modules() if isinstance(module, Metric)}


@pytest.mark.parametrize("net", ["mlp", "cnn"])
def test_every_metric_is_a_registered_submodule(tmp_path: Path, net: str) -> None:
    model = build_model(tmp_path, f"model/net={net}")
    names = set(metrics_of(model))
    for stage in ("train", "val", "test"):
        assert type(getattr(model, f"{stage}_acc")).__name__ == "MulticlassAccuracy"
        assert {f"{stage}_acc", f"{stage}_loss"} <= names
    assert "val_acc_best" in names
    assert model.hparams.num_classes == 10 and list(model.hparams.in_shape) == [1, 8, 8]
    assert model(torch.rand(5, 1, 8, 8)).shape == (5, 10)


def _devices_after_to(model: ImageClassifier, device: str) -> set[torch.device]:
    model.to(device)
    devices = {metric.device for metric in metrics_of(model).values()}
    # Metric states too, not only the metric objects' recorded device.
    for metric in metrics_of(model).values():
        for state in metric._defaults:
            value = getattr(metric, state)
            if isinstance(value, torch.Tensor):
                devices.add(value.device)
    return devices


def test_metrics_follow_the_model_to_another_device_on_cpu(tmp_path: Path) -> None:
    model = build_model(tmp_path)
    assert _devices_after_to(model, "cpu") == {torch.device("cpu")}
    assert _devices_after_to(model, "meta") == {torch.device("meta")}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_metrics_follow_the_model_to_cuda(tmp_path: Path) -> None:
    model = build_model(tmp_path)
    assert _devices_after_to(model, "cuda") == {torch.device("cuda", 0)}


def test_accuracy_metric_counts_exactly(tmp_path: Path) -> None:
    model = build_model(tmp_path)
    model.test_acc.update(torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1, 0, 3]))
    assert model.test_acc.compute().item() == pytest.approx(0.75)


def test_hyperparameters_are_plain_data_for_weights_only_loading(tmp_path: Path) -> None:
    model = build_model(tmp_path, "model/net=cnn")
    path = tmp_path / "model.pt"
    torch.save({"hyper_parameters": dict(model.hparams), "state_dict": model.state_dict()}, path)
    loaded = torch.load(path, weights_only=True)
    assert loaded["hyper_parameters"]["net"]["_target_"].endswith("CNN")
    clone = ImageClassifier(**loaded["hyper_parameters"])
    clone.load_state_dict(loaded["state_dict"])


class GradientsAfterClipping:
    """Largest gradient norm and value seen by the time each next step zeroes them."""

    def __init__(self) -> None:
        self.max_norm = self.max_value = 0.0

    def observe(self, model: torch.nn.Module) -> None:
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        if grads:
            norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])).item()
            self.max_norm = max(self.max_norm, norm)
            self.max_value = max(self.max_value, max(g.abs().max().item() for g in grads))


@pytest.mark.parametrize(("clip", "algorithm"), [(None, None), (1e-3, "norm"), (1e-4, "value")])
def test_trainer_gradient_clipping_still_clips(
    tmp_path: Path, clip: float | None, algorithm: str | None
) -> None:
    """`trainer.gradient_clip_val` and `gradient_clip_algorithm` clip the example's gradients."""
    from lightning.pytorch import Callback, Trainer

    seen = GradientsAfterClipping()

    class Watch(Callback):
        def on_before_zero_grad(self, trainer: Trainer, pl_module: object, optimizer: object):
            seen.observe(trainer.lightning_module)

    trainer = Trainer(
        accelerator="cpu",
        max_steps=6,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        gradient_clip_val=clip,
        gradient_clip_algorithm=algorithm,
        callbacks=[Watch()],
    )
    trainer.fit(build_model(tmp_path), datamodule=DigitsDataModule())
    if clip is None:
        assert seen.max_norm > 1e-2 and seen.max_value > 1e-3  # so the bounds below can fail
    elif algorithm == "norm":
        assert seen.max_norm <= clip * (1 + 1e-4)
    else:
        assert seen.max_value <= clip * (1 + 1e-6)


@pytest.mark.parametrize("net", ["mlp", "cnn"])
def test_classifier_keeps_every_tensor_where_lightning_moves_it(tmp_path: Path, net: str) -> None:
    """The device guard finds nothing in the example's steps on `meta` (what a GPU run meets)."""
    from my_project.machinery.devices.guard import watch_devices

    model = build_model(tmp_path, f"model/net={net}").to("meta")
    data = DigitsDataModule(batch_size=8)
    data.setup("fit")
    x, y = next(iter(data.train_dataloader()))
    batch = (x.to("meta"), y.to("meta"))
    with watch_devices(model):
        model.training_step(batch, 0)
        model.validation_step(batch, 0)
        model.test_step(batch, 0)
    assert model.device == torch.device("meta")
