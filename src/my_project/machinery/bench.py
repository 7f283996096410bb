"""Benchmark: Lightning's training loop against a hand-written PyTorch loop, for any module.

    python -m my_project.machinery.bench                       # the `mlp` workload (bench.yaml)
    python -m my_project.machinery.bench --workload none model=mine data=mine  # any module

The same module (same initial weights) trains on the same batches inside a real ``Trainer.fit``
two ways (docs/performance.md): ``template``, Lightning's loop with the run's callbacks;
``raw``, a tutorial's loop. The last line is ``ratio <template / raw>`` of samples per second.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from lightning.pytorch import Callback


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number >= 1")
    return int(text)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    import yaml

    from .config import config_dir

    named = yaml.safe_load((config_dir() / "bench.yaml").read_text())
    parser = argparse.ArgumentParser(prog=f"python -m {__package__}.bench")
    parser.add_argument("overrides", nargs="*", help="train.py's overrides (model=mine ...)")
    parser.add_argument("--workload", choices=[*named, "none"], default="mlp")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--steps", type=positive, help="timed batches per run (default: per workload)"
    )
    parser.add_argument(
        "--warmup", type=positive, help="untimed batches first (default: per workload)"
    )
    parser.add_argument("--repeats", type=positive, default=5, help="runs of each way, alternating")
    parser.add_argument(
        "--threads", type=positive, help="torch CPU threads (1: steadier when busy)"
    )
    args = parser.parse_args(argv)
    workload = named.get(args.workload, {})
    args.overrides = [*workload.get("overrides", []), *args.overrides]
    args.steps = max(1, args.steps or workload.get("steps", 300))
    args.warmup = max(1, args.warmup or workload.get("warmup", args.steps // 10))
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
        try:
            cfg = hydra_compose(config_name="train", overrides=with_trainer_arguments(overrides))
        except Exception as error:  # as train.py says it: one paragraph (`hydra_errors.py`)
            from .fault import teams_bug
            from .run.hydra_errors import explain

            if teams_bug(error) is not None:
                raise
            raise explain(error) from error
    with open_dict(cfg):
        cfg.paths.output_dir = tempfile.mkdtemp(prefix="bench-")
    return cfg


class Timed(Callback):
    """Times ``steps`` batches after ``warmup`` (wall clock, process CPU time), then stops the
    fit; with ``raw``, those of the hand-written loop it runs where Lightning's would start."""

    def __init__(self, raw: bool, device: str, warmup: int, steps: int) -> None:
        self.raw, self.device, self.warmup, self.steps = raw, device, warmup, steps
        self.batches = self.samples = self.batch_size = 0
        self.wall = self.cpu = 0.0

    def tick(self, trainer: Any, batch: Any) -> None:
        import torch
        from lightning.pytorch.utilities.data import extract_batch_size

        self.batches, size = self.batches + 1, extract_batch_size(batch)
        self.batch_size = self.batch_size or size
        if self.batches in (self.warmup, self.warmup + self.steps) and self.device == "cuda":
            torch.cuda.synchronize()
        if self.batches == self.warmup:
            self.wall, self.cpu = time.perf_counter(), time.process_time()
        elif self.batches > self.warmup:
            self.samples += size
        if self.batches == self.warmup + self.steps:  # batches: a GAN steps twice a batch
            self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
            trainer.should_stop = True

    def on_train_batch_end(self, trainer: Any, module: Any, out: Any, batch: Any, i: int) -> None:
        self.tick(trainer, batch)

    def on_train_start(self, trainer: Any, module: Any) -> None:
        # Validation is off: a schedule that follows a validation metric has none to follow.
        schedules = [c for c in trainer.lr_scheduler_configs if c.monitor is None]
        trainer.strategy.lr_scheduler_configs = schedules
        if not self.raw:
            return
        from lightning.pytorch.utilities import move_data_to_device

        module.log = module.log_dict = lambda *args, **kwargs: None  # nothing to log to
        optimizer, manual = trainer.optimizers[0], not module.automatic_optimization
        takes_index = len(inspect.signature(module.training_step).parameters) > 1
        module.train()
        while not trainer.should_stop:
            for index, batch in enumerate(trainer.train_dataloader):
                batch = move_data_to_device(batch, module.device)
                with trainer.precision_plugin.forward_context():
                    out = module.training_step(*(batch, index)[: 1 + takes_index])
                loss = out["loss"] if isinstance(out, Mapping) else out
                if not manual and loss is not None:
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                self.tick(trainer, batch)
                if trainer.should_stop:  # the fit then ends before Lightning's loop steps
                    break


def run(cfg: Any, args: argparse.Namespace, raw: bool) -> Timed:
    """One timed run of a way."""
    import torch
    from lightning.pytorch.callbacks import Checkpoint

    from .run import build

    timed = Timed(raw, args.device, args.warmup, args.steps)
    callbacks = [c for c in build.build_group(cfg, "callbacks") if not isinstance(c, Checkpoint)]
    with build.built_from(cfg, "trainer"):  # a value refused, or the team's bug (`boundary.py`)
        trainer = build.trainer(
            cfg,
            [timed] if raw else [*callbacks, timed],
            [],
            max_epochs=-1,
            max_steps=4 * (args.warmup + args.steps),  # for schedules sized by the trainer
            min_epochs=0,
            min_steps=None,
            limit_val_batches=0,
            num_sanity_val_steps=0,
            enable_checkpointing=False,
            enable_model_summary=False,
            **({"enable_progress_bar": False} if raw else {}),
        )
    with build.built_from(cfg, "data"):
        data = build.instantiate_data(cfg)
    torch.manual_seed(0)
    with build.built_from(cfg, "model"):
        model = build.model_for_data(cfg, data)
    trainer.fit(model, datamodule=data)
    return timed


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Time both ways; bad input is one paragraph and exit status 2, as in train.py."""
    from .errors import report_user_errors

    return report_user_errors(_main)(argv)


def _main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    import torch

    from .devices.precision import set_float32_matmul_precision
    from .run import entry

    entry.register()
    set_float32_matmul_precision("high")
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = compose(args)
    from .preflight.values import check_config_resolves, check_values

    check_values(cfg, check_config_resolves(cfg))  # what train.py checks before it builds
    runs: dict[str, list[Timed]] = {"raw": [], "template": []}
    for repeat in range(args.repeats):
        # in turn first, the template's way at once: its callbacks (the device guard) stop a
        # module as train.py stops it, before the hand-written loop meets what they stop for
        for way in ("template", "raw")[:: -1 if repeat % 2 else 1]:
            timed = run(cfg, args, raw=way == "raw")
            runs[way].append(timed)
            rate = timed.samples / timed.wall
            print(f"repeat {repeat + 1}/{args.repeats} {way:>8}: {rate:,.0f} samples/s")

    def median(way: str, clock: str = "wall") -> float:
        return statistics.median(t.samples / max(getattr(t, clock), 1e-9) for t in runs[way])

    result = {
        "workload": args.workload,
        "overrides": list(args.overrides),
        "device": args.device,
        "batch_size": runs["template"][0].batch_size,
        "samples_per_s": {way: round(median(way), 1) for way in runs},
        "ratio": round(median("template") / median("raw"), 3),
        "cpu_ratio": round(median("template", "cpu") / median("raw", "cpu"), 3),
    }
    rates = ", ".join(f"{way} {rate:,.0f}" for way, rate in result["samples_per_s"].items())
    print(f"\nmedian samples/s: {rates}; ratio template/raw per CPU second {result['cpu_ratio']}")
    print(f"ratio {result['ratio']:.3f}")
    return result


if __name__ == "__main__":
    from .errors import report_user_errors

    report_user_errors(main)()  # a bad value, a module the device guard stops: one paragraph
