"""Choosing devices and strategies: presets, clear errors, exact eval sampling, DDP child commands."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf, open_dict
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from my_project.machinery.distributed import is_rank_zero
from my_project.machinery.errors import UserError
from my_project.machinery.preflight.devices import check_devices
from my_project.machinery.strategies.ddp import hydra_job_command, unpadded

from .helpers import CONFIG_DIR, DOCS_STYLE, compose_config, run_entry


def check(**trainer: object) -> None:
    check_devices(OmegaConf.create(trainer))


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ("ddp", ("gpu", -1, "ddp")),
        ("dp", ("gpu", -1, "dp")),
        ("ddp_cpu", ("cpu", 2, "ddp")),
        ("cpu", ("cpu", 1, "auto")),
    ],
)
def test_trainer_presets(preset: str, expected: tuple, tmp_path: Path) -> None:
    trainer = compose_config([f"trainer={preset}"], tmp_path).trainer
    assert (trainer.accelerator, trainer.devices, trainer.strategy) == expected


def test_ddp_cpu_preset_and_two_devices_pass_the_checks_on_any_machine(tmp_path: Path) -> None:
    check_devices(compose_config(["trainer=ddp_cpu"], tmp_path).trainer)
    check(accelerator="cpu", devices=2, strategy="ddp_spawn")
    check(accelerator="cpu", devices=2, strategy="dp")
    check(accelerator="cpu", devices=-1)  # Lightning refuses it itself, in its own words


def test_dp_started_as_several_processes_says_to_start_it_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(UserError, match=r"started as 2 processes.*`trainer.strategy=ddp`"):
        check(accelerator="cpu", devices=2, strategy="dp")


def test_dp_on_several_nodes_explains_why_not() -> None:
    """Refused by the strategy itself while the Trainer is built (the boundary names the key)."""
    from lightning.pytorch import Trainer
    from lightning.pytorch.utilities.exceptions import MisconfigurationException

    from my_project.machinery.strategies.registry import register_strategies

    register_strategies()
    with pytest.raises(
        MisconfigurationException,
        match=r"one process on one machine.*strategy=ddp trainer.num_nodes=3",
    ):
        Trainer(strategy="dp", num_nodes=3, accelerator="cpu", devices=1, logger=False)


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message of a machine without GPUs"
)
def test_asking_for_a_gpu_without_one_says_what_to_type() -> None:
    with pytest.raises(UserError, match=r"has none.*`trainer=cpu`.*`trainer=ddp_cpu`"):
        check(accelerator="gpu", devices=2)


@pytest.mark.slow
def test_unknown_strategy_on_the_command_line_exits_2_before_writing(tmp_path: Path) -> None:
    result = run_entry(
        "train", *DOCS_STYLE, "trainer.strategy=nonsense", f"hydra.run.dir={tmp_path}"
    )
    assert result.returncode == 2
    assert "invalid strategy name: `strategy='nonsense'`" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "config.yaml").exists()


@pytest.mark.parametrize("size", [89, 3])
def test_eval_loaders_split_the_set_across_ranks_without_duplicates(size: int) -> None:
    """What the DDP strategy makes of the padding sampler Lightning gives an evaluation loader."""
    dataset = TensorDataset(torch.arange(size))
    seen: list[int] = []
    for rank in (0, 1):
        padded = DistributedSampler(dataset, num_replicas=2, rank=rank, shuffle=False)
        assert padded.total_size == size + 1  # Lightning's: one sample twice
        loader = unpadded(DataLoader(dataset, batch_size=32, sampler=padded))
        seen += [int(i) for (batch,) in loader for i in batch]
    assert sorted(seen) == list(range(size))


def test_training_loaders_and_tiny_sets_keep_their_sampler() -> None:
    dataset = TensorDataset(torch.arange(10))
    shuffled = DistributedSampler(dataset, num_replicas=2, rank=0, shuffle=True)
    train = DataLoader(dataset, sampler=shuffled)
    assert unpadded(train) is train  # training shards stay equal (padded) on purpose
    one = TensorDataset(torch.arange(1))
    tiny = DataLoader(one, sampler=DistributedSampler(one, num_replicas=2, rank=1, shuffle=False))
    assert unpadded(tiny) is tiny  # every rank must still get a batch


@pytest.fixture
def multirun_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Hydra's state inside job 1 of `train.py -m model.lr=0.003,0.01`."""
    from hydra import compose, initialize_config_dir

    job_dir = tmp_path / "sweep dir, with 'quotes'=1" / "1"
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[*DOCS_STYLE, "model.lr=0.01", "trainer.devices=2"],
            return_hydra_config=True,
        )
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(job_dir)
        cfg.hydra.runtime.cwd = str(tmp_path)
        cfg.hydra.overrides.hydra = [
            "hydra.mode=MULTIRUN",
            f"hydra.sweep.dir={tmp_path}",
            "hydra.verbose=true",
        ]
    monkeypatch.setattr(
        sys, "argv", ["train.py", "-m", "model.lr=0.003,0.01", "trainer.devices=2", "-cn", "train"]
    )
    HydraConfig.instance().set_config(cfg)
    yield job_dir
    HydraConfig.instance().cfg = None


def test_ddp_children_rerun_the_job_as_one_run_in_its_directory(multirun_job: Path) -> None:
    command, cwd = hydra_job_command()
    args = command[2:]
    assert cwd == str(multirun_job.parents[1])
    assert "-m" not in args and "--multirun" not in args
    assert "model.lr=0.01" in args and "model.lr=0.003,0.01" not in args
    assert "--config-name=train" in args and "hydra.verbose=true" in args
    # the parent's sweep settings stay behind; the child is a single run
    assert [a for a in args if a.startswith(("hydra.mode", "hydra.sweep"))] == ["hydra.mode=RUN"]
    assert "hydra.output_subdir=null" in args
    run_dir = next(a for a in args if a.startswith("hydra.run.dir="))
    assert OverridesParser.create().parse_override(run_dir).value() == str(multirun_job)


def test_rank_zero_is_read_from_every_launchers_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    assert is_rank_zero()
    for var in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"):
        monkeypatch.setenv(var, "1")
        assert not is_rank_zero(), var
        monkeypatch.setenv(var, "0")
    assert is_rank_zero()


def test_slurm_launcher_takes_nodes_and_tasks_from_the_trainer() -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                *DOCS_STYLE,
                "hydra/launcher=slurm",
                "trainer=ddp",
                "trainer.devices=4",
                "trainer.num_nodes=2",
            ],
            return_hydra_config=True,
        )
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.nodes, launcher.tasks_per_node, launcher.gpus_per_node) == (2, 4, 4)


def test_float16_is_refused_only_where_lightning_runs_another_precision() -> None:
    """`16` is Lightning's alias of `16-mixed`: on a GPU both run as asked."""
    from types import SimpleNamespace

    from lightning.pytorch.accelerators import CPUAccelerator, CUDAAccelerator

    from my_project.machinery.errors import UserError
    from my_project.machinery.preflight.devices import check_precision_kept

    on_gpu = SimpleNamespace(precision="16-mixed", accelerator=CUDAAccelerator())
    for asked in (16, "16", "16-mixed"):
        check_precision_kept(asked, on_gpu)
    on_cpu = SimpleNamespace(precision="bf16-mixed", accelerator=CPUAccelerator())
    for asked in (16, "16", "16-mixed"):
        with pytest.raises(UserError, match="does not run on CPU: it would train in bf16-mixed"):
            check_precision_kept(asked, on_cpu)
