"""What the devices a run asks for need of this machine, said before the run starts.

What Lightning says without naming what to run instead (a GPU this machine lacks, as a project
generated for GPUs meets on a laptop), or lets through: several nodes with nothing that starts
the others (they would wait forever), a ``MASTER_PORT`` the processes cannot meet at.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Mapping
from typing import Any

from ..errors import UserError


def check_devices(trainer: Mapping[str, Any]) -> None:
    """A GPU asked for (``accelerator=gpu``, ``cuda``, ``mps``, or every GPU: ``devices=-1``)
    where there is none: named with the preset that runs here. And `dp`, one process, started
    as several (by torchrun): each would run the whole job on its own."""
    import torch

    launched = os.environ.get("WORLD_SIZE", "1")
    if str(trainer.get("strategy")).lower() == "dp" and launched.isdigit() and int(launched) > 1:
        raise UserError(
            f"strategy 'dp' runs as one process, but this run was started as {launched} "
            "processes (WORLD_SIZE, e.g. by torchrun). Start it once (`python train.py "
            "trainer.strategy=dp`), or keep the launcher and use `trainer.strategy=ddp`."
        )
    asked = str(trainer.get("accelerator", "auto")).lower()
    cuda, mps = torch.cuda.is_available(), torch.backends.mps.is_available()
    if asked == "auto" and trainer.get("devices") == -1 and not (cuda or mps):
        what = "trainer.devices=-1 asks for every GPU"
    elif {"cuda": not cuda, "mps": not mps, "gpu": not (cuda or mps)}.get(asked):
        what = (
            f"trainer.accelerator={asked} asks for {'Apple silicon' if asked == 'mps' else 'a GPU'}"
        )
    else:
        check_gpu_count(trainer, asked, torch.cuda.device_count() if cuda else 0)
        return
    raise UserError(
        f"{what}, but this machine has none: run on the CPU with `trainer=cpu` (or "
        "`trainer=ddp_cpu` for two CPU processes)."
    )


def check_gpu_count(trainer: Mapping[str, Any], asked: str, gpus: int) -> None:
    """More CUDA GPUs asked for (``devices=4``, ``devices=[0,3]``) than this machine has."""
    devices = trainer.get("devices", "auto")
    if asked not in ("gpu", "cuda", "auto") or not gpus or isinstance(devices, bool):
        return
    if isinstance(devices, str) and devices.strip().lstrip("-").isdigit():
        devices = int(devices)
    if isinstance(devices, int):
        wanted, highest = devices, devices - 1
    elif isinstance(devices, (list, tuple)) or (isinstance(devices, str) and "," in devices):
        ids = [
            int(i)
            for i in (devices.split(",") if isinstance(devices, str) else devices)
            if str(i).strip()
        ]
        wanted, highest = len(ids), max(ids, default=-1)
    else:
        return
    if wanted <= gpus and highest < gpus:
        return
    what = f"{wanted} GPUs" if wanted > gpus else f"GPU {highest} (GPUs are counted from 0)"
    raise UserError(
        f"trainer.devices={devices} asks for {what}, but this machine has {gpus}: use "
        f"`trainer.devices={gpus}` (or `trainer.devices=-1` for all of them), or run on several "
        "machines (`trainer.num_nodes`, with torchrun or SLURM)."
    )


def multi_node_launcher() -> str | None:
    """The name of what started this process as one of several nodes, if anything did: a cluster
    scheduler or launcher Lightning detects, or the variables Lightning's docs have you set on
    each node to start them by hand."""
    from lightning.fabric.plugins.environments import (
        LSFEnvironment,
        SLURMEnvironment,
        TorchElasticEnvironment,
    )

    for environment in (SLURMEnvironment, TorchElasticEnvironment, LSFEnvironment):
        with contextlib.suppress(Exception), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SLURM's "srun is available" hint (`quiet_srun_hint`)
            if environment.detect():  # LSF's reads files that may be missing
                return environment.__name__
    by_hand = any(name in os.environ for name in ("NODE_RANK", "GROUP_RANK", "RANK"))
    return "MASTER_ADDR and a rank" if by_hand and "MASTER_ADDR" in os.environ else None


def check_nodes_launched(trainer: Mapping[str, Any]) -> None:
    """Several nodes, and something started this process as one of them; under SLURM, the
    tasks of the job as Lightning will count them (`check_slurm_tasks`)."""
    check_slurm_tasks(trainer)
    nodes = trainer.get("num_nodes", 1)
    if not isinstance(nodes, int) or nodes <= 1 or multi_node_launcher() is not None:
        return
    raise UserError(
        f"trainer.num_nodes={nodes} asks for {nodes} machines, but nothing started this process "
        "as one of them (no torchrun, SLURM or LSF, and no NODE_RANK and MASTER_ADDR set): it "
        "would wait forever for the other nodes to join. Run on one machine with "
        "`trainer.num_nodes=1`, or start the run on every node (torchrun, or "
        "`-m hydra/launcher=slurm` on a SLURM cluster)."
    )


def slurm_tasks() -> int | None:
    """The tasks of this SLURM job when Lightning takes it as the cluster (its own test: a job
    not named `bash` or `interactive`), and torchrun does not start the processes."""
    tasks = os.environ.get("SLURM_NTASKS", "")
    interactive = os.environ.get("SLURM_JOB_NAME") in ("bash", "interactive")
    if not tasks.isdigit() or interactive or "TORCHELASTIC_RUN_ID" in os.environ:
        return None
    return int(tasks)


def check_slurm_tasks(trainer: Mapping[str, Any]) -> None:
    """Lightning runs one process per SLURM task and takes their layout from the job: what it
    would stop at (or wait forever for), said as the fix of the sbatch script it comes from."""
    tasks = slurm_tasks()
    if tasks is None:
        return
    per_node = os.environ.get("SLURM_NTASKS_PER_NODE")
    if tasks > 1 and per_node is None:
        raise UserError(
            f"This SLURM job has {tasks} tasks (`#SBATCH --ntasks={tasks}` or `-n {tasks}`) but no "
            "`--ntasks-per-node`, and Lightning takes the number of processes on each node "
            "from it. Fix the sbatch script: replace `--ntasks` by `#SBATCH --nodes=1` and "
            f"`#SBATCH --ntasks-per-node={tasks}` (one task per device: trainer.devices)."
        )
    if tasks > 1 and "SLURM_STEP_ID" not in os.environ:
        raise UserError(
            f"This SLURM job has {tasks} tasks, but this process was not started by srun: it is "
            "one process, and would wait forever for the others. Fix the sbatch "
            "script: start the run with `srun python train.py ...`, which starts a process "
            "per task."
        )
    devices, nodes = trainer.get("devices"), trainer.get("num_nodes", 1)
    job_nodes = os.environ.get("SLURM_NNODES", "1")
    for value, key, job, option in (
        (devices, "trainer.devices", per_node, "--ntasks-per-node"),
        (nodes, "trainer.num_nodes", job_nodes, "--nodes"),
    ):
        if isinstance(value, int) and job and job.isdigit() and value != int(job):
            raise UserError(
                f"{key}={value}, but this SLURM job has `{option}={job}`, and Lightning runs one "
                f"process per SLURM task. Make them equal: `{key}={job}`, or `#SBATCH "
                f"{option}={value}` in the sbatch script."
            )


SRUN_HINT = "The `srun` command is available on your system"


def quiet_srun_hint() -> None:
    """Lightning warns on any machine where `srun` exists and this process is not a SLURM
    task (a login node: every eval, predict, serve, export), repeating the whole command line
    as its hint, secrets typed there included. What it warns of, a run of several processes
    or nodes that no launcher started, is refused with the fix (`check_nodes_launched`). Here
    and in the processes this one starts (serve's workers start afresh: PYTHONWARNINGS)."""
    warnings.filterwarnings("ignore", re.escape(SRUN_HINT))
    inherited = os.environ.get("PYTHONWARNINGS", "")
    if SRUN_HINT not in inherited:
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, (inherited, f"ignore:{SRUN_HINT}")))


def check_launch_environment(trainer: Any) -> None:
    """The port the processes of a multi-process run meet at (a bad one fails when the launcher
    starts, after the run directory is written). Only the built Trainer knows their number."""
    port = os.environ.get("MASTER_PORT", "1")
    if trainer.world_size > 1 and not (port.isdigit() and 0 < int(port) < 65536):
        raise UserError(
            f"This run starts {trainer.world_size} processes, which meet at MASTER_ADDR:"
            f"MASTER_PORT, but MASTER_PORT={port!r} is not a TCP port (a whole number 1-65535). "
            "Fix it, or unset it (`unset MASTER_PORT`: a free port is picked)."
        )


def check_precision_kept(asked: Any, trainer: Any) -> None:
    """float16 autocast asked for where Lightning only warns and runs bfloat16 (on the CPU)."""
    if str(asked) in ("16", "16-mixed") and str(trainer.precision) != "16-mixed":  # 16: its alias
        raise UserError(
            f"trainer.precision={asked} asks for float16 autocast, which Lightning does not run "
            f"on {type(trainer.accelerator).__name__.removesuffix('Accelerator')}: it would "
            f"train in {trainer.precision} instead. Use `trainer.precision=bf16-mixed` (or "
            "`32-true`) here, or run on a GPU (`trainer=gpu`)."
        )
