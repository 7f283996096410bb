"""Device report: `python -m my_project.machinery.doctor` (`my-project-doctor`): what a person
checks on a new machine, as the PyTorch tutorials this project grew from teach it: the
versions, the devices torch sees, and one matrix product timed on the CPU and on each GPU.
It writes nothing; what a run really ran on is in its `run_info.json`.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Sequence

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


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: `my-project-doctor`; no options (argparse refuses any)."""
    argparse.ArgumentParser(
        prog="my-project-doctor",  # its own line: a generated project's name may be long
        description=__doc__,
    ).parse_args(argv)
    for label, value in machine():
        print(f"{label:<32}{value}")
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
