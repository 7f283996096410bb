"""Benchmark: this template's training throughput against the hand-written PyTorch loop.

    python -m my_project.bench --workload mlp --device cpu     # digits MLP, batch 64
    python -m my_project.bench --workload cnn --device cuda --on-device
    python -m my_project.bench --startup                       # also: seconds to first step

In one process, on one device, the same network (same initial weights) trains on the same
in-memory data with the same batch size, optimizer and number of steps, three ways:

1. ``raw``: the tutorial loop (``model.to(device)``, ``x.to(device)``, ``zero_grad``,
   ``backward``, ``step``) over a ``DataLoader(TensorDataset)``, with the template's optimizer
   class and hyperparameters at torch's default implementation (as a tutorial writes it);
2. ``template``: this project's LightningModule and DataModule through ``lightning.Trainer``,
   metrics on, configured by the project's own configs (validation, checkpoints and loggers
   off: they are not part of a training step; the template's progress bar on; its data path
   as ``data.on_device`` picks it: ``auto`` slices batches in place on CPU, a DataLoader on
   CUDA unless ``--on-device``);
3. ``raw_template_data``: the tutorial loop fed by the template's data path and using the
   optimizer exactly as the template configures it (``fused``): the limit for what the
   template configures, so ``template / raw_template_data`` is Lightning's own overhead.

Each run warms up, then times a fixed number of steps; runs alternate between the three ways
(in rotating order) to spread the machine's noise evenly. Fixed start-up costs (imports,
building the Trainer) are not in the throughput: ``--startup`` measures them separately.
Writes a JSON file and a PNG bar chart; the last line printed is ``ratio <template/raw>``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

# workload -> Hydra overrides of the template and the default number of timed steps
WORKLOADS: dict[str, dict[str, Any]] = {
    "mlp": {
        "overrides": ["data=digits", "model/net=mlp", "data.batch_size=64"],
        "steps": 1000,
        "warmup": 100,
    },
    "cnn": {
        "overrides": ["data=synthetic", "model/net=cnn", "data.batch_size=128"],
        # ~20 ms steps on a 2-core CPU: 150 of them make a run long enough to average out
        # a noisy machine's second-to-second swings.
        "steps": 150,
        "warmup": 10,
    },
}
METHODS = {
    "raw": "hand-written loop, DataLoader",
    "template": "template (Lightning, metrics on)",
    "raw_template_data": "hand-written loop, template data + optimizer",
}
PACKAGE = __package__ or __name__.rpartition(".")[0]
# Optimizer arguments that choose an implementation, not the algorithm: a tutorial leaves
# them at torch's defaults, the template may configure them (way 1 drops them).
IMPLEMENTATION_FLAGS = ("fused", "foreach", "capturable")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"python -m {PACKAGE}.bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="mlp")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--on-device",
        choices=["auto", "true", "false"],
        nargs="?",
        const="true",
        default="auto",
        help="data.on_device for the template and its data path in way 3 (default: the "
        "config's auto, which slices batches in place on CPU; --on-device alone: true)",
    )
    parser.add_argument("--steps", type=int, help="timed steps per run (default: per workload)")
    parser.add_argument("--warmup", type=int, help="untimed steps before each run")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each way, alternating")
    parser.add_argument("--samples", type=int, help="size of the synthetic data set (cnn)")
    parser.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads (default: torch's; 1 is steadier on a busy machine)",
    )
    parser.add_argument(
        "--startup",
        action="store_true",
        help="also time `train --help` and process start to the first training step",
    )
    parser.add_argument("--out", type=Path, default=Path("logs/bench"), help="output folder")
    args = parser.parse_args(argv)
    workload = WORKLOADS[args.workload]
    args.steps = args.steps or workload["steps"]
    args.warmup = workload["warmup"] if args.warmup is None else args.warmup
    if args.steps < 1 or args.warmup < 0 or args.repeats < 1:
        parser.error("--steps and --repeats must be at least 1, --warmup at least 0")
    return args


# -- the pieces shared by the three ways ---------------------------------------------------
def compose(args: argparse.Namespace) -> Any:
    """The template's config for this workload, as `train.py` would compose it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import open_dict

    from .config import config_dir

    overrides = [
        *WORKLOADS[args.workload]["overrides"],
        f"data.on_device={args.on_device}",
        f"trainer.accelerator={'gpu' if args.device == 'cuda' else 'cpu'}",
        "trainer.devices=1",
        "model.scheduler=null",  # the raw loop has none; same optimizer, same learning rate
        "logger=none",
        "callbacks=progress_bar",  # the template's bar; no checkpoints or plots
    ]
    if args.samples and args.workload == "cnn":
        overrides.append(f"data.num_samples={args.samples}")
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = hydra_compose(config_name="train", overrides=overrides)
    with open_dict(cfg):
        cfg.paths.output_dir = tempfile.mkdtemp(prefix="bench-")
    return cfg


class Stopwatch:
    """Wall-clock and process CPU time of the timed steps, and the samples they processed.

    CPU time is a second view for busy machines: other processes stretch the wall clock of
    every way alike, but they do not add to this process's CPU time (with one thread).
    """

    def __init__(self, device: Any) -> None:
        self.device = device
        self.wall = self.cpu = 0.0
        self.samples = 0

    def _sync(self) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def start(self) -> None:
        self._sync()
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> None:
        self._sync()
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def rates(self) -> dict[str, float]:
        """Samples per second, by the wall clock and by CPU time."""
        return {"wall": self.samples / self.wall, "cpu": self.samples / max(self.cpu, 1e-9)}


def hand_written_loop(
    model: Any,
    optimizer: Any,
    batches: Callable[[], Iterable[Any]],
    device: Any,
    warmup: int,
    steps: int,
) -> dict[str, float]:
    """The tutorial loop; returns samples per second over ``steps`` steps after ``warmup``."""
    import torch.nn.functional as F

    model.to(device)
    model.train()
    watch = Stopwatch(device)
    step = 0
    while True:
        for x, y in batches():
            if step == warmup:
                watch.start()
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            step += 1
            if step > warmup:
                watch.samples += len(y)
            if step == warmup + steps:
                watch.stop()
                return watch.rates()


class StepTimer:
    """Times the template's steps exactly as `hand_written_loop` times its own.

    It becomes the LightningModule's own ``on_train_batch_start``/``_end`` hooks, which
    Lightning calls on every step anyway. As a Callback it would add a call of each of the
    dozen per-step callback hooks: a cost of the measurement, not of the template.
    """

    def __init__(self, warmup: int, steps: int, device: Any) -> None:
        self.warmup, self.steps = warmup, steps
        self.watch = Stopwatch(device)
        self.step = 0  # its own count: `trainer.global_step` is a chain of properties

    def attach(self, module: Any) -> Any:
        module.on_train_batch_start = self.on_train_batch_start
        module.on_train_batch_end = self.on_train_batch_end
        return module

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self.step == self.warmup:
            self.watch.start()

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.step += 1
        if self.step > self.warmup:
            self.watch.samples += len(batch[1])
        if self.step == self.warmup + self.steps:
            self.watch.stop()


class Bench:
    """Builds each way from the same config and times one run of it."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch
        from hydra.utils import instantiate

        self.args = args
        self.cfg = compose(args)
        self.device = torch.device(args.device)
        self.datamodule = instantiate(self.cfg.data)
        self.datamodule.setup("fit")
        self.images, self.labels = self.datamodule.splits["train"]
        self.batch_size = int(self.cfg.data.batch_size)
        # A Trainer that never fits: the data module only asks an attached one which device
        # it trains on, to resolve `data.on_device` (auto: sliced in place on CPU) here and to
        # build way 3's loader in `run`.
        self.probe = self._trainer(1, [])
        self.datamodule.trainer = self.probe
        self.on_device = self.datamodule.slices_on_device()
        self.datamodule.trainer = None

    def _trainer(self, max_steps: int, callbacks: list[Any]) -> Any:
        from hydra.utils import instantiate

        return instantiate(
            self.cfg.trainer,
            max_steps=max_steps,
            max_epochs=-1,
            limit_val_batches=0,
            num_sanity_val_steps=0,
            enable_checkpointing=False,
            enable_model_summary=False,
            logger=False,
            callbacks=callbacks,
        )

    def _model(self) -> Any:
        import torch

        from .run.build import model_for_data

        torch.manual_seed(0)
        return model_for_data(self.cfg, self.datamodule)

    def _raw_model_and_optimizer(self, method: str) -> tuple[Any, Any]:
        """The template's network, and its optimizer: as configured (way 3) or as a tutorial
        writes it (way 1: same class and hyperparameters, torch's default implementation)."""
        from hydra.utils import instantiate
        from omegaconf import OmegaConf

        net = self._model().net
        spec = OmegaConf.to_container(self.cfg.model.optimizer)
        assert isinstance(spec, dict)
        if method == "raw":
            spec = {k: v for k, v in spec.items() if k not in IMPLEMENTATION_FLAGS}
        return net, instantiate(spec, params=net.parameters(), lr=self.cfg.model.lr)

    def run(self, method: str) -> dict[str, float]:
        """One timed run of a way: samples per second by the wall clock and by CPU time."""
        args = self.args
        if method == "template":
            from .run.build import instantiate_group

            timer = StepTimer(args.warmup, args.steps, self.device)
            # The template's own callbacks (its progress bar, see `compose`).
            trainer = self._trainer(
                args.warmup + args.steps, instantiate_group(self.cfg.get("callbacks"))
            )
            trainer.fit(timer.attach(self._model()), datamodule=self.datamodule)
            return timer.watch.rates()
        net, optimizer = self._raw_model_and_optimizer(method)
        if method == "raw":
            from torch.utils.data import DataLoader, TensorDataset

            loader = DataLoader(
                TensorDataset(self.images, self.labels), batch_size=self.batch_size, shuffle=True
            )
            batches: Callable[[], Iterable[Any]] = lambda: loader  # noqa: E731
        else:
            self.datamodule.trainer = self.probe
            batches = self.datamodule.train_dataloader
        try:
            return hand_written_loop(net, optimizer, batches, self.device, args.warmup, args.steps)
        finally:
            self.datamodule.trainer = None


# -- start-up ---------------------------------------------------------------------------
def first_step_marker(path: str) -> Any:
    """A callback writing the wall-clock time of the first training step to ``path``."""
    from lightning.pytorch import Callback

    class FirstStepMarker(Callback):
        def on_train_batch_start(self, trainer: Any, *_: Any) -> None:
            if trainer.global_step == 0 and trainer.is_global_zero:
                Path(path).write_text(repr(time.time()))

    return FirstStepMarker()


def _run_train(*cli: str, cwd: str) -> float:
    """Seconds from spawning `python -m <package>.train <cli>` to its exit."""
    env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    start = time.time()
    result = subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.run.train", *cli],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"`train {' '.join(cli)}` failed:\n{result.stderr[-3000:]}")
    return start


def measure_startup(device: str, repeats: int) -> dict[str, list[float]]:
    """`train --help` seconds, and seconds from process start to the first training step."""
    help_s, first_step_s = [], []
    accelerator = "gpu" if device == "cuda" else "cpu"
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
            start = _run_train("--help", cwd=tmp)
            help_s.append(time.time() - start)
            marker = Path(tmp) / "first_step"
            start = _run_train(
                f"trainer.accelerator={accelerator}",
                "++trainer.max_steps=1",
                "test=false",
                f"hydra.run.dir={tmp}/run",
                f"+callbacks.first_step._target_={PACKAGE}.bench.first_step_marker",
                f"+callbacks.first_step.path={marker}",
                cwd=tmp,
            )
            first_step_s.append(float(marker.read_text()) - start)
    return {"help_s": help_s, "first_step_s": first_step_s}


# -- report -----------------------------------------------------------------------------
def summarize(runs: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Median, min and max samples/s of each way (wall clock; CPU time alongside), and ratios."""

    def median(method: str, clock: str) -> float:
        return statistics.median(run[clock] for run in runs[method])

    methods = {}
    for method, method_runs in runs.items():
        wall = [run["wall"] for run in method_runs]
        methods[method] = {
            "label": METHODS[method],
            "samples_per_s": [round(v, 1) for v in wall],
            "median": round(median(method, "wall"), 1),
            "min": round(min(wall), 1),
            "max": round(max(wall), 1),
            "cpu_samples_per_s": [round(run["cpu"], 1) for run in method_runs],
            "cpu_median": round(median(method, "cpu"), 1),
        }
    return {
        "methods": methods,
        "ratio": round(median("template", "wall") / median("raw", "wall"), 3),
        "ratio_to_template_data": round(
            median("template", "wall") / median("raw_template_data", "wall"), 3
        ),
        # Each repeat runs the three ways back to back: their ratio within a repeat cancels
        # slow drifts in the machine's speed (the median of those is a second view).
        "paired_ratio": round(
            statistics.median(
                t["wall"] / r["wall"] for t, r in zip(runs["template"], runs["raw"], strict=True)
            ),
            3,
        ),
        "cpu_ratio": round(median("template", "cpu") / median("raw", "cpu"), 3),
        "cpu_ratio_to_template_data": round(
            median("template", "cpu") / median("raw_template_data", "cpu"), 3
        ),
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = result["methods"]
    names = list(methods)
    medians = [methods[m]["median"] for m in names]
    errors = [
        [m - methods[n]["min"] for n, m in zip(names, medians, strict=True)],
        [methods[n]["max"] - m for n, m in zip(names, medians, strict=True)],
    ]
    fig, ax = plt.subplots(figsize=(7.5, 4), constrained_layout=True)
    bars = ax.bar(
        [methods[n]["label"].replace(", ", ",\n") for n in names],
        medians,
        yerr=errors,
        capsize=6,
        color=["#9e9e9e", "#1f77b4", "#c7c7c7"],
    )
    ax.bar_label(bars, labels=[f"{m:,.0f}" for m in medians], label_type="center", color="white")
    ax.set(
        ylabel="samples / s (median, min-max)",
        title=(
            f"{result['workload']} on {result['device_name']}: template / raw = {result['ratio']:.2f}"
            f" (/ same data path = {result['ratio_to_template_data']:.2f})"
        ),
    )
    ax.title.set_fontsize(10)
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def device_name(device: str) -> str:
    import torch

    if device == "cuda":
        return torch.cuda.get_device_name(0)
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    import lightning
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA GPU is available here; use --device cpu.")
    from .devices.precision import set_float32_matmul_precision

    set_float32_matmul_precision("high")
    if args.threads:
        torch.set_num_threads(args.threads)
    startup = measure_startup(args.device, args.repeats) if args.startup else None

    bench = Bench(args)
    path = "sliced on the device" if bench.on_device else "a DataLoader"
    print(f"template data path: {path} (data.on_device={args.on_device})")
    runs: dict[str, list[dict[str, float]]] = {method: [] for method in METHODS}
    order = list(METHODS)
    for repeat in range(args.repeats):
        for method in order[repeat % 3 :] + order[: repeat % 3]:
            rates = bench.run(method)
            runs[method].append(rates)
            print(
                f"repeat {repeat + 1}/{args.repeats} {method:>17}: {rates['wall']:>10,.0f} samples/s"
                f" ({rates['cpu']:,.0f} per CPU second)"
            )

    result = {
        "workload": args.workload,
        "device": args.device,
        "device_name": device_name(args.device),
        "on_device": args.on_device,
        "data_path": "sliced on the device" if bench.on_device else "DataLoader",
        "batch_size": bench.batch_size,
        "train_samples": len(bench.labels),
        "steps": args.steps,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "versions": {"torch": torch.__version__, "lightning": lightning.__version__},
        **summarize(runs),
    }
    if startup is not None:
        result["startup"] = {
            key: {
                "values": [round(v, 3) for v in values],
                "median": round(statistics.median(values), 3),
            }
            for key, values in startup.items()
        }
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = {"auto": "", "true": "_on_device", "false": "_dataloader"}[args.on_device]
    stem = f"bench_{args.workload}_{args.device}{suffix}"
    json_path, png_path = args.out / f"{stem}.json", args.out / f"{stem}.png"
    json_path.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, png_path)

    print()
    for summary in result["methods"].values():
        print(
            f"{summary['label']:<46} {summary['median']:>10,.0f} samples/s"
            f"  (min {summary['min']:,.0f}, max {summary['max']:,.0f})"
        )
    print(
        "template / hand-written loop with the template's data path and optimizer: "
        f"{result['ratio_to_template_data']:.3f}"
    )
    print(f"template / raw within each repeat (median): {result['paired_ratio']:.3f}")
    print(
        f"by CPU time: template / raw {result['cpu_ratio']:.3f}, "
        f"/ same data path {result['cpu_ratio_to_template_data']:.3f}"
    )
    if startup is not None:
        for key, summary in result["startup"].items():
            print(f"startup {key}: median {summary['median']:.2f} s {summary['values']}")
    print(f"wrote {json_path} and {png_path}")
    print(f"ratio {result['ratio']:.3f}")
    return result


if __name__ == "__main__":
    main()
