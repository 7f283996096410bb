"""DDP that starts its extra processes correctly under Hydra, multirun (`-m`) included.

Lightning's `ddp` (and `strategy="auto"` with several devices) re-runs the script once per
extra device with the parent's command line. Under Hydra that command still holds `-m` and
every sweep value, so each child starts a sweep of its own; and the launcher leaves
`LOCAL_RANK`, `WORLD_SIZE`, ... and the process group behind, so the next job of a multirun
starts no processes and waits forever. `HydraDDPStrategy` changes only that: each child is
the *current job* as a single run in the same run directory (its own overrides, sweep values
included, `hydra.output_subdir=null` so Hydra's files are written once), and at the end of
the job the children are awaited and the process is left as it was (see
:func:`end_launched_job`, called from the Hydra callback in `machinery/distributed.py`).

Start-up cannot hang. The children end with the process that launched them, whenever it
dies (`distributed.die_with_launcher`, first thing in every entry point). And the processes
meet (the rendezvous) within ``rendezvous_timeout`` seconds (120 by default) or stop with one
paragraph, instead of torch's 30 minutes, the timeout of every later collective too, which
stays as Lightning sets it. That short rendezvous is for processes this launcher (or a
person, by hand) started; torchrun, SLURM and the other cluster environments keep their own.

`registry.register_strategies` makes the `ddp` names of Lightning's StrategyRegistry that use
the subprocess launcher (`ddp`, `ddp_find_unused_parameters_*`, and so `auto` with several
devices) build this class. Outside a Hydra run, or when processes are created externally
(torchrun, SLURM), it behaves exactly like Lightning's DDPStrategy.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
from lightning.fabric.plugins.environments import LightningEnvironment
from lightning.fabric.utilities.distributed import _init_dist_connection
from lightning.fabric.utilities.seed import reset_seed
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.strategies.launchers.subprocess_script import _SubprocessScriptLauncher
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities.warnings import PossibleUserWarning

from ..distributed import at_job_end, launcher_environment
from ..errors import UserError
from .samplers import EXACT_MEAN, unpadded

# Seconds the processes of a run have to meet (see the module docstring).
RENDEZVOUS_TIMEOUT_S = 120.0
# torch's message when DDP finds parameters a loss did not use (Lightning rewords it later).
_UNUSED_PARAMETERS = "Expected to have finished reduction in the prior iteration"
_PADDING_WARNING = (
    r"Using `DistributedSampler` with the dataloaders\. During `trainer\.(test|validate)"
)
# Set in the launching process by the launcher (and by Lightning right after it); restored
# when the job ends so that the next job of a multirun starts from a clean process.
_LAUNCH_ENV = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "NODE_RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "OMP_NUM_THREADS",
)
# Hydra overrides that belong to the parent's sweep, not to the job a child re-runs.
_SWEEP_ONLY_HYDRA_KEYS = (
    "hydra.mode",
    "hydra.run.",
    "hydra.sweep.",
    "hydra.launcher",
    "hydra/launcher",
    "hydra.sweeper",
    "hydra/sweeper",
    "hydra.output_subdir",
)


@dataclass
class _LaunchedJob:
    """What the launcher started and changed for one Hydra job, to undo at its end."""

    output_dir: str
    saved_env: dict[str, str | None]
    num_threads: int
    procs: list[subprocess.Popen] = field(default_factory=list)


_launched: _LaunchedJob | None = None


def _hydra_quote(value: str) -> str:
    """A Hydra override value that stays one string whatever characters the path holds."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def hydra_job_command() -> tuple[list[str], str]:
    """The command (and working directory) that re-runs the current Hydra job as a single run."""
    from hydra._internal.utils import get_args_parser
    from hydra.core.hydra_config import HydraConfig

    import __main__

    hydra_cfg = HydraConfig.get()
    cwd = hydra_cfg.runtime.cwd  # where the user started the script
    if __main__.__spec__ is None:
        command = [sys.executable, os.path.join(cwd, sys.argv[0])]
    else:
        command = [sys.executable, "-m", __main__.__spec__.name]
    # Keep the flags that chose the config (-cp/-cn/-cd), never -m, and replace the command
    # line's overrides with this job's own (a sweep's values included).
    args = get_args_parser().parse_args(sys.argv[1:])
    for flag, value in (
        ("--config-path", args.config_path),
        ("--config-name", args.config_name),
        ("--config-dir", args.config_dir),
    ):
        if value is not None:
            command.append(f"{flag}={value}")
    command += list(hydra_cfg.overrides.task)
    command += [
        o
        for o in hydra_cfg.overrides.hydra
        if not o.lstrip("+~").startswith(_SWEEP_ONLY_HYDRA_KEYS)
    ]
    command += [
        # A single run however the parent's multirun was asked for: `-m` is dropped above,
        # and this also overrides a `hydra.mode: MULTIRUN` set in a config (hparams_search).
        "hydra.mode=RUN",
        f"hydra.run.dir={_hydra_quote(hydra_cfg.runtime.output_dir)}",
        "hydra.output_subdir=null",
    ]
    return command, cwd


def end_launched_job(succeeded: bool = True, timeout: float = 300.0) -> None:
    """Wait for the processes this process launched, close the process group, restore the env.

    Called when a Hydra job ends (and, as a safety net, before the next launch), so that the
    next job of a multirun starts its own processes on a fresh port. After a failed job the
    children may be waiting in a collective for this process: they are stopped, not awaited.
    """
    global _launched
    job, _launched = _launched, None
    if job is None:
        return
    failed = []
    for rank, proc in enumerate(job.procs, start=1):
        if not succeeded:
            proc.kill()
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if code and succeeded:
            failed.append(f"rank {rank} exited with code {code}")
    # The list is shared with Lightning's child-process observer thread, which kills this
    # process when a child exits non-zero: emptied, it sees nothing left to watch and stops.
    job.procs.clear()
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    for key, value in job.saved_env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    torch.set_num_threads(job.num_threads)
    if failed:
        raise RuntimeError(
            f"DDP processes of the run in {job.output_dir} failed: {'; '.join(failed)}"
        )


class _HydraJobLauncher(_SubprocessScriptLauncher):
    """Lightning's subprocess launcher whose children re-run the current Hydra job."""

    def launch(self, function: Any, *args: Any, trainer: Any = None, **kwargs: Any) -> Any:
        from hydra.core.hydra_config import HydraConfig

        if (
            _launched is not None
            and HydraConfig.initialized()
            and _launched.output_dir != HydraConfig.get().runtime.output_dir
        ):
            end_launched_job()  # a previous job of this process was not cleaned up
        return super().launch(function, *args, trainer=trainer, **kwargs)

    def _call_children_scripts(self) -> None:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            super()._call_children_scripts()
            return
        global _launched
        self._check_can_spawn_children()
        output_dir = HydraConfig.get().runtime.output_dir
        _launched = _LaunchedJob(
            output_dir=output_dir,
            saved_env={key: os.environ.get(key) for key in _LAUNCH_ENV},
            num_threads=torch.get_num_threads(),
        )
        at_job_end(end_launched_job)
        # The same variables as Lightning's launcher, so Lightning's LightningEnvironment
        # reads them in every process.
        os.environ["MASTER_ADDR"] = self.cluster_environment.main_address
        os.environ["MASTER_PORT"] = str(self.cluster_environment.main_port)
        os.environ["NODE_RANK"] = str(self.cluster_environment.node_rank())
        os.environ["LOCAL_RANK"] = str(self.cluster_environment.local_rank())
        os.environ["WORLD_SIZE"] = f"{self.num_processes * self.num_nodes}"
        command, cwd = hydra_job_command()
        self.procs = []
        for local_rank in range(1, self.num_processes):
            env = {**os.environ, **launcher_environment(), "LOCAL_RANK": str(local_rank)}
            self.procs.append(subprocess.Popen(command, env=env, cwd=cwd))
        _launched.procs = self.procs


@contextlib.contextmanager
def _unused_parameters_explained(strategy: DDPStrategy) -> Iterator[None]:
    """DDP's failure on parameters a loss did not use (a GAN toggling its two optimizers) as
    one paragraph saying what to run with, instead of a traceback from the backward pass or
    the next forward (torch's message; Lightning adds its advice only after)."""
    try:
        yield
    except RuntimeError as error:
        if _UNUSED_PARAMETERS not in str(error):
            raise
        raise UserError(
            f"{type(strategy.lightning_module).__name__} has parameters that its loss does not "
            "use in a step (e.g. a GAN toggling its generator's and discriminator's "
            "optimizers), which DDP must be told of: run with "
            "`trainer.strategy=ddp_find_unused_parameters_true` (a little slower), or let "
            "every parameter take part in each loss.",
            every_rank=True,
        ) from error


class HydraDDPStrategy(DDPStrategy):
    """Lightning's DDPStrategy with a Hydra-aware launcher for its `popen` start method,
    evaluation loaders that see each sample once (`samplers.unpadded`), and a rendezvous
    that gives up after ``rendezvous_timeout`` seconds."""

    def __init__(
        self, *args: Any, rendezvous_timeout: float = RENDEZVOUS_TIMEOUT_S, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.rendezvous_timeout = rendezvous_timeout

    def setup_distributed(self) -> None:
        """Lightning's, with the store the processes meet at made here, with a short timeout
        (torch's `init_process_group` takes a ready store)."""
        if (
            type(self.cluster_environment) is not LightningEnvironment  # torchrun, SLURM...
            or torch.distributed.is_initialized()  # met already (fit, then test)
        ):
            super().setup_distributed()
            return
        reset_seed()
        self.set_world_ranks()
        self._process_group_backend = self._get_process_group_backend()
        kwargs: dict[str, Any] = {"timeout": self._timeout, "store": self._meet()}
        kwargs["device_id"] = self.root_device if self.root_device.type != "cpu" else None
        _init_dist_connection(self.cluster_environment, self._process_group_backend, **kwargs)

    def _meet(self) -> Any:
        """The TCP store of rank 0, every process connected, within the rendezvous timeout."""
        from torch.distributed import TCPStore

        assert self.cluster_environment is not None
        address = self.cluster_environment.main_address
        port = self.cluster_environment.main_port
        try:
            store = TCPStore(
                address,
                port,
                self.world_size,
                is_master=self.global_rank == 0,
                timeout=timedelta(seconds=self.rendezvous_timeout),
                wait_for_workers=True,
            )
        except (RuntimeError, OSError) as error:  # torch's DistStoreError is a RuntimeError
            waited = "the others" if self.global_rank == 0 else "process 0"
            raise UserError(
                f"The {self.world_size} processes of this run did not meet at {address}:{port}"
                f" within {self.rendezvous_timeout:g} s: process {self.global_rank} waited for "
                f"{waited} in vain ({type(error).__name__}: {str(error).splitlines()[0][:200]}). "
                "Another program may hold the port (unset MASTER_PORT to get a free one), or a "
                "process did not start; run it again.",
                exit_code=1,
            ) from error
        if self._timeout is not None:  # later waits on the store: as long as collectives
            store.set_timeout(self._timeout)
        return store

    def setup(self, trainer: Any) -> None:
        # Lightning warns, as it gives val/test loaders a DistributedSampler, that it repeats
        # samples; `process_dataloader` replaces that sampler by one that does not.
        warnings.filterwarnings("ignore", message=_PADDING_WARNING, category=PossibleUserWarning)
        EXACT_MEAN.enter()
        self._exact_mean = True
        super().setup(trainer)

    def teardown(self) -> None:
        if getattr(self, "_exact_mean", False):
            EXACT_MEAN.exit()
            self._exact_mean = False
        super().teardown()

    def pre_backward(self, closure_loss: torch.Tensor) -> None:
        with _unused_parameters_explained(self):
            super().pre_backward(closure_loss)

    def training_step(self, *args: Any, **kwargs: Any) -> Any:
        with _unused_parameters_explained(self):
            return super().training_step(*args, **kwargs)

    def process_dataloader(self, dataloader: object) -> object:
        dataloader = super().process_dataloader(dataloader)
        trainer = self.lightning_module.trainer if self.lightning_module is not None else None
        if trainer is None or trainer.state.stage == RunningStage.TRAINING:
            return dataloader
        return unpadded(dataloader)

    def _configure_launcher(self) -> None:
        if self._start_method == "popen":
            assert self.cluster_environment is not None
            self._launcher = _HydraJobLauncher(
                self.cluster_environment, self.num_processes, self.num_nodes
            )
        else:
            super()._configure_launcher()
