"""`strategy="dp"`: registered, one process, any module's forward split, plain checkpoints.

On a CPU nothing can be split (torch's `data_parallel` is CUDA-only), so the split path is
tested with `data_parallel` emulated on CPU "devices": torch's own `replicate` (its broadcast
done by clones, which keep the gradients' way back to the root parameters), the batch chunked,
each replica run in a thread the way `parallel_apply` runs it, the outputs concatenated.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from lightning.pytorch.strategies import StrategyRegistry
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from torch import nn
from torch.nn.parallel import replicate

from my_project.machinery.devices.choice import run_record
from my_project.machinery.errors import report_user_errors
from my_project.machinery.run.train import train
from my_project.machinery.strategies.dp import ClassForward, DataParallelStrategy
from my_project.machinery.strategies.registry import register_strategies

from .docs_style import LitClassifier, LitDataModule
from .helpers import DOCS_STYLE, compose_config, read_metrics, run_entry

# Two short epochs on the CPU, the newest checkpoint kept, no wandb.
QUICK = [
    *DOCS_STYLE,
    "trainer.max_epochs=2",
    "+trainer.limit_train_batches=6",
    "logger=csv",
    "callbacks=last_checkpoint",
]


def fit(run_dir: Path, *overrides: str) -> tuple[dict[str, float], dict[str, Any]]:
    """Train in this process as `python train.py` would; return the metrics and last checkpoint."""
    run_dir.mkdir(parents=True, exist_ok=True)
    metrics = train(compose_config([*QUICK, *overrides], run_dir))
    return metrics, torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)


def test_dp_resolves_from_lightnings_registry() -> None:
    register_strategies()
    assert isinstance(StrategyRegistry.get("dp"), DataParallelStrategy)
    trainer = L.Trainer(strategy="dp", accelerator="cpu", devices=2, logger=False)
    assert isinstance(trainer.strategy, DataParallelStrategy)
    assert trainer.strategy.parallel_devices == [torch.device("cpu")] * 2
    assert (trainer.world_size, trainer.global_rank, trainer.num_devices) == (1, 0, 2)


def test_dp_on_cpu_records_the_one_device_that_ran() -> None:
    register_strategies()
    record = run_record(L.Trainer(strategy="dp", accelerator="cpu", devices=2, logger=False))
    assert (record["devices"], record["device_ids"], record["world_size"]) == (1, [0], 1)
    assert record["strategy"] == "DataParallelStrategy"


def test_dp_across_nodes_is_refused_with_the_reason() -> None:
    register_strategies()
    with pytest.raises(MisconfigurationException, match=r"cannot span 2 nodes.*strategy=ddp"):
        L.Trainer(strategy="dp", accelerator="cpu", devices=2, num_nodes=2, logger=False)


@pytest.fixture(scope="module")
def single_device(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    return fit(tmp_path_factory.mktemp("single"), "trainer.devices=1")


@pytest.mark.slow
def test_dp_on_cpu_gives_the_weights_and_metrics_of_one_device(
    single_device: tuple[dict, dict], tmp_path: Path
) -> None:
    with pytest.warns(UserWarning, match="nothing is split"):
        dp_metrics, dp_ckpt = fit(tmp_path, "trainer.strategy=dp", "trainer.devices=2")
    metrics, ckpt = single_device
    assert dp_metrics == metrics and metrics["test_acc"] > 0.5
    assert list(dp_ckpt["state_dict"]) == list(ckpt["state_dict"])
    for key, value in ckpt["state_dict"].items():
        assert torch.equal(dp_ckpt["state_dict"][key], value), key


@pytest.mark.slow
def test_dp_checkpoint_loads_in_a_run_without_dp(
    single_device: tuple[dict, dict], tmp_path: Path
) -> None:
    fit(tmp_path, "trainer.strategy=dp", "trainer.devices=2")
    model = LitClassifier.load_from_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert set(model.state_dict()) == set(single_device[1]["state_dict"])
    assert not any(key.startswith(("module.", "net.module.")) for key in model.state_dict())


class CPUDataParallel:
    """`torch.nn.parallel.data_parallel` on CPU "devices" (see the module docstring); records
    what it was given."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[nn.Module, int, int]] = []
        self.replicas: list[nn.Module] = []
        monkeypatch.setattr(
            sys.modules["torch.nn.parallel.replicate"],
            "_broadcast_coalesced_reshape",
            lambda tensors, devices, detach=False: [
                [t.detach().clone() if detach else t.clone() for t in tensors] for _ in devices
            ],
        )
        monkeypatch.setattr(DataParallelStrategy, "splits_batches", property(lambda self: True))
        monkeypatch.setattr(torch.nn.parallel, "data_parallel", self)

    def __call__(
        self, module: nn.Module, inputs: tuple, device_ids: list, output_device: Any, **kwargs: Any
    ) -> torch.Tensor:
        self.calls.append((module, len(device_ids), len(inputs[0])))
        chunks = list(zip(*(x.chunk(len(device_ids)) for x in inputs), strict=True))
        replicas = replicate(module, list(range(len(chunks))))
        self.replicas = replicas
        outputs: list[Any] = [None] * len(chunks)
        autocast = torch.is_autocast_enabled("cpu")

        def work(i: int) -> None:  # what parallel_apply's threads do
            with torch.autocast("cpu", enabled=autocast):
                outputs[i] = replicas[i](*chunks[i])

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(chunks))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return torch.cat(outputs)


@pytest.mark.slow
def test_dp_splits_any_modules_forward_and_gives_the_unsplit_results(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A team's module (nothing in it knows about dp): `data_parallel` gets a replica of the
    whole module's forward, every device and half batches; the steps, metrics and logging see
    whole batches once, so training ends where it ends on one device."""
    reference, reference_ckpt = fit(tmp_path / "reference")
    emulated = CPUDataParallel(monkeypatch)
    metrics, ckpt = fit(tmp_path / "dp", "trainer.strategy=dp", "trainer.devices=2")

    assert emulated.calls and all(devices == 2 for _, devices, _ in emulated.calls)
    assert {type(module) for module, _, _ in emulated.calls} == {ClassForward}
    assert {type(module.module).__name__ for module, _, _ in emulated.calls} == {"LitClassifier"}
    assert {type(r.module) for r in emulated.replicas} == {LitClassifier}
    assert max(batch for _, _, batch in emulated.calls) == 32
    assert metrics["test_acc"] == reference["test_acc"]
    assert metrics["test_loss"] == pytest.approx(reference["test_loss"], abs=1e-5)
    for key, value in reference_ckpt["state_dict"].items():
        torch.testing.assert_close(ckpt["state_dict"][key], value, rtol=1e-4, atol=1e-5)


class CallsItsLayersDirectly(LitClassifier):
    """A step that computes its outputs without `forward`: dp would split nothing."""

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)


def test_a_step_that_bypasses_forward_stops_dp_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    CPUDataParallel(monkeypatch)
    cfg = compose_config(
        [
            *QUICK,
            "trainer.strategy=dp",
            "trainer.devices=2",
            f"model._target_={__name__}.CallsItsLayersDirectly",
        ],
        tmp_path,
    )
    with pytest.raises(SystemExit) as exit_info:
        report_user_errors(train)(cfg)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "CallsItsLayersDirectly.training_step never called it" in err
    assert "`self(x)`" in err and "trainer.strategy=ddp" in err
    assert not (tmp_path / "checkpoints" / "last.ckpt").exists()


def _dtype_in_worker_thread(module: nn.Module, x: torch.Tensor) -> torch.dtype:
    """Run `module` the way parallel_apply's threads do: autocast re-entered with `enabled` only."""
    result: dict[str, torch.dtype] = {}

    def work() -> None:
        with torch.autocast("cpu", enabled=True):
            result["dtype"] = module(x).dtype

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return result["dtype"]


def test_replicas_keep_the_callers_autocast_dtype() -> None:
    x = torch.randn(3, 4)
    linear = nn.Linear(4, 4)
    # CPU autocast defaults to bfloat16; ask for float16 to see which one a worker thread uses.
    with torch.autocast("cpu", dtype=torch.float16):
        assert _dtype_in_worker_thread(linear, x) == torch.bfloat16  # dtype lost
        wrapped = ClassForward(linear)
        wrapped.autocast = ("cpu", torch.get_autocast_dtype("cpu"))
        assert _dtype_in_worker_thread(wrapped, x) == torch.float16


@pytest.mark.slow
def test_train_with_dp_on_two_devices_exits_0_with_metrics(tmp_path: Path) -> None:
    result = run_entry(
        "train",
        *DOCS_STYLE,
        "trainer.strategy=dp",
        "trainer.devices=2",
        "trainer.max_epochs=2",
        "logger=csv",
        f"hydra.run.dir={tmp_path}",
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "nothing is split" in result.stderr
    assert read_metrics(tmp_path)["test_acc"] > 0.5
    record = json.loads((tmp_path / "run_info.json").read_text())  # what ran: one CPU process
    assert (record["devices"], record["device_ids"], record["world_size"]) == (1, [0], 1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_dp_on_two_replicas_of_one_gpu_trains_like_one_gpu(precision: str) -> None:
    """Parallel devices [cuda:0, cuda:0]: data_parallel really splits, on any one-GPU machine."""

    def run(strategy: Any) -> tuple[float, set[torch.dtype]]:
        L.seed_everything(0)
        model = LitClassifier(num_features=16, num_classes=4)
        dtypes: set[torch.dtype] = set()
        model.net.register_forward_hook(lambda m, i, out: dtypes.add(out.dtype))
        trainer = L.Trainer(
            accelerator="gpu",
            devices=1,
            strategy=strategy,
            precision=precision,
            max_epochs=3,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
        )
        trainer.fit(model, datamodule=LitDataModule())
        trainer.test(model, datamodule=LitDataModule())
        return float(trainer.callback_metrics["test_acc"]), dtypes

    one_acc, _ = run("auto")
    dp_acc, dp_dtypes = run(DataParallelStrategy(parallel_devices=[torch.device("cuda", 0)] * 2))
    assert dp_acc == pytest.approx(one_acc, abs=0.03) and dp_acc > 0.6
    expected = torch.bfloat16 if precision == "bf16-mixed" else torch.float32
    assert dp_dtypes == {expected}
