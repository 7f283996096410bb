"""The example's speed: its step makes no host sync, `model.compile` keeps checkpoints
interchangeable, and its benchmark workloads (configs/bench.yaml) run."""

from __future__ import annotations

from pathlib import Path

import pytest
from lightning.pytorch import Trainer

from my_project.data.digits import DigitsDataModule
from my_project.machinery.run.build import instantiate_group, model_for_data

from ..machinery.helpers import compose_config
from ..machinery.host_syncs import CountHostSyncsInSteps
from .example import CLASSIFIER, TRAIN_CLASSIFIER


def test_the_classifiers_training_steps_make_no_host_sync(tmp_path: Path) -> None:
    """No `.item()`, no torchmetrics input check (`torch.unique`), no `self.log` per step."""
    cfg = compose_config([*TRAIN_CLASSIFIER, "logger=none"], tmp_path)
    watch = CountHostSyncsInSteps()
    trainer = Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        callbacks=[watch, *instantiate_group(cfg.callbacks)],
    )
    data = DigitsDataModule()
    trainer.fit(model_for_data(cfg, data), datamodule=data)
    assert watch.steps >= 15
    # every hook of every callback counted: the template's NaN check reads its flag every
    # `log_every_n_steps` (10) steps, never more often
    assert sum(1 for calls in watch.per_step if calls) <= watch.steps // 10 + 1, watch.per_step


@pytest.mark.slow
def test_compiled_model_keeps_checkpoint_keys(tmp_path: Path) -> None:
    def build(compile_: bool):
        cfg = compose_config([*CLASSIFIER, f"model.compile={str(compile_).lower()}"], tmp_path)
        return model_for_data(cfg, DigitsDataModule())

    compiled, plain = build(True), build(False)
    assert compiled.net._compiled_call_impl is not None and plain.net._compiled_call_impl is None
    assert compiled.state_dict().keys() == plain.state_dict().keys()
    plain.load_state_dict(compiled.state_dict())


@pytest.mark.parametrize(("workload", "batch_size"), [("mlp", 64), ("cnn", 128)])
def test_bench_workloads_of_the_example_run(
    workload: str, batch_size: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from my_project.machinery.bench import main

    result = main(
        [
            "--workload", workload, "--device", "cpu", "--steps", "3", "--warmup", "1",
            "--repeats", "1", "data.num_samples=300" if workload == "cnn" else "seed=1",
            "model=classifier",  # the workloads' network is the classifier's
        ]
    )  # fmt: skip
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"ratio {result['ratio']:.3f}"
    assert result["batch_size"] == batch_size and result["workload"] == workload
