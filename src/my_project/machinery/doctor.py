"""Device report: `python -m my_project.machinery.doctor [overrides]` (`my-project-doctor`):
the versions and devices people check by hand before a run, then what `python train.py` with
the same overrides would run on, and why, decided by Lightning itself (:func:`plan_devices`).
It writes nothing and starts no process; torch loads only once the overrides are checked.
"""

from __future__ import annotations

import os
import platform
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import UserError, report_user_errors

if TYPE_CHECKING:
    from .devices.choice import DeviceChoice

COMMAND = f"python -m {__package__}.doctor"
USAGE = f"""Usage: {COMMAND} [OVERRIDES]

Reports torch/CUDA/Lightning versions, GPUs, MPS and CPU cores, and which accelerator,
devices and strategy `python train.py OVERRIDES` would use, and why, e.g.:

  {COMMAND} trainer.devices=2
  {COMMAND} trainer=ddp trainer.precision=bf16-mixed
"""


def machine() -> tuple[list[tuple[str, str]], int, bool, list[str]]:
    """What this machine offers, as torch sees it (CUDA_VISIBLE_DEVICES applied): rows of
    (what, value), the number of GPUs, whether MPS is there, and notes."""
    import lightning
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    dist = torch.distributed
    backends = [b for b in ("gloo", "nccl", "mpi") if getattr(dist, f"is_{b}_available")()]
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    rows = [
        ("Python", f"{platform.python_version()} ({sys.executable})"),
        ("torch, Lightning", f"{torch.__version__}, {lightning.__version__}"),
        ("CUDA (torch.version.cuda)", torch.version.cuda or "none: a CPU-only build of torch"),
        ("cuDNN", str(cudnn or "none")),
        ("torch.distributed backends", ", ".join(backends) or "none"),
        ("torch.cuda.is_available()", str(torch.cuda.is_available())),
        ("GPUs", str(gpus)),
    ]
    for i in range(gpus):
        props = torch.cuda.get_device_properties(i)
        about = (
            f"{props.total_memory / 2**30:.1f} GiB, compute capability {props.major}.{props.minor}"
        )
        rows.append((f"  cuda:{i}", f"{props.name}, {about}"))
    rows += [
        ("MPS (Apple silicon) available", str(torch.backends.mps.is_available())),
        ("CPU cores (os.cpu_count)", str(os.cpu_count())),
        ("torch threads", str(torch.get_num_threads())),
    ]
    notes = []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        notes.append(f"CUDA_VISIBLE_DEVICES={visible!r} limits the GPUs torch sees.")
    if not gpus and torch.version.cuda and not visible:
        notes.append("torch is built with CUDA but sees no GPU: check the driver (`nvidia-smi`).")
    return rows, gpus, torch.backends.mps.is_available(), notes


def plan_devices(trainer_cfg: Any) -> DeviceChoice:
    """What a run with this `trainer` config would use, decided by Lightning itself: the
    config checked as train.py checks it, then a Trainer built as train.py builds it (no
    callbacks or loggers; building one starts no processes and writes nothing)."""
    import logging
    import tempfile

    from hydra.utils import instantiate

    from .devices.choice import device_choice
    from .preflight import check_devices
    from .run.entry import register

    register()
    check_devices(trainer_cfg)
    quiet = logging.getLogger("lightning.pytorch.utilities.rank_zero")  # "GPU available: ..."
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        with tempfile.TemporaryDirectory() as root:  # the run directory does not exist yet
            trainer = instantiate(
                trainer_cfg,
                callbacks=[],
                logger=False,
                default_root_dir=root,
                enable_checkpointing=False,
                enable_progress_bar=False,
                enable_model_summary=False,
            )
    finally:
        quiet.setLevel(level)
    return device_choice(trainer)


def explain(asked: Mapping[str, Any], choice: DeviceChoice, gpus: int, mps: bool) -> str:
    """One sentence: why these devices and this strategy."""
    accelerator, requested = choice.accelerator, str(asked.get("accelerator", "auto")).lower()
    found = f"{gpus} GPU{'s' * (gpus != 1)} found" if gpus else "no GPU"
    if requested == "auto" and accelerator == "cpu":
        why = "no GPU: accelerator=auto picked cpu because no CUDA/MPS device is visible"
    elif requested == "auto" and accelerator == "mps":
        why = "an Apple-silicon GPU (MPS) found: accelerator=auto picked mps"
    elif requested == "auto":
        why = f"{found}: accelerator=auto picked {accelerator}"
    elif requested == "gpu":
        where_found = found if accelerator == "cuda" else "MPS found"
        why = f"{where_found}: accelerator=gpu means {accelerator} here"
    else:
        unused = accelerator == "cpu" and (gpus or mps)
        why = f"`trainer.accelerator={requested}` was asked for" + (
            f" ({found if gpus else 'MPS found'}, not used)" if unused else ""
        )
    devices = f"`trainer.devices={_shown(asked.get('devices', 'auto'))}`"
    where = "CPU" if accelerator == "cpu" else accelerator.upper()
    unit = "CPU process" if accelerator == "cpu" else "process"
    processes = f"{choice.world_size} {unit}{'es' * (choice.world_size != 1)}"
    if choice.num_nodes > 1:
        per_node = f"{choice.devices} {unit}{'es' * (choice.devices != 1)}"
        processes = f"{per_node} on each of {choice.num_nodes} nodes ({choice.world_size} in all)"
    backend = f" over {choice.backend}" if choice.backend else ""
    started = (
        "" if choice.start_method in (None, "popen") else f", started with {choice.start_method}"
    )
    dp = choice.strategy == "DataParallelStrategy"
    if dp and choice.devices > 1 and accelerator not in ("cpu", "mps"):
        how = (
            f"strategy=dp runs one process that splits each batch across {choice.devices} "
            f"{where} devices"
        )
    elif dp:
        how = f"strategy=dp runs one process, and on {where} nothing is split"
    elif choice.start_method is not None and accelerator == "cpu":  # Lightning's DDP family
        how = f"{devices} runs {processes} with DDP{backend}{started}"
    elif choice.start_method is not None:
        how = f"{devices} will run DDP with {processes}{backend}{started}"
    elif choice.world_size > 1:
        how = f"{devices} runs {choice.strategy} with {processes}"
    else:
        index = f":{choice.device_ids[0]}" if accelerator == "cuda" else ""
        how = f"{devices} runs one process on {accelerator}{index}"
    sentence = f"{why}; {how}."
    return sentence[0].upper() + sentence[1:]


def _shown(value: Any) -> str:
    """A config value as it is typed on the command line."""
    from omegaconf import OmegaConf

    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value)
    return str(value).replace(" ", "") if isinstance(value, list) else str(value)


@report_user_errors
def report(overrides: Sequence[str]) -> None:
    """Print the machine, then the plan for `python train.py OVERRIDES` (UserError: exit 2)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException, InstantiationException

    from .config import config_dir
    from .preflight import check_trainer_types
    from .run.trainer_arguments import with_trainer_arguments

    try:  # the checks that need no torch first, so a typo fails at once
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            cfg = compose(config_name="train", overrides=with_trainer_arguments(overrides))
    except HydraException as error:
        raise UserError(
            f"{error}\nThese are the overrides of `python train.py`; `python train.py --help` "
            "lists the groups and options."
        ) from error
    check_trainer_types(cfg.trainer)
    rows, gpus, mps, notes = machine()
    for label, value in rows:
        print(f"{label:<36}{value}")
    with warnings.catch_warnings(record=True) as caught:  # e.g. "GPU available but not used"
        warnings.simplefilter("always")
        try:
            choice = plan_devices(cfg.trainer)
        except InstantiationException as error:
            raise UserError(
                "Lightning cannot build a Trainer from this `trainer` config, so train.py "
                f"would fail too: {error}"
            ) from error
    asked = cfg.trainer
    method = choice.start_method and f"start_method={choice.start_method}"
    extras = ", ".join(e for e in (choice.backend, method) if e)
    ids = ", ".join(f"{choice.accelerator}:{i}" for i in choice.device_ids)
    devices = str(choice.devices) + (f" ({ids})" if choice.accelerator != "cpu" else "")
    table = [
        ("accelerator", asked.get("accelerator", "auto"), choice.accelerator),
        ("devices", asked.get("devices", "auto"), devices),
        (
            "strategy",
            asked.get("strategy", "auto"),
            choice.strategy + f" ({extras})" * bool(extras),
        ),
        ("num_nodes", asked.get("num_nodes", 1), str(choice.num_nodes)),
        ("precision", asked.get("precision", "32-true"), choice.precision),
        ("processes", "", str(choice.world_size)),
    ]
    print(f"\nWhat `{' '.join(['python train.py', *overrides])}` would use")
    print(f"{'setting':<14}{'trainer config':<22}train.py would use")
    for name, requested, used in table:
        print(f"{name:<14}{_shown(requested):<22}{used}")
    print(f"Why: {explain(asked, choice, gpus, mps)}")
    for note in [*notes, *dict.fromkeys(str(w.message) for w in caught)]:
        print(f"Note: {note}")


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: `my-project-doctor [overrides]`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(arg in ("-h", "--help") for arg in args):
        print(USAGE)
        return
    flags = [arg for arg in args if arg.startswith("-")]
    if flags:
        print(
            f"\nError: {COMMAND} takes no option {flags[0]!r}: give the Hydra overrides of "
            f"`python train.py`, e.g. `{COMMAND} trainer.devices=2`.\n",
            file=sys.stderr,
        )
        sys.exit(2)
    report(args)


if __name__ == "__main__":
    main()
