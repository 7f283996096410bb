"""The LightningModule: metrics are registered torchmetrics that follow the model's device."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from torchmetrics import Metric

from my_project.models.classifier import ImageClassifier

from ..machinery.helpers import compose_config


def build_model(tmp_path: Path, *overrides: str) -> ImageClassifier:
    cfg = compose_config(list(overrides), tmp_path)
    return instantiate(cfg.model, num_classes=10, image_shape=[1, 8, 8], _convert_="all")


def metrics_of(model: torch.nn.Module) -> dict[str, Metric]:
    return {name: module for name, module in model.named_modules() if isinstance(module, Metric)}


@pytest.mark.parametrize("net", ["mlp", "cnn"])
def test_every_metric_is_a_registered_submodule(tmp_path: Path, net: str) -> None:
    model = build_model(tmp_path, f"model/net={net}")
    names = set(metrics_of(model))
    for stage in ("train", "val", "test"):
        accuracy = getattr(model, f"{stage}_metrics")["acc"]
        assert (
            f"{stage}_metrics.acc" in names and accuracy.__class__.__name__ == "MulticlassAccuracy"
        )
        assert f"{stage}_loss" in names
    assert {"val_acc_best", "test_confusion"} <= names
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
    model.test_metrics.update(torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1, 0, 3]))
    assert model.test_metrics.compute()["test/acc"].item() == pytest.approx(0.75)


def test_hyperparameters_are_plain_data_for_weights_only_loading(tmp_path: Path) -> None:
    model = build_model(tmp_path, "model/net=cnn")
    path = tmp_path / "model.pt"
    torch.save({"hyper_parameters": dict(model.hparams), "state_dict": model.state_dict()}, path)
    loaded = torch.load(path, weights_only=True)
    assert loaded["hyper_parameters"]["net"]["_target_"].endswith("CNN")
    clone = ImageClassifier(**loaded["hyper_parameters"])
    clone.load_state_dict(loaded["state_dict"])


def _batches(sizes: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [
        (
            torch.rand(n, 1, 8, 8, generator=generator),
            torch.randint(0, 10, (n,), generator=generator),
        )
        for n in sizes
    ]


def test_train_metrics_updated_in_groups_equal_one_update_per_step(tmp_path: Path) -> None:
    """Training steps hand their outputs to the metrics every few steps; the states (and so
    the epoch's accuracy and sample-weighted loss) equal one update per step, exactly, also
    with a smaller last batch."""
    model = build_model(tmp_path, "model.net.dropout=0")
    model.metric_update_every = 3
    reference = build_model(tmp_path, "model.net.dropout=0")
    reference.load_state_dict(model.state_dict())
    model.eval()
    reference.eval()
    for i, (x, y) in enumerate(_batches([16, 16, 16, 16, 16, 16, 16, 5])):
        model.training_step((x, y), i)
        assert len(model._pending_train) < model.metric_update_every  # memory stays bounded
        logits = reference(x)
        reference.train_metrics.update(logits.argmax(dim=1), y)
        reference.train_loss.update(torch.nn.functional.cross_entropy(logits, y), len(y))
    model.update_train_metrics()
    got = {**model.train_metrics.compute(), "loss": model.train_loss.compute()}
    want = {**reference.train_metrics.compute(), "loss": reference.train_loss.compute()}
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key])
    assert int(model.train_loss.count) == 16 * 7 + 5


def test_state_dict_holds_every_training_step_so_far(tmp_path: Path) -> None:
    """A checkpoint saved between two grouped updates must not lose the pending steps."""
    model = build_model(tmp_path)
    for i, batch in enumerate(_batches([8, 8, 8])):  # fewer than metric_update_every
        model.training_step(batch, i)
    assert len(model._pending_train) == 3
    state = model.state_dict()
    assert len(model._pending_train) == 0
    assert int(state["train_loss.count"]) == 24
    assert int(state["train_metrics.acc.tp"] + state["train_metrics.acc.fn"]) == 24


def test_step_signatures_are_precomputed_and_what_lightning_expects(tmp_path: Path) -> None:
    """Lightning reads `training_step`'s signature every batch; it gets the stored one, which
    must be the method's real signature (so `batch_idx` is still passed)."""
    import inspect

    model = build_model(tmp_path)
    for name in ("training_step", "validation_step", "test_step", "predict_step"):
        method = getattr(ImageClassifier, name)
        assert "__signature__" in vars(method)
        assert inspect.getfullargspec(getattr(model, name)).args == ["self", "batch", "batch_idx"]


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
    """The module skips Lightning's per-step clipping bookkeeping when there is nothing to
    clip; `trainer.gradient_clip_val` and `gradient_clip_algorithm` must still clip."""
    from lightning.pytorch import Callback, Trainer

    from my_project.data.digits import DigitsDataModule

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
