"""The device guard stops a run only where a tensor the model holds, which Lightning does not
move, meets the model's own on another device; it names the tensor and fixes that work.

On a CPU two stand-ins show what a GPU run meets: the model moved to `meta` (its steps called
inside `watch_devices`, as a team's own tests would), and, in real Trainer runs, a tensor made
on `meta` left in a CPU model (torch refuses both devices in one operation, as on a GPU).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from lightning.pytorch import Callback, LightningModule, Trainer
from omegaconf import OmegaConf
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics import MeanMetric, MetricCollection, SumMetric
from torchmetrics.classification import MulticlassAccuracy

from my_project.machinery.callbacks import device_guard as guard_callback
from my_project.machinery.callbacks.device_guard import DeviceGuard
from my_project.machinery.devices.guard import DevicePlacementError, watch_devices
from my_project.machinery.errors import UserError

from . import processes
from .docs_style import LitClassifier
from .helpers import (
    CONFIG_DIR,
    DOCS_STYLE,
    FAST,
    ROOT,
    clean_env,
    compose_config,
    pinned,
    run_entry,
)

# -- modules: each holds or uses a tensor one way ----------------------------------------------


class Tiny(LightningModule):
    """A small classifier; subclasses hold or use one tensor their own way (`extra`)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 3)
        self.loss = MeanMetric()
        self.steps: list[str] = []  # which steps ran (strings, not tensors)

    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits, y)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        self.steps.append("train")
        x, y = batch
        loss = self.extra(x, self.layer(x), y)
        self.loss.update(loss.detach())
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.steps.append("val")

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.steps.append("test")
        x, y = batch
        self.extra(x, self.layer(x), y)

    def predict_step(self, batch: Any, batch_idx: int) -> Tensor:
        self.steps.append("predict")
        x, y = batch
        return self.extra(x, self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class WeightsAsMade(Tiny):
    """Class weights computed in `setup`, kept as a plain attribute and used as they are."""

    def setup(self, stage: str) -> None:
        self.class_weights = torch.tensor([1.0, 2.0, 3.0])

    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits, y, weight=self.class_weights)


class WeightsMovedWhereUsed(WeightsAsMade):
    """The same, moved where used: correct, on any device."""

    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits, y, weight=self.class_weights.to(self.device))


class WeightsRegistered(WeightsAsMade):
    """The guard's first fix: a buffer, registered where the tensor is made (here `setup`)."""

    def setup(self, stage: str) -> None:
        self.register_buffer("class_weights", torch.tensor([1.0, 2.0, 3.0]))


class WeightsDoubled(WeightsAsMade):
    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits, y, weight=self.class_weights * 2)


class RunningTotal(Tiny):
    def __init__(self) -> None:
        super().__init__()
        self.total = torch.tensor(0.0)

    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        loss = F.cross_entropy(logits, y)
        self.total += loss.detach()
        return loss


class RunningTotalAsBuffer(RunningTotal):
    def __init__(self) -> None:
        super().__init__()
        del self.total
        self.register_buffer("total", torch.tensor(0.0))


class RunningTotalAsMetric(RunningTotal):
    """The other fix for a running total: a torchmetrics metric (its states follow the model)."""

    def __init__(self) -> None:
        super().__init__()
        del self.total
        self.total = SumMetric()

    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        loss = F.cross_entropy(logits, y)
        self.total.update(loss.detach())
        return loss


class ListOfTensors(Tiny):
    def __init__(self) -> None:
        super().__init__()
        self.offsets = [torch.zeros(3), torch.ones(3)]

    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits + self.offsets[1], y)


class ListOfTensorsStacked(ListOfTensors):
    def __init__(self) -> None:
        super().__init__()
        offsets = self.offsets
        del self.offsets
        self.register_buffer("offsets", torch.stack(offsets))


class ListOfTensorsMovedWhereUsed(ListOfTensors):
    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits + self.offsets[1].to(self.device), y)


class DictOfMetrics(Tiny):
    def __init__(self) -> None:
        super().__init__()
        self.metrics = {"acc": MulticlassAccuracy(num_classes=3)}

    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        self.metrics["acc"].update(logits, y)
        return F.cross_entropy(logits, y)


class MetricCollectionOfMetrics(DictOfMetrics):
    def __init__(self) -> None:
        super().__init__()
        self.metrics = MetricCollection({"acc": MulticlassAccuracy(num_classes=3)})


class ListOfHeads(Tiny):
    def __init__(self) -> None:
        super().__init__()
        self.heads = [nn.Linear(4, 3)]

    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits + self.heads[0](x), y)


class ModuleListOfHeads(ListOfHeads):
    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(4, 3)])


class HyperparameterTensor(Tiny):
    def __init__(self) -> None:
        super().__init__()
        self.save_hyperparameters({"class_weights": torch.tensor([1.0, 2.0, 3.0])})

    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits, y, weight=self.hparams["class_weights"])


class HyperparameterRegistered(HyperparameterTensor):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("class_weights", self.hparams["class_weights"])

    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits, y, weight=self.class_weights)


class MadeInTheStep(Tiny):
    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits, y, weight=torch.tensor([1.0, 2.0, 3.0]))


class MadeOnTheModelsDevice(Tiny):
    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits, y, weight=torch.tensor([1.0, 2.0, 3.0], device=self.device))


class TorchAllowsAcrossDevices(Tiny):
    """Tensors left behind, used where torch takes any device: a 0-dim scalar, a CPU index, a
    `type_as` move; tensors that do follow (a GRU's flat weights, weight_norm's, an alias of
    a parameter, `example_input_array`), and a config that is never resolved."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.tensor(0.5)
        self.order = torch.tensor([2, 0, 1])
        self.bias = torch.zeros(3)
        self.rnn = nn.GRU(4, 4)
        with pytest.warns(FutureWarning):
            self.norm = nn.utils.weight_norm(nn.Linear(4, 4))
        self.weights = [self.layer.weight]
        self.example_input_array = torch.rand(2, 4)
        self.cfg = OmegaConf.create({"dir": "${oc.env:NOT_SET_ANYWHERE}"})

    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        logits = logits[:, self.order] * self.scale + self.bias.type_as(logits)
        hidden = self.rnn(self.norm(x)[None])[0][0]
        return F.cross_entropy(logits + hidden[:, :3] + self.weights[0].sum(), y)


# Each module that uses a tensor left behind, the name the guard gives it, and the fixes it
# offers, written: every one of them passes.
FIXED = {
    WeightsAsMade: ("class_weights", [WeightsRegistered, WeightsMovedWhereUsed]),
    RunningTotal: ("total", [RunningTotalAsBuffer, RunningTotalAsMetric]),
    ListOfTensors: ("offsets[1]", [ListOfTensorsStacked, ListOfTensorsMovedWhereUsed]),
    DictOfMetrics: ("metrics['acc']", [MetricCollectionOfMetrics]),
    ListOfHeads: ("heads[0]", [ModuleListOfHeads]),
    HyperparameterTensor: ("hparams['class_weights']", [HyperparameterRegistered]),
    MadeInTheStep: ("made in the step", [MadeOnTheModelsDevice]),
}


def batch(device: str = "cpu", n: int = 8) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, 4, generator=generator), torch.randint(0, 3, (n,), generator=generator)
    return x.to(device), y.to(device)


def step_on_meta(module: Tiny) -> None:
    """A training step of ``module`` moved to `meta`, watched: what a GPU run would meet."""
    module.setup("fit")
    module.to("meta")
    with watch_devices(module, "training_step"):
        module.training_step(batch("meta"), 0)


def loader(n: int = 16) -> DataLoader:
    return DataLoader(TensorDataset(*batch(n=n)), batch_size=4)


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


# -- the watch, on `meta` ------------------------------------------------------------------------


@pytest.mark.parametrize("broken", list(FIXED), ids=lambda cls: cls.__name__)
def test_a_tensor_left_behind_is_named_where_it_meets_the_models(broken: type[Tiny]) -> None:
    name, _ = FIXED[broken]
    with pytest.raises(DevicePlacementError) as error:
        step_on_meta(broken())
    message = str(error.value)
    assert f"{broken.__name__}'s training_step met tensors that did not follow the model to meta"
    assert name in message, message
    assert f"{Path(__file__).name}:" in message  # the team's line, in the team's file
    assert issubclass(DevicePlacementError, UserError)  # train.py: one paragraph, exit 2


@pytest.mark.parametrize(
    "fixed", [fix for _, fixes in FIXED.values() for fix in fixes], ids=lambda cls: cls.__name__
)
def test_every_fix_the_guard_offers_passes(fixed: type[Tiny]) -> None:
    step_on_meta(fixed())


def test_the_fixes_offered_are_the_ones_that_pass() -> None:
    messages = {}
    for broken in (WeightsAsMade, RunningTotal, ListOfTensors, DictOfMetrics, HyperparameterTensor):
        with pytest.raises(DevicePlacementError) as error:
            step_on_meta(broken())
        messages[broken] = str(error.value)
    assert (
        'self.register_buffer("class_weights", ...)` where it is made, in __init__ or setup'
        in (messages[WeightsAsMade])
    )
    assert "`self.class_weights.to(self.device)`" in messages[WeightsAsMade]
    assert "SumMetric" in messages[RunningTotal]
    assert 'register_buffer("offsets", torch.stack(...))' in messages[ListOfTensors]
    assert "`self.offsets[1].to(self.device)`" in messages[ListOfTensors]
    assert "(a MulticlassAccuracy in a plain list or dict, on cpu)" in messages[DictOfMetrics]
    assert "MetricCollection" in messages[DictOfMetrics]
    assert "use `self.class_weights`" in messages[HyperparameterTensor]


def test_a_tensor_computed_from_one_left_behind_is_named_by_it() -> None:
    with pytest.raises(DevicePlacementError, match=r"computed from `class_weights`"):
        step_on_meta(WeightsDoubled())


def test_tensors_used_as_torch_allows_across_devices_pass() -> None:
    step_on_meta(TorchAllowsAcrossDevices())


def test_the_docs_style_module_passes_every_step_on_meta() -> None:
    model = LitClassifier(num_features=4, num_classes=3).to("meta")
    with watch_devices(model):
        model.training_step(batch("meta"), 0)
        model.validation_step(batch("meta"), 0)
        model.test_step(batch("meta"), 0)


# -- the callback in real Trainer runs (a tensor on `meta` in a CPU model) ----------------------


class LeftOnMeta(Tiny):
    """Class weights on `meta` in a CPU model: torch refuses them as a GPU refuses a CPU
    tensor. Used by the training, test and predict steps (not by validation)."""

    def __init__(self) -> None:
        super().__init__()
        self.class_weights = torch.ones(3, device="meta")

    def extra(self, x: Tensor, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits, y, weight=self.class_weights)


def test_a_correct_module_that_moves_its_tensor_trains_with_the_guard_on() -> None:
    module, trainer = WeightsMovedWhereUsed(), make_trainer(DeviceGuard(), max_epochs=2)
    trainer.fit(module, loader(), loader())
    assert trainer.global_step == 8
    assert "training_step" not in vars(module)  # the watch is gone after the first batch


def test_fit_stops_after_the_first_batch_naming_the_tensor() -> None:
    module = LeftOnMeta()
    trainer = make_trainer(DeviceGuard(), max_epochs=3)
    with pytest.raises(DevicePlacementError) as error:
        trainer.fit(module, loader(), loader())
    message = str(error.value)
    assert "LeftOnMeta's training_step met tensors that did not follow the model to cpu" in message
    assert "`class_weights` (a tensor, on meta), in `cross_entropy` at " in message
    assert f"{Path(__file__).name}:" in message
    assert module.steps.count("train") == 1  # stopped after the first batch
    assert "training_step" not in vars(module)


@pytest.mark.parametrize("method", ["test", "predict"])
def test_test_and_predict_stop_after_their_first_batch(method: str) -> None:
    module = LeftOnMeta()
    with pytest.raises(DevicePlacementError, match=r"`class_weights` \(a tensor, on meta\)"):
        getattr(make_trainer(DeviceGuard()), method)(module, loader())
    assert module.steps == [method]


def test_guard_watches_the_first_batch_of_each_stage_only(monkeypatch: pytest.MonkeyPatch) -> None:
    watches: list[str] = []

    class Counting(guard_callback.DeviceWatch):
        def __init__(self, module: nn.Module) -> None:
            watches.append(type(module).__name__)
            super().__init__(module)

    monkeypatch.setattr(guard_callback, "DeviceWatch", Counting)
    module, trainer = Tiny(), make_trainer(DeviceGuard(), max_epochs=3)
    trainer.fit(module, loader(), loader())  # 12 training steps, 3 validations + sanity check
    assert trainer.global_step == 12 and len(watches) == 2  # training_step, validation_step
    trainer.validate(module, loader())
    trainer.test(module, loader())
    trainer.predict(module, loader())
    assert len(watches) == 5
    assert not {"training_step", "validation_step", "test_step", "predict_step"} & set(vars(module))


# -- the entry points ----------------------------------------------------------------------------


class BrokenClassifier(LitClassifier):
    """A team's docs-style classifier whose training loss weighs classes with a tensor on
    `meta` (a CPU run's stand-in for a tensor left on the CPU of a GPU run)."""

    def setup(self, stage: str) -> None:
        self.class_weights = torch.ones(self.hparams.num_classes, device="meta")

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y, weight=self.class_weights)


class BrokenOnRankOneClassifier(BrokenClassifier):
    """Broken in the second DDP process only: the first must stop too, not wait forever."""

    def setup(self, stage: str) -> None:
        device = "meta" if os.environ.get("LOCAL_RANK", "0") == "1" else "cpu"
        self.class_weights = torch.ones(self.hparams.num_classes, device=device)


def test_default_callbacks_include_the_guard(tmp_path: Path) -> None:
    guard = compose_config(DOCS_STYLE, tmp_path).callbacks.device_guard
    assert guard._target_ == f"{DeviceGuard.__module__}.DeviceGuard"
    eval_cfg = compose_config(DOCS_STYLE[:1], tmp_path, config_name="eval")
    assert eval_cfg.callbacks.device_guard._target_ == guard._target_
    without = compose_config([*DOCS_STYLE, "~callbacks.device_guard"], tmp_path)
    assert "device_guard" not in without.callbacks


@pytest.mark.parametrize("typed", [[], ["callbacks=[device_guard,whole_metrics]"]])
def test_a_runs_opt_out_of_the_guard_is_kept_by_eval(
    tmp_path: Path, typed: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """eval.py of a checkpoint whose run had `~callbacks.device_guard` runs without it too,
    saying so; naming the callbacks on eval's command line chooses them."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from my_project.machinery.run.checkpoint_config import use_checkpoint_run

    run = tmp_path / "run"
    trained = compose_config([*DOCS_STYLE, "~callbacks.device_guard"], run)
    (run / "checkpoints").mkdir(parents=True)
    OmegaConf.save(OmegaConf.to_container(trained, resolve=True), run / "config.yaml")
    ckpt = run / "checkpoints" / "last.ckpt"
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        overrides = pinned([f"ckpt_path={ckpt}", *typed])
        cfg = compose("eval", overrides=overrides, return_hydra_config=True)
    HydraConfig().set_config(cfg)
    try:
        use_checkpoint_run(cfg, str(ckpt))
    finally:
        HydraConfig.instance().cfg = None  # type: ignore[assignment]
    assert ("device_guard" in cfg.callbacks) == bool(typed)
    assert "whole_metrics" in cfg.callbacks  # what the advice types keeps DDP's whole metrics
    said = "Callbacks: without device_guard, as the run that wrote the checkpoint trained"
    assert (said in capsys.readouterr().out) != bool(typed)


@pytest.mark.slow
def test_train_py_stops_a_broken_model_with_the_fix_and_writes_no_checkpoint(
    tmp_path: Path,
) -> None:
    target = f"{__name__}.BrokenClassifier"
    result = run_entry(
        "train", *DOCS_STYLE, *FAST, f"model._target_={target}", f"hydra.run.dir={tmp_path}"
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "`class_weights` (a tensor, on meta), in `cross_entropy` at " in result.stderr
    assert 'register_buffer("class_weights"' in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("checkpoints/*.ckpt"))


@pytest.mark.slow
def test_the_benchmark_stops_a_broken_model_as_train_does() -> None:
    """`python -m ...bench --workload none ...`: the same paragraph and exit status as train.py."""
    bench = [sys.executable, "-m", f"{guard_callback.__name__.split('.')[0]}.machinery.bench"]
    bench += ["--workload", "none"]
    steps = ["--steps", "2", "--warmup", "1", "--repeats", "1"]
    target = f"model._target_={__name__}.BrokenClassifier"
    result = processes.run([*bench, *DOCS_STYLE, target, *steps], ROOT, clean_env(), 300)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "`class_weights` (a tensor, on meta), in `cross_entropy` at " in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_ddp_stops_every_process_when_one_finds_a_problem(tmp_path: Path) -> None:
    """Two real gloo processes, only rank 1 broken: it finishes its first batch with the tensor
    moved, and both stop there together. Without the vote, rank 0 dies at its next collective
    with a gloo "Connection closed by peer" traceback (with NCCL: hangs)."""
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
    assert "`class_weights` (a tensor, on meta)" in result.stderr  # rank 1's own message
    assert not list(tmp_path.glob("checkpoints/*.ckpt"))
