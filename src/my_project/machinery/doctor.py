"""Device report: `python -m my_project.machinery.doctor [OVERRIDES]` (`my-project-doctor`):
what a person checks on a new machine, as the PyTorch tutorials this project grew from teach
it: the versions, the devices torch sees, what `python train.py OVERRIDES` would run on here
(accelerator, devices, strategy, precision: Lightning's own choice, from a Trainer built as
train.py builds it, and why, a line each), and one matrix product timed on the CPU and on each
GPU. It writes nothing and starts no process; what a run really ran on is in its
`run_info.json`.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import UserError, report_user_errors

SIZE = 1024  # the timed product: SIZE x SIZE float32 matrices


def machine() -> list[tuple[str, str]]:
    """What this machine offers, as torch sees it (CUDA_VISIBLE_DEVICES applied)."""
    import lightning
    import torch

    rows = [
        ("Python", f"{platform.python_version()} ({sys.executable})"),
        ("torch, Lightning", f"{torch.__version__}, {lightning.__version__}"),
        ("CUDA (torch.version.cuda)", torch.version.cuda or "none: a CPU-only build of torch"),
        ("torch.cuda.is_available()", str(torch.cuda.is_available())),
    ]
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        memory = f"{props.total_memory / 2**30:.1f} GiB"
        rows.append((f"  cuda:{i}", f"{props.name}, {memory}, compute {props.major}.{props.minor}"))
    rows += [
        ("MPS (Apple silicon) available", str(torch.backends.mps.is_available())),
        ("CPU cores, torch threads", f"{os.cpu_count()}, {torch.get_num_threads()}"),
    ]
    return rows


def devices() -> list[str]:
    """The CPU, each GPU, and MPS where there is one."""
    import torch

    cuda = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return ["cpu", *cuda, *(["mps"] if torch.backends.mps.is_available() else [])]


def seconds_per_product(device: str, size: int = SIZE, repeats: int = 10) -> float:
    """Seconds one ``size`` x ``size`` float32 matrix product takes on ``device``: made there
    (compute where the data is), warmed up, synchronised before the clock is read (GPUs run
    asynchronously)."""
    import torch

    def synchronize() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        elif device == "mps":
            torch.mps.synchronize()

    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    a @ b
    synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    synchronize()
    return (time.perf_counter() - start) / repeats


def plan(overrides: Sequence[str]) -> list[tuple[str, str, str]]:
    """(setting, what `python train.py OVERRIDES` would use here, why) for the accelerator,
    devices, strategy and precision: the config checked as train.py checks it, then a Trainer
    built from it (no callbacks, no loggers: building one starts nothing, writes nothing)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from hydra.utils import instantiate
    from omegaconf import OmegaConf, open_dict

    from .config import config_dir
    from .devices.choice import run_record
    from .preflight import check_devices, check_trainer_types
    from .run.entry import register, with_trainer_arguments

    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            cfg = compose(config_name="train", overrides=with_trainer_arguments(list(overrides)))
    except HydraException as error:
        raise UserError(
            f"{' '.join(str(error).split())} These are the overrides of `python train.py` "
            "(`python train.py --help` lists its groups and options)."
        ) from error
    with open_dict(cfg):  # no run directory: a Trainer built with it creates nothing
        cfg.paths.output_dir = os.getcwd()
    check_trainer_types(cfg.trainer)
    asked: dict[str, Any] = OmegaConf.to_container(cfg.trainer, resolve=True)  # type: ignore[assignment]
    check_devices(asked)
    register()
    lines = logging.getLogger("lightning.pytorch.utilities.rank_zero")  # "GPU available: ..."
    level = lines.level
    lines.setLevel(logging.WARNING)
    try:
        kept = ("enable_checkpointing", "enable_progress_bar", "enable_model_summary")
        quiet = dict.fromkeys(kept, False)
        trainer = instantiate(cfg.trainer, callbacks=[], logger=False, **quiet)
    finally:
        lines.setLevel(level)
    return reasons(asked, run_record(trainer))


def reasons(asked: Mapping[str, Any], used: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Why each of accelerator, devices, strategy and precision is what it is."""
    import torch

    def typed(key: str, default: Any) -> str:
        value = asked.get(key, default)
        return f"trainer.{key}={str(value).replace(' ', '') if isinstance(value, list) else value}"

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    found = f"torch sees {gpus} CUDA GPU{'s' * (gpus != 1)}" if gpus else "torch sees no CUDA GPU"
    if torch.backends.mps.is_available():
        found += " and Apple silicon's GPU (MPS)"
    elif not gpus:
        found += " and no MPS"
    accelerator, processes = str(used["accelerator"]), int(used["world_size"])
    how = ": Lightning's pick, as" if str(asked.get("accelerator")) == "auto" else ", asked for;"
    unit = "CPU process" if accelerator == "cpu" else f"process on a {accelerator} device"
    devices = f"{typed('devices', 'auto')}: {used['devices']} {unit}{'es' * (used['devices'] != 1)}"
    if int(used["num_nodes"]) > 1:
        devices += f" on each of {used['num_nodes']} nodes"
    strategy = str(used["strategy"])
    if used["start_method"] is not None:  # Lightning's DDP family
        started = {"popen": "the command run again for each"}.get(
            str(used["start_method"]), f"started by {used['start_method']}"
        )
        why = f"DDP: {processes} processes ({started}), over {used['backend']}"
    elif strategy == "DataParallelStrategy":
        split = "nothing is split on a CPU" if accelerator == "cpu" else "forward split across them"
        why = f"DataParallel: one process, {split}"
    else:
        why = "one process on one device" if processes == 1 else f"{processes} processes"
    if str(asked.get("strategy", "auto")) == "auto":
        count = int(used["devices"]) * int(used["num_nodes"])
        why = f"Lightning's pick for {count} device{'s' * (count != 1)}, {why}"
    precision = str(used["precision"])
    meaning = {
        "32-true": "float32 weights and computation",
        "bf16-mixed": "bfloat16 autocast, float32 weights",
        "16-mixed": "float16 autocast with a loss scaler, float32 weights",
        "64-true": "float64 weights and computation",
    }.get(precision, "as Lightning defines it")
    return [
        ("accelerator", accelerator, f"{typed('accelerator', 'auto')}{how} {found}"),
        ("devices", str(used["devices"]), devices),
        ("strategy", strategy, f"{typed('strategy', 'auto')}: {why}"),
        ("precision", precision, f"{typed('precision', '32-true')}: {meaning}"),
    ]


@report_user_errors
def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: `my-project-doctor [OVERRIDES]` (train.py's overrides)."""
    parser = argparse.ArgumentParser(
        prog="my-project-doctor",  # its own line: a generated project's name may be long
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("overrides", nargs="*", help="train.py's overrides (trainer.devices=2)")
    overrides = parser.parse_args(argv).overrides
    if flags := [o for o in overrides if o.startswith("-")]:
        parser.error(f"unrecognized arguments: {' '.join(flags)}")
    planned = plan(overrides)  # a bad override: one paragraph, before the machine's report
    for label, value in machine():
        print(f"{label:<32}{value}")
    command = " ".join(["python train.py", *overrides])
    print(f"\nWhat `{command}` would run on here:")
    width = max(len(value) for _, value, _ in planned)
    for setting, value, why in planned:
        print(f"  {setting:<13}{value:<{width + 2}}{why}")
    print(f"\nOne {SIZE}x{SIZE} float32 matrix product:")
    cpu = None
    for device in devices():
        seconds = seconds_per_product(device)
        cpu = cpu or seconds
        speed = f", {cpu / seconds:.1f}x the CPU" if device != "cpu" else ""
        flops = 2 * SIZE**3 / seconds / 1e9
        print(f"  {device:<8}{1000 * seconds:9.2f} ms  ({flops:,.1f} GFLOP/s{speed})")


if __name__ == "__main__":
    main()
