"""`strategy="dp"`: registered, one process, only the network's forward split, plain checkpoints."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from lightning.pytorch.strategies import StrategyRegistry
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from torch import nn

from my_project.machinery.run.train import train
from my_project.machinery.strategies.dp import DataParallelStrategy, _AutocastReplica
from my_project.models.classifier import ImageClassifier

from .helpers import compose_config, read_metrics, run_entry

# Two short epochs on the CPU, the newest checkpoint kept, no wandb.
QUICK = [
    "trainer.max_epochs=2",
    "+trainer.limit_train_batches=6",
    "trainer.accelerator=cpu",
    "logger=csv",
    "callbacks=last_checkpoint",
]


def fit(run_dir: Path, *overrides: str) -> tuple[dict[str, float], dict[str, Any]]:
    """Train in this process as `python train.py` would; return the metrics and last checkpoint."""
    run_dir.mkdir(parents=True, exist_ok=True)
    metrics = train(compose_config([*QUICK, *overrides], run_dir))
    return metrics, torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)


def test_dp_resolves_from_lightnings_registry() -> None:
    assert isinstance(StrategyRegistry.get("dp"), DataParallelStrategy)
    trainer = L.Trainer(strategy="dp", accelerator="cpu", devices=2, logger=False)
    assert isinstance(trainer.strategy, DataParallelStrategy)
    assert trainer.strategy.parallel_devices == [torch.device("cpu")] * 2
    assert (trainer.world_size, trainer.global_rank, trainer.num_devices) == (1, 0, 2)


def test_dp_across_nodes_is_refused_with_the_reason() -> None:
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
    assert dp_metrics == metrics and metrics["test/acc"] > 0.5
    assert list(dp_ckpt["state_dict"]) == list(ckpt["state_dict"])
    for key, value in ckpt["state_dict"].items():
        assert torch.equal(dp_ckpt["state_dict"][key], value), key


@pytest.mark.slow
def test_dp_checkpoint_loads_in_a_run_without_dp(
    single_device: tuple[dict, dict], tmp_path: Path
) -> None:
    fit(tmp_path, "trainer.strategy=dp", "trainer.devices=2")
    model = ImageClassifier.load_from_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert set(model.state_dict()) == set(single_device[1]["state_dict"])
    assert not any(key.startswith(("module.", "net.module.")) for key in model.state_dict())


@pytest.mark.slow
def test_dp_splits_only_the_networks_forward(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With splitting forced on (the CPU cannot split), `data_parallel` gets the network alone,
    every device, and half batches; steps and metrics still see whole batches once."""
    calls: list[tuple[nn.Module, int, int]] = []

    def fake_data_parallel(module, inputs, device_ids, output_device):  # what torch does, on CPU
        calls.append((module, len(device_ids), len(inputs[0])))
        halves = zip(*(x.chunk(len(device_ids)) for x in inputs), strict=True)
        return torch.cat([module(*half) for half in halves])

    no_dropout = "model.net.dropout=0.0"
    reference, _ = fit(tmp_path / "reference", no_dropout)
    monkeypatch.setattr(DataParallelStrategy, "splits_batches", property(lambda self: True))
    monkeypatch.setattr(torch.nn.parallel, "data_parallel", fake_data_parallel)
    metrics, _ = fit(tmp_path / "dp", no_dropout, "trainer.strategy=dp", "trainer.devices=2")

    assert calls and all(devices == 2 for _, devices, _ in calls)
    assert {type(module).__name__ for module, _, _ in calls} == {"MLP"}
    assert max(batch for _, _, batch in calls) == 64
    assert metrics["test/acc"] == reference["test/acc"]
    assert metrics["test/loss"] == pytest.approx(reference["test/loss"], abs=1e-5)


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
    # CPU autocast defaults to bfloat16; ask for float16 to see which one a worker thread uses.
    with torch.autocast("cpu", dtype=torch.float16):
        assert _dtype_in_worker_thread(nn.Linear(4, 4), x) == torch.bfloat16  # dtype lost
        wrapped = _AutocastReplica(nn.Linear(4, 4), "cpu", torch.get_autocast_dtype("cpu"))
        assert _dtype_in_worker_thread(wrapped, x) == torch.float16


@pytest.mark.slow
def test_train_with_dp_on_two_devices_exits_0_with_metrics(tmp_path: Path) -> None:
    result = run_entry(
        "train",
        "trainer.strategy=dp",
        "trainer.devices=2",
        "trainer.max_epochs=2",
        "logger=csv",
        f"hydra.run.dir={tmp_path}",
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "nothing is split" in result.stderr
    assert read_metrics(tmp_path)["test/acc"] > 0.5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_dp_on_two_replicas_of_one_gpu_trains_like_one_gpu(precision: str, tmp_path: Path) -> None:
    """Parallel devices [cuda:0, cuda:0]: data_parallel really splits, on any one-GPU machine."""
    cfg = compose_config([*QUICK, "trainer.accelerator=gpu", "model.net.dropout=0.0"], tmp_path)
    from hydra.utils import instantiate

    def run(strategy: Any) -> tuple[float, set[torch.dtype]]:
        L.seed_everything(0)
        data = instantiate(cfg.data)
        model = instantiate(cfg.model, num_classes=10, image_shape=[1, 8, 8], _convert_="all")
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
        trainer.fit(model, datamodule=data)
        trainer.test(model, datamodule=data)
        return float(trainer.callback_metrics["test/acc"]), dtypes

    one_acc, _ = run("auto")
    dp_acc, dp_dtypes = run(DataParallelStrategy(parallel_devices=[torch.device("cuda", 0)] * 2))
    assert dp_acc == pytest.approx(one_acc, abs=0.03) and dp_acc > 0.8
    expected = torch.bfloat16 if precision == "bf16-mixed" else torch.float32
    assert dp_dtypes == {expected}
