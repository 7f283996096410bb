"""What verifying checkpoints costs, on a 100 MB one: `python -m tests.machinery.checkpoint_cost`.

Side by side in one process, the median of 5 (files in the page cache, as right after a save):
saving with `torch.save` against the template's save (temporary file, fsync, rename), and
reading with `torch.load(weights_only=True, mmap=True)` against `read_checkpoint` (the zip's
CRCs verified) plus the NaN check, each followed by reading every weight once, as a use would.
A first read of each version of a file verifies it; later reads in the process do not.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from my_project.machinery.preflight.checkpoint import check_finite, read_checkpoint
from my_project.machinery.reliability import atomic_io


def median_seconds(work: Callable[[], object], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def use(checkpoint: dict) -> float:
    return float(sum(t.double().sum() for t in checkpoint["state_dict"].values()))


def main() -> None:
    weights = {f"layer{i}.weight": torch.randn(1000, 2500) for i in range(10)}  # 100 MB
    checkpoint = {"state_dict": weights, "hyper_parameters": {"lr": 0.1}}
    with tempfile.TemporaryDirectory(dir=os.environ.get("CHECKPOINT_COST_DIR")) as folder:
        plain, ours = Path(folder) / "plain.ckpt", Path(folder) / "ours.ckpt"
        save = median_seconds(lambda: torch.save(checkpoint, plain))
        save_ours = median_seconds(lambda: atomic_io.atomic_torch_save(checkpoint, ours))
        load = median_seconds(lambda: use(torch.load(plain, weights_only=True, mmap=True)))

        def read_verified() -> float:
            atomic_io._damage.cache_clear()  # verify every time, as a first read does
            loaded = read_checkpoint(str(ours))
            check_finite(str(ours), loaded["state_dict"])
            return use(loaded)

        read = median_seconds(read_verified)
        crc = median_seconds(lambda: (atomic_io._damage.cache_clear(), atomic_io.damage(ours)))
        size = ours.stat().st_size / 1e6
    print(f"checkpoint of {size:.0f} MB:")
    print(
        f"  save: torch.save {save:.3f} s, the template's {save_ours:.3f} s ({save_ours / save:.2f}x)"
    )
    print(f"  read and use: torch.load {load:.3f} s, verified {read:.3f} s ({read / load:.2f}x)")
    print(f"  of which the CRC check alone: {crc:.3f} s")


if __name__ == "__main__":
    main()
