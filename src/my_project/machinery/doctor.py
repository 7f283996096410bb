"""Device report: `python -m my_project.doctor [overrides]` (or the `my-project-doctor` script).

Prints what people otherwise check by hand before a run (torch, CUDA and Lightning versions,
the GPUs, MPS, CPU cores) and what `python train.py` with the same overrides would run on:
accelerator, devices, strategy, precision, processes, and why, in one sentence. The choice
is Lightning's own (:func:`plan_devices`: a Trainer is built from the config, as train.py
builds it, and read); a run records the same fields in its `run_info.json`.
Nothing is written and no process is started. Heavy imports wait for :func:`main`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import UserError, report_user_errors

if TYPE_CHECKING:
    from omegaconf import DictConfig
    from rich.console import RenderableType
    from rich.table import Table

    from .devices.choice import DeviceChoice

_COMMAND = f"python -m {__package__}.doctor"
USAGE = f"""Usage: {_COMMAND} [OVERRIDES]

Reports torch/CUDA/Lightning versions, GPUs, MPS and CPU cores, and which accelerator,
devices and strategy `python train.py OVERRIDES` would use, and why. OVERRIDES are the
Hydra overrides of train.py, e.g.:

  {_COMMAND} trainer.devices=2
  {_COMMAND} trainer=ddp trainer.precision=bf16-mixed
"""


@dataclass
class Machine:
    """What this machine and its Python environment offer."""

    software: list[tuple[str, str]]
    cuda_available: bool
    gpus: list[tuple[str, str, str]]  # (name, memory, compute capability) per visible GPU
    mps_available: bool
    cpu: list[tuple[str, str]]
    notes: list[str] = field(default_factory=list)


def inspect_machine() -> Machine:
    """Versions and devices, as torch sees them (CUDA_VISIBLE_DEVICES applied)."""
    import lightning
    import torch
    import torchmetrics

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    backends = [
        name
        for name, available in (
            ("gloo", torch.distributed.is_gloo_available()),
            ("nccl", torch.distributed.is_nccl_available()),
            ("mpi", torch.distributed.is_mpi_available()),
        )
        if available
    ]
    software = [
        ("Python", f"{platform.python_version()} ({sys.executable})"),
        ("torch", torch.__version__),
        ("CUDA (torch.version.cuda)", torch.version.cuda or "none: a CPU-only build of torch"),
        ("cuDNN", str(cudnn) if cudnn else "none"),
        ("Lightning", lightning.__version__),
        ("torchmetrics", torchmetrics.__version__),
        ("torch.distributed backends", ", ".join(backends) or "none"),
    ]
    cuda_available = torch.cuda.is_available()
    gpus = []
    if cuda_available:
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            gpus.append(
                (
                    props.name,
                    f"{props.total_memory / 2**30:.1f} GiB",
                    f"{props.major}.{props.minor}",
                )
            )
    mps_available = torch.backends.mps.is_available()
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cpu = [
        ("CPU cores (os.cpu_count)", str(cores)),
        (
            "usable by this process (affinity)",
            str(usable) if usable is not None else "not reported on this OS",
        ),
        ("torch threads", str(torch.get_num_threads())),
    ]
    notes = []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        notes.append(f"CUDA_VISIBLE_DEVICES={visible!r} limits the GPUs torch sees.")
    if not cuda_available and torch.version.cuda and not visible:
        notes.append("torch is built with CUDA but sees no GPU: check the driver (`nvidia-smi`).")
    return Machine(software, cuda_available, gpus, mps_available, cpu, notes)


def compose_train_config(overrides: Sequence[str]) -> DictConfig:
    """The config `python train.py OVERRIDES` composes (no run directory is made)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from .config import config_dir
    from .run.trainer_arguments import with_trainer_arguments

    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            return compose(config_name="train", overrides=with_trainer_arguments(overrides))
    except HydraException as error:
        raise UserError(
            f"{error}\nThese are the overrides of `python train.py`; `python train.py --help` "
            "lists the groups and options."
        ) from error


def plan(cfg: DictConfig) -> tuple[DeviceChoice, list[str]]:
    """What train.py would run on, with the warnings Lightning gave while deciding."""
    from hydra.errors import InstantiationException

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            choice = plan_devices(cfg.trainer)
        except InstantiationException as error:
            raise UserError(
                f"Lightning cannot build a Trainer from this `trainer` config, so train.py "
                f"would fail too: {error}"
            ) from error
    return choice, list(dict.fromkeys(str(w.message) for w in caught))


def plan_devices(trainer_cfg: Any) -> DeviceChoice:
    """What a run with this `trainer` config would use, decided by Lightning itself.

    Checks the config like train.py (a :class:`UserError` for what cannot run here), then
    builds the Trainer the way train.py does (``instantiate(cfg.trainer, ...)``) with no
    callbacks or loggers, quietly; building one starts no processes and writes nothing.
    Lightning's warnings (e.g. "GPU available but not used") reach the caller.
    """
    import tempfile

    from hydra.utils import instantiate

    from .devices.choice import device_choice
    from .preflight import check_devices
    from .run.entry import register

    register()
    check_devices(trainer_cfg)
    with _quiet_lightning_info(), tempfile.TemporaryDirectory() as root:
        trainer = instantiate(
            trainer_cfg,
            callbacks=[],
            logger=False,
            default_root_dir=root,  # the run directory does not exist yet
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        return device_choice(trainer)


@contextlib.contextmanager
def _quiet_lightning_info() -> Iterator[None]:
    """Hide the lines a Trainer logs when built ("GPU available: ...", tips)."""
    logger = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def explain(asked: Mapping[str, Any], choice: DeviceChoice, gpus: int, mps: bool) -> str:
    """One sentence: why these devices and this strategy."""
    sentence = f"{_why_accelerator(asked, choice, gpus, mps)}; {_why_strategy(asked, choice)}."
    return sentence[0].upper() + sentence[1:]


def _why_accelerator(asked: Mapping[str, Any], choice: DeviceChoice, gpus: int, mps: bool) -> str:
    accelerator, requested = choice.accelerator, str(asked.get("accelerator", "auto")).lower()
    found = _count(gpus, "GPU") + " found" if gpus else "no GPU"
    if requested == "auto":
        if accelerator == "cuda":
            return f"{found}: accelerator=auto picked cuda"
        if accelerator == "mps":
            return "an Apple-silicon GPU (MPS) found: accelerator=auto picked mps"
        if accelerator == "cpu":
            return "no GPU: accelerator=auto picked cpu because no CUDA/MPS device is visible"
        return f"accelerator=auto picked {accelerator}"
    if requested == "gpu":
        return f"{found if accelerator == 'cuda' else 'MPS found'}: accelerator=gpu means {accelerator} here"
    unused = (
        f" ({found if gpus else 'MPS found'}, not used)"
        if accelerator == "cpu" and (gpus or mps)
        else ""
    )
    return f"`trainer.accelerator={requested}` was asked for{unused}"


def _why_strategy(asked: Mapping[str, Any], choice: DeviceChoice) -> str:
    devices = f"`trainer.devices={_shown(asked.get('devices', 'auto'))}`"
    where = "CPU" if choice.accelerator == "cpu" else choice.accelerator.upper()
    if choice.strategy == "DataParallelStrategy":
        if choice.devices > 1 and choice.accelerator not in ("cpu", "mps"):
            return (
                f"strategy=dp runs one process that splits each batch across "
                f"{choice.devices} {where} devices"
            )
        return f"strategy=dp runs one process, and on {where} nothing is split"
    unit = "CPU process" if choice.accelerator == "cpu" else "process"
    processes = _count(choice.world_size, unit, unit + "es")
    if choice.num_nodes > 1:
        per_node = _count(choice.devices, unit, unit + "es")
        processes = f"{per_node} on each of {choice.num_nodes} nodes ({choice.world_size} in all)"
    if choice.start_method is not None:  # Lightning's DDP family (ddp, ddp_spawn, ...)
        started = "" if choice.start_method == "popen" else f", started with {choice.start_method}"
        backend = f" over {choice.backend}" if choice.backend else ""
        if choice.accelerator == "cpu":
            return f"{devices} runs {processes} with DDP{backend}{started}"
        return f"{devices} will run DDP with {processes}{backend}{started}"
    if choice.world_size > 1:
        return f"{devices} runs {choice.strategy} with {processes}"
    index = f":{choice.device_ids[0]}" if choice.accelerator == "cuda" else ""
    return f"{devices} runs one process on {choice.accelerator}{index}"


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _shown(value: Any) -> str:
    """A config value as it is typed on the command line."""
    from omegaconf import OmegaConf

    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value)
    return str(value).replace(" ", "") if isinstance(value, list) else str(value)


def machine_tables(machine: Machine) -> list[RenderableType]:
    from rich.table import Table

    software = Table(title="Software", show_header=False, title_justify="left")
    for label, value in machine.software:
        software.add_row(label, value)
    hardware = Table(title="Devices", show_header=False, title_justify="left")
    hardware.add_row("torch.cuda.is_available()", str(machine.cuda_available))
    hardware.add_row("GPUs", str(len(machine.gpus)))
    for index, (name, memory, capability) in enumerate(machine.gpus):
        hardware.add_row(f"  cuda:{index}", f"{name}, {memory}, compute capability {capability}")
    hardware.add_row("MPS (Apple silicon) available", str(machine.mps_available))
    for label, value in machine.cpu:
        hardware.add_row(label, value)
    return [software, hardware]


def plan_table(asked: Mapping[str, Any], choice: DeviceChoice) -> Table:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("setting", style="bold")
    table.add_column("trainer config")
    table.add_column("train.py would use", style="green")
    extras = [
        e
        for e in (choice.backend, choice.start_method and f"start_method={choice.start_method}")
        if e
    ]
    strategy = choice.strategy + (f" ({', '.join(extras)})" if extras else "")
    ids = ", ".join(f"{choice.accelerator}:{i}" for i in choice.device_ids)
    devices = str(choice.devices) if choice.accelerator == "cpu" else f"{choice.devices} ({ids})"
    rows = [
        ("accelerator", asked.get("accelerator", "auto"), choice.accelerator),
        ("devices", asked.get("devices", "auto"), devices),
        ("strategy", asked.get("strategy", "auto"), strategy),
        ("num_nodes", asked.get("num_nodes", 1), str(choice.num_nodes)),
        ("precision", asked.get("precision", "32-true"), choice.precision),
        ("processes", "", str(choice.world_size)),
    ]
    for name, requested, used in rows:
        table.add_row(name, escape(_shown(requested)), escape(used))
    return table


@report_user_errors
def report(overrides: Sequence[str]) -> None:
    """Print the machine, then the plan for `python train.py OVERRIDES` (UserError: exit 2)."""
    from rich.console import Console
    from rich.markup import escape

    from .preflight import check_trainer_types

    # The checks that need no torch come first, so a typo fails at once.
    cfg = compose_train_config(overrides)
    check_trainer_types(cfg.trainer)
    console = Console()
    machine = inspect_machine()
    for table in machine_tables(machine):
        console.print(table)
    console.print()
    choice, lightning_warnings = plan(cfg)
    command = " ".join(["python train.py", *overrides])
    console.print(f"[bold]What `{escape(command)}` would use[/]")
    console.print(plan_table(cfg.trainer, choice))
    why = explain(cfg.trainer, choice, len(machine.gpus), machine.mps_available)
    console.print(f"[bold]Why:[/] {escape(why)}")
    for note in [*machine.notes, *lightning_warnings]:
        console.print(f"[yellow]Note:[/] {escape(note)}")


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: `my-project-doctor [overrides]`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(arg in ("-h", "--help") for arg in args):
        print(USAGE)
        return
    flags = [arg for arg in args if arg.startswith("-")]
    if flags:
        print(
            f"\nError: {_COMMAND} takes no option {flags[0]!r}: give the Hydra overrides of "
            f"`python train.py`, e.g. `{_COMMAND} trainer.devices=2`.\n",
            file=sys.stderr,
        )
        sys.exit(2)
    report(args)


if __name__ == "__main__":
    main()
