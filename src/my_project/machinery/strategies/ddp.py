"""Lightning's DDP, its processes started correctly under Hydra (multirun included), with
evaluation that counts each sample once.

Lightning's launcher re-runs the script with the parent's command line (under ``-m`` each child
would start a sweep of its own) and leaves its environment and process group behind (the next
job of a multirun would wait forever). Here each child re-runs the *current job* in the same
directory, and when it ends the children are awaited and the process is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import warnings
from collections.abc import Sized
from typing import Any

import torch
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities.warnings import PossibleUserWarning
from torch.utils.data import DataLoader, DistributedSampler

from .. import lightning_compat as compat
from ..distributed import (
    LAUNCHER_PID,
    at_job_end,
    at_stop_while_blocked,
    hydra_quoted,
    meet_afresh_after_a_torchrun_restart,
    stop_signals_end_at_once,
)

_LAUNCH_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE")
# Hydra overrides of the parent's sweep, not of the job a child re-runs.
_SWEEP_ONLY: tuple[str, ...] = ("hydra.mode", "hydra.run.", "hydra.sweep.", "hydra.launcher")
_SWEEP_ONLY += ("hydra/launcher", "hydra.sweeper", "hydra/sweeper", "hydra.output_subdir")
_launched: dict[str, Any] | None = None  # what the launcher started and changed for this job


def hydra_job_command() -> tuple[list[str], str]:
    """The command (and working directory) that re-runs the current Hydra job as a single run."""
    from hydra.core.hydra_config import HydraConfig

    import __main__

    from ..hydra_compat import args_parser as get_args_parser

    hydra_cfg = HydraConfig.get()
    cwd = hydra_cfg.runtime.cwd  # where the user started the script
    if __main__.__spec__ is None:
        command = [sys.executable, os.path.join(cwd, sys.argv[0])]
    else:
        command = [sys.executable, "-m", __main__.__spec__.name]
    # The flags that chose the config (never -m), then this job's own overrides.
    args = vars(get_args_parser().parse_args(sys.argv[1:]))
    for flag in ("config_path", "config_name", "config_dir"):
        if args[flag] is not None:
            command.append(f"--{flag.replace('_', '-')}={args[flag]}")
    command += list(hydra_cfg.overrides.task)
    command += [o for o in hydra_cfg.overrides.hydra if not o.lstrip("+~").startswith(_SWEEP_ONLY)]
    quoted = hydra_quoted(hydra_cfg.runtime.output_dir)
    # RUN also overrides a `hydra.mode: MULTIRUN` of a config (hparams_search)
    command += ["hydra.mode=RUN", f"hydra.run.dir={quoted}", "hydra.output_subdir=null"]
    return command, cwd


def end_launched_job(succeeded: bool = True, timeout: float | None = None) -> None:
    """Wait for the processes this one launched (``timeout`` seconds; by default 300 after a
    job that succeeded, none after one that did not), kill those still running, close the
    process group and restore the environment: the next job of a multirun starts afresh."""
    global _launched
    job, _launched = _launched, None
    if job is None:
        return
    job["watched"].clear()  # Lightning's observer of the processes watches this list: it stops
    failed = []
    for rank, proc in enumerate(job["procs"], start=1):
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout if timeout is not None else 300.0 if succeeded else 0.0)
        proc.kill()  # nothing if it has exited
        if (code := proc.wait()) and succeeded:
            failed.append(f"rank {rank} exited with code {code}")
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    for key, value in job["env"].items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    torch.set_num_threads(job["threads"])
    if failed:
        raise RuntimeError(f"DDP processes of the run in {job['dir']} failed: {'; '.join(failed)}")


def _kill_launched(signum: int) -> None:
    """Stopped while the processes meet: those this one launched end with it, at once."""
    for proc in _launched["procs"] if _launched else []:
        proc.kill()


at_stop_while_blocked(_kill_launched)


class _HydraJobLauncher(compat.SubprocessScriptLauncher):
    """Lightning's subprocess launcher whose children re-run the current Hydra job."""

    def _call_children_scripts(self) -> None:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return super()._call_children_scripts()
        global _launched
        self._check_can_spawn_children()
        saved = {key: os.environ.get(key) for key in (*_LAUNCH_ENV, "OMP_NUM_THREADS")}
        _launched = {"dir": HydraConfig.get().runtime.output_dir, "env": saved, "procs": []}
        _launched |= {"watched": [], "threads": torch.get_num_threads()}
        at_job_end(end_launched_job)
        env = self.cluster_environment  # the variables Lightning's launcher sets
        world_size = self.num_processes * self.num_nodes
        values = (env.main_address, env.main_port, env.node_rank(), env.local_rank(), world_size)
        os.environ.update({key: str(value) for key, value in zip(_LAUNCH_ENV, values, strict=True)})
        command, cwd = hydra_job_command()
        for local_rank in range(1, self.num_processes):
            child = {**os.environ, LAUNCHER_PID: str(os.getpid()), "LOCAL_RANK": str(local_rank)}
            _launched["procs"].append(subprocess.Popen(command, env=child, cwd=cwd))
        self.procs = _launched["watched"] = list(_launched["procs"])  # what Lightning watches
        return None


class HydraDDPStrategy(DDPStrategy):
    """Lightning's DDPStrategy with the Hydra-aware launcher (start method ``popen``),
    unpadded evaluation loaders and exact means across processes."""

    def setup(self, trainer: Any) -> None:
        # Lightning warns that its evaluation sampler repeats samples; `process_dataloader`
        # replaces that sampler by one that does not.
        padding = r"Using `DistributedSampler` with the dataloaders\. During `trainer\.(test|val)"
        warnings.filterwarnings("ignore", message=padding, category=PossibleUserWarning)
        super().setup(trainer)

    def setup_distributed(self) -> None:
        """Meet the other processes; SIGTERM and Ctrl-C end this one at once meanwhile. torch
        waits for them in C++, where Python's handlers wait too: a launcher ending the run
        because another process stopped (torchrun, srun, after a refusal) would wait for as
        long as they (torchrun 30 s, SLURM's KillWait) and then kill it; nothing is lost, as
        nothing has trained."""
        with stop_signals_end_at_once():
            meet_afresh_after_a_torchrun_restart()
            super().setup_distributed()

    def reduce(self, tensor: Any, group: Any = None, reduce_op: Any = "mean") -> Any:
        """A mean of integers as floats: Lightning's truncates 44.5 to 44, so `self.log(...,
        sync_dist=True)` of unequal processes' sample counts would be off by up to 1/n
        (Lightning-AI/pytorch-lightning#21859)."""
        integer = isinstance(tensor, torch.Tensor) and not tensor.is_floating_point()
        if integer and reduce_op in ("mean", "avg"):
            tensor = tensor.to(torch.get_default_dtype())
        return super().reduce(tensor, group=group, reduce_op=reduce_op)

    def process_dataloader(self, dataloader: object) -> object:
        dataloader = super().process_dataloader(dataloader)
        trainer = self.lightning_module.trainer if self.lightning_module is not None else None
        if trainer is None or trainer.state.stage == RunningStage.TRAINING:
            return dataloader
        return unpadded(dataloader)

    def _configure_launcher(self) -> None:
        if compat.start_method(self) != "popen":
            return super()._configure_launcher()
        assert self.cluster_environment is not None
        launcher = _HydraJobLauncher(self.cluster_environment, self.num_processes, self.num_nodes)
        compat.set_launcher(self, launcher)
        return None


def unpadded(dataloader: object) -> object:
    """``dataloader`` with Lightning's evaluation ``DistributedSampler``, which repeats samples
    until the set divides by the world size (89 test samples on 2 processes scored as 90),
    replaced by one without repeats (torchmetrics sums every process's states). Anything else (a
    sampler of the user's own, an iterable set, fewer samples than processes) as it is."""
    sampler = getattr(dataloader, "sampler", None)
    if not isinstance(dataloader, DataLoader) or type(sampler) is not DistributedSampler:
        return dataloader
    dataset = dataloader.dataset
    if not isinstance(dataset, Sized) or len(dataset) < sampler.num_replicas:
        return dataloader
    if sampler.shuffle or sampler.drop_last:
        return dataloader
    exact = UnrepeatedDistributedSampler(
        dataset, num_replicas=sampler.num_replicas, rank=sampler.rank, shuffle=False
    )
    return compat.update_dataloader(dataloader, exact)
