"""The device guard names every tensor that will not follow the model, before the first step."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from omegaconf import OmegaConf
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics import MeanMetric, SumMetric
from torchmetrics.classification import MulticlassAccuracy

from my_project.machinery.callbacks import device_guard as guard_callback
from my_project.machinery.callbacks.device_guard import DeviceGuard
from my_project.machinery.devices.guard import (
    DevicePlacementError,
    check_device_placement,
    find_device_problems,
)
from my_project.machinery.errors import UserError

from .docs_style import LitClassifier, LitDataModule
from .helpers import DOCS_STYLE, FAST, compose_config, run_entry

# -- modules with the classic mistakes ---------------------------------------------------------


class Tiny(LightningModule):
    """A small trainable module; subclasses add one mistake each."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 3)
        self.loss = MeanMetric()
        self.steps: list[str] = []  # which steps ran (strings, not tensors)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        self.steps.append("train")
        x, y = batch
        loss = nn.functional.cross_entropy(self.layer(x), y)
        self.loss.update(loss.detach())
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.steps.append("val")

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.steps.append("test")

    def predict_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self.layer(batch[0])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class PlainTensorAttribute(Tiny):
    def __init__(self) -> None:
        super().__init__()
        self.total = torch.tensor(0.0)  # the seeds' mistake: will stay on the CPU
        self.register_buffer("count", torch.tensor(0.0))  # correct: follows the module


class ListOfTensors(Tiny):
    def __init__(self) -> None:
        super().__init__()
        self.history = [torch.zeros(3), torch.zeros(3)]


class DictOfMetrics(Tiny):
    def __init__(self) -> None:
        super().__init__()
        self.metrics = {"acc": MulticlassAccuracy(num_classes=3), "total": SumMetric()}


class BrokenClassifier(LitClassifier):
    """A team's docs-style classifier plus a running total kept as a plain tensor attribute."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.total = torch.tensor(0.0)


class BrokenOnRankOneClassifier(LitClassifier):
    """Broken in the second DDP process only: the first must stop too, not wait forever."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if os.environ.get("LOCAL_RANK", "0") == "1":
            self.total = torch.tensor(0.0)


def loader(n: int = 16) -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, 4, generator=generator), torch.randint(0, 3, (n,), generator=generator)
    return DataLoader(TensorDataset(x, y), batch_size=4)


def make_trainer(*callbacks: Callback, max_epochs: int = 1) -> Trainer:
    return Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=max_epochs,
        callbacks=list(callbacks),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


def docs_style_model() -> LitClassifier:
    return LitClassifier(num_features=16, num_classes=4)


# -- the walk ----------------------------------------------------------------------------------


def test_plain_tensor_attribute_is_reported_by_name_with_register_buffer_fix() -> None:
    [problem] = find_device_problems(PlainTensorAttribute())
    assert problem.startswith("`total` (a tensor on cpu): ")
    assert 'self.register_buffer("total"' in problem and ".to(self.device)" in problem
    assert "SumMetric" in problem  # the other fix for a running total


def test_each_tensor_of_a_list_attribute_is_reported_with_the_fix() -> None:
    problems = find_device_problems(ListOfTensors())
    assert [p.split()[0] for p in problems] == ["`history[0]`", "`history[1]`"]
    assert all('register_buffer("history"' in p and "ParameterList" in p for p in problems)


def test_plain_dict_of_torchmetrics_is_reported_with_moduledict_fix() -> None:
    module = DictOfMetrics()
    problems = find_device_problems(module)
    assert [p.split()[0] for p in problems] == ["`metrics['acc']`", "`metrics['total']`"]
    assert "(a MulticlassAccuracy in a plain container)" in problems[0]
    assert all("nn.ModuleDict" in p and "MetricCollection" in p for p in problems)
    # Not hypothetical: the metrics' states really stay behind when the module moves.
    module.to("meta")
    assert module.metrics["total"].sum_value.device == torch.device("cpu")


def test_meta_device_shows_stale_tensors_without_a_gpu() -> None:
    module = PlainTensorAttribute().to("meta")
    assert module.count.device == torch.device("meta")  # the buffer followed ...
    [problem] = find_device_problems(module)  # ... the plain attribute did not
    assert problem.startswith("`total` (a tensor on cpu)")
    with pytest.raises(DevicePlacementError, match=r"`total` \(a tensor on cpu\)"):
        check_device_placement(module)
    assert issubclass(DevicePlacementError, UserError)  # train.py prints it, exit code 2


def test_docs_style_module_reports_nothing_before_and_after_meta() -> None:
    model = docs_style_model()
    assert find_device_problems(model) == []
    check_device_placement(model.to("meta"))
    assert model.device == torch.device("meta")


def test_unregistered_modules_and_parameters_are_reported() -> None:
    module = Tiny()
    module.heads = [nn.Linear(2, 2), nn.ReLU()]  # nn.Module.__setattr__ keeps lists as they are
    module.scales = {"a": nn.Parameter(torch.ones(1))}
    problems = {p.split()[0]: p for p in find_device_problems(module)}
    assert set(problems) == {"`heads[0]`", "`scales['a']`"}  # ReLU holds no tensor
    assert "nn.ModuleList" in problems["`heads[0]`"]
    assert "nn.ParameterList/Dict" in problems["`scales['a']`"]


def test_tensors_that_do_follow_the_module_are_not_reported() -> None:
    module = Tiny()
    module.rnn = nn.GRU(4, 4)  # keeps its parameters in a plain list, `_flat_weights`
    with pytest.warns(FutureWarning):
        module.norm = nn.utils.weight_norm(nn.Linear(4, 4))  # plain `weight`, rebuilt per call
    module.weights = [module.layer.weight]  # an alias of a registered parameter
    module.example_input_array = torch.rand(2, 4)  # Lightning moves it when it uses it
    module.names = ["a", "b"]
    module.cfg = OmegaConf.create({"dir": "${oc.env:NOT_SET_ANYWHERE}"})  # not read, not resolved
    assert find_device_problems(module) == []


def test_buffer_alias_and_hyperparameter_tensor_are_reported() -> None:
    module = PlainTensorAttribute()
    module.count_alias = module.count  # `.to()` replaces buffers: the alias keeps the old one
    module.save_hyperparameters({"class_weights": torch.ones(3), "lr": 0.1})
    problems = {p.split()[0]: p for p in find_device_problems(module)}
    assert set(problems) == {"`total`", "`count_alias`", "`hparams['class_weights']`"}
    assert 'register_buffer("class_weights"' in problems["`hparams['class_weights']`"]


# -- the callback in real Trainer runs ---------------------------------------------------------


def test_broken_module_fails_at_fit_start_before_any_step() -> None:
    module = PlainTensorAttribute()
    trainer = make_trainer(DeviceGuard())
    with pytest.raises(DevicePlacementError) as error:
        trainer.fit(module, loader(), loader())
    message = str(error.value)
    assert "`total` (a tensor on cpu)" in message
    assert 'self.register_buffer("total", ...)' in message
    assert module.steps == [] and trainer.global_step == 0  # not even the sanity check ran


@pytest.mark.parametrize("method", ["validate", "test", "predict"])
def test_broken_module_fails_before_validate_test_and_predict(method: str) -> None:
    module = ListOfTensors()
    with pytest.raises(DevicePlacementError, match=r"history\[0\]"):
        getattr(make_trainer(DeviceGuard()), method)(module, loader())
    assert module.steps == []


def test_guard_checks_once_per_run_and_never_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def counting(module: nn.Module) -> list[Any]:
        calls.append(type(module).__name__)
        return find_device_problems(module)

    monkeypatch.setattr(guard_callback, "find_device_problems", counting)
    module, trainer = Tiny(), make_trainer(DeviceGuard(), max_epochs=3)
    trainer.fit(module, loader(), loader())  # 12 training steps, 3 validation epochs + sanity
    assert trainer.global_step == 12 and len(calls) == 1
    trainer.validate(module, loader())
    trainer.test(module, loader())
    trainer.predict(module, loader())
    assert len(calls) == 4
    # No batch or epoch hook at all: only the four run-start hooks are overridden.
    overridden = {
        name
        for name, attr in vars(DeviceGuard).items()
        if name.startswith("on_") and attr is not getattr(Callback, name, None)
    }
    assert overridden == {
        "on_fit_start",
        "on_validation_start",
        "on_test_start",
        "on_predict_start",
    }


def test_docs_style_module_trains_with_the_guard_on() -> None:
    datamodule = LitDataModule(batch_size=64)
    model = docs_style_model()
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=1,
        limit_train_batches=3,
        limit_val_batches=1,
        callbacks=[DeviceGuard()],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=datamodule)
    assert trainer.global_step == 3


# -- the entry point ---------------------------------------------------------------------------


def test_default_callbacks_include_the_guard(tmp_path: Path) -> None:
    guard = compose_config(DOCS_STYLE, tmp_path).callbacks.device_guard
    assert guard._target_ == f"{DeviceGuard.__module__}.DeviceGuard"
    eval_cfg = compose_config(DOCS_STYLE[:1], tmp_path, config_name="eval")
    assert eval_cfg.callbacks.device_guard._target_ == guard._target_
    without = compose_config([*DOCS_STYLE, "~callbacks.device_guard"], tmp_path)
    assert "device_guard" not in without.callbacks


@pytest.mark.slow
def test_train_py_stops_a_broken_model_with_the_fix_and_writes_no_checkpoint(
    tmp_path: Path,
) -> None:
    target = f"{__name__}.BrokenClassifier"
    result = run_entry(
        "train", *DOCS_STYLE, *FAST, f"model._target_={target}", f"hydra.run.dir={tmp_path}"
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "`total` (a tensor on cpu)" in result.stderr
    assert 'register_buffer("total"' in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.slow
def test_ddp_stops_every_process_when_one_finds_a_problem(tmp_path: Path) -> None:
    """Two real gloo processes, only rank 1 broken. Without the vote, rank 0 dies at its next
    collective with a gloo "Connection closed by peer" traceback (with NCCL: hangs)."""
    result = run_entry(
        "train",
        *DOCS_STYLE,
        *FAST,
        "trainer.devices=2",
        "trainer.strategy=ddp",
        f"model._target_={__name__}.BrokenOnRankOneClassifier",
        f"hydra.run.dir={tmp_path}",
        timeout=300,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Another process found tensors of BrokenOnRankOneClassifier" in result.stderr  # rank 0
    assert "`total` (a tensor on cpu)" in result.stderr  # rank 1's own message
    assert not (tmp_path / "checkpoints").exists()
