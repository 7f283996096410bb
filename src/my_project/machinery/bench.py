"""Benchmark: Lightning's training loop against a hand-written PyTorch loop, for any module.

    python -m my_project.machinery.bench                       # the `mlp` workload (bench.yaml)
    python -m my_project.machinery.bench --workload cnn --device cuda
    python -m my_project.machinery.bench --workload none model=mine data=mine  # any module

In one process, on one device, the same module (same initial weights) trains on the batches of
its data module's training loader for the same number of batches, two ways, each inside a real
``Trainer.fit``, so a module that reads ``self.trainer`` (``estimated_stepping_batches``,
``datamodule``, ``optimizers()``) in ``setup``, ``configure_optimizers`` or its steps finds one:

- ``template``: Lightning's loop with the run's callbacks (checkpoints, validation and loggers
  off: they are not part of a training step);
- ``raw``: a loop as a tutorial writes it, run where Lightning's would start
  (``on_train_start``): each batch ``.to(device)``, the module's own ``training_step``
  (``self.log`` does nothing there), ``backward``, ``step`` and ``zero_grad`` of its optimizer;
  a module that optimizes by hand steps its own.

Each run warms up, then times a number of batches; runs alternate between the ways to spread a
busy machine's noise. The last line printed is ``ratio <template / raw>`` (median samples per
second), also in a JSON file, with the same ratio by process CPU time (steadier on a busy
machine). Named workloads: ``configs/bench.yaml``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lightning.pytorch import Callback

METHODS = {"raw": "hand-written loop", "template": "template (Lightning's loop)"}
PACKAGE = __package__ or __name__.rpartition(".")[0]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    from omegaconf import OmegaConf

    from .config import config_dir

    named = OmegaConf.to_container(OmegaConf.load(config_dir() / "bench.yaml"))
    assert isinstance(named, dict)
    parser = argparse.ArgumentParser(prog=f"python -m {PACKAGE}.bench", description=__doc__)
    parser.add_argument("overrides", nargs="*", help="train.py's overrides (model=mine ...)")
    parser.add_argument("--workload", choices=[*named, "none"], default="mlp")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--steps", type=int, help="timed batches per run (default: per workload)")
    parser.add_argument("--warmup", type=int, help="untimed batches before them (at least 1)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each way, alternating")
    parser.add_argument("--threads", type=int, help="torch CPU threads (1: steadier when busy)")
    parser.add_argument("--out", type=Path, default=Path("logs/bench"), help="output folder")
    args = parser.parse_args(argv)
    workload = named.get(args.workload, {})
    args.overrides = [*workload.get("overrides", []), *args.overrides]
    args.steps = args.steps or workload.get("steps", 300)
    args.warmup = max(1, args.warmup or workload.get("warmup", 30))
    args.name = args.workload if args.workload != "none" else "custom"
    if args.steps < 1 or args.repeats < 1:
        parser.error("--steps and --repeats must be at least 1")
    return args


def compose(args: argparse.Namespace) -> Any:
    """The config `python train.py OVERRIDES` composes, on one device, without loggers."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import open_dict

    from .config import config_dir
    from .run.entry import with_trainer_arguments

    accelerator = "gpu" if args.device == "cuda" else "cpu"
    overrides = [*args.overrides, f"trainer.accelerator={accelerator}", "trainer.devices=1"]
    overrides += ["trainer.strategy=auto", "logger=none"]
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = hydra_compose(config_name="train", overrides=with_trainer_arguments(overrides))
    with open_dict(cfg):
        cfg.paths.output_dir = tempfile.mkdtemp(prefix="bench-")
    return cfg


class Clock(Callback):
    """Wall-clock and process CPU time of the batches after ``warmup``, and their samples; as
    a callback it stops Lightning's loop when they are done."""

    def __init__(self, device: str, warmup: int, steps: int) -> None:
        self.device, self.warmup, self.steps = device, warmup, steps
        self.batches = self.samples = self.batch_size = 0
        self.wall = self.cpu = 0.0

    def tick(self, batch: Any) -> bool:
        """After each batch: True once the timed batches are done."""
        import torch
        from lightning.pytorch.utilities.data import extract_batch_size

        self.batches += 1
        self.batch_size = self.batch_size or extract_batch_size(batch)
        if self.batches in (self.warmup, self.warmup + self.steps) and self.device == "cuda":
            torch.cuda.synchronize()
        if self.batches == self.warmup:
            self.wall, self.cpu = time.perf_counter(), time.process_time()
        elif self.batches > self.warmup:
            self.samples += extract_batch_size(batch)
        if self.batches < self.warmup + self.steps:
            return False
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        return True

    def on_train_start(self, trainer: Any, module: Any) -> None:
        # Validation is off: a schedule that follows a validation metric has none to follow.
        schedules = [c for c in trainer.lr_scheduler_configs if c.monitor is None]
        trainer.strategy.lr_scheduler_configs = schedules

    def on_train_batch_end(self, trainer: Any, module: Any, out: Any, batch: Any, i: int) -> None:
        if self.tick(batch):  # batches, not `max_steps`: a GAN takes two optimizer steps a batch
            trainer.should_stop = True


def _no_log(*args: Any, **kwargs: Any) -> None:
    """``self.log`` in a hand-written loop: there is nothing to log to."""


class HandWrittenLoop(Callback):
    """The tutorial loop (see the module docstring), run where Lightning's would start; then
    the fit stops before Lightning's loop takes a step."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def on_train_start(self, trainer: Any, module: Any) -> None:
        from lightning.pytorch.utilities import move_data_to_device

        module.log = module.log_dict = _no_log
        optimizer, manual = trainer.optimizers[0], not module.automatic_optimization
        takes_index = len(inspect.signature(module.training_step).parameters) > 1
        module.train()
        try:
            while True:
                for index, batch in enumerate(trainer.train_dataloader):
                    batch = move_data_to_device(batch, module.device)
                    with trainer.precision_plugin.forward_context():
                        out = module.training_step(*(batch, index)[: 1 + takes_index])
                    loss = out["loss"] if isinstance(out, Mapping) else out
                    if not manual and loss is not None:
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                    if self.clock.tick(batch):
                        trainer.should_stop = True
                        return
        except Exception as error:
            sys.exit(
                f"The hand-written loop cannot run {type(module).__name__}.training_step outside "
                f"Lightning's loop ({type(error).__name__}: {error}); nothing to compare with."
            )


def run(cfg: Any, args: argparse.Namespace, method: str) -> dict[str, float]:
    """One timed run of a way: samples per second by the wall clock and by CPU time."""
    import torch
    from lightning.pytorch.callbacks import Checkpoint

    from .run import build

    clock = Clock(args.device, args.warmup, args.steps)
    if method == "template":
        run_callbacks = build.instantiate_group(cfg.callbacks)
        callbacks = [c for c in run_callbacks if not isinstance(c, Checkpoint)] + [clock]
    else:
        callbacks = [HandWrittenLoop(clock)]
    trainer = build.trainer(
        cfg,
        callbacks,
        [],
        max_epochs=-1,
        max_steps=4 * (args.warmup + args.steps),  # for schedules sized by the trainer
        min_epochs=0,
        min_steps=None,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        enable_checkpointing=False,
        enable_model_summary=False,
        **({} if method == "template" else {"enable_progress_bar": False}),
    )
    data = build.instantiate_data(cfg)
    torch.manual_seed(0)
    trainer.fit(build.model_for_data(cfg, data), datamodule=data)
    cpu = clock.samples / max(clock.cpu, 1e-9)
    return {"wall": clock.samples / clock.wall, "cpu": cpu, "batch_size": clock.batch_size}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    import lightning
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA GPU is available here; use --device cpu.")
    from .devices.precision import set_float32_matmul_precision
    from .run import entry

    entry.register()
    set_float32_matmul_precision("high")
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = compose(args)
    runs: dict[str, list[dict[str, float]]] = {method: [] for method in METHODS}
    for repeat in range(args.repeats):
        for method in list(METHODS)[:: 1 if repeat % 2 else -1]:  # in turn first
            rates = run(cfg, args, method)
            runs[method].append(rates)
            print(
                f"repeat {repeat + 1}/{args.repeats} {method:>8}: {rates['wall']:>10,.0f} "
                f"samples/s ({rates['cpu']:,.0f} per CPU second)"
            )

    def median(method: str, clock: str = "wall") -> float:
        return statistics.median(rates[clock] for rates in runs[method])

    cpu = f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
    result = {
        "workload": args.name,
        "overrides": list(args.overrides),
        "device": args.device,
        "device_name": torch.cuda.get_device_name(0) if args.device == "cuda" else cpu,
        "batch_size": int(runs["template"][0]["batch_size"]),
        "steps": args.steps,
        "versions": {"torch": torch.__version__, "lightning": lightning.__version__},
        "methods": {
            method: {
                "samples_per_s": [round(rates["wall"], 1) for rates in runs[method]],
                "median": round(median(method), 1),
            }
            for method in METHODS
        },
        "ratio": round(median("template") / median("raw"), 3),
        "cpu_ratio": round(median("template", "cpu") / median("raw", "cpu"), 3),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / f"bench_{args.name}_{args.device}.json"
    json_path.write_text(json.dumps(result, indent=2) + "\n")
    print()
    for method, label in METHODS.items():
        print(f"{label:<30} {median(method):>10,.0f} samples/s (median)")
    print(f"template / hand-written loop by CPU time {result['cpu_ratio']}; wrote {json_path}")
    print(f"ratio {result['ratio']:.3f}")
    return result


if __name__ == "__main__":
    main()
