"""Benchmark: this template's training throughput against a hand-written PyTorch loop.

    python -m my_project.machinery.bench                       # the `mlp` workload (bench.yaml)
    python -m my_project.machinery.bench --workload cnn --device cuda --on-device
    python -m my_project.machinery.bench model=mine data=mine  # any module and data module
    python -m my_project.machinery.bench --startup             # also: seconds to first step

In one process, on one device, the same module (same initial weights) trains on the same data
with the same batch size, optimizer and number of steps, three ways:

1. ``raw``: a hand-written loop, as a tutorial writes it: ``model.to(device)``, the batch
   ``.to(device)``, the module's own ``training_step`` for the loss (its metrics included;
   ``self.log`` does nothing outside a Trainer), ``zero_grad``, ``backward``, ``step``, over a
   plain ``DataLoader`` of the training split, with the module's optimizer at torch's default
   implementation;
2. ``template``: the module and data module through ``lightning.Trainer`` as `train.py`
   builds them, with the template's step machinery (progress bar, lean steps, resumable
   loader; validation, checkpoints and loggers off: they are not part of a training step),
   the data path as ``data.on_device`` picks it where the data module has that switch;
3. ``raw_template_data``: the hand-written loop fed by the template's data path and using the
   optimizer exactly as configured (e.g. ``fused``): the limit of what the template configures,
   so ``template / raw_template_data`` is Lightning's own overhead.

Each run warms up, then times a fixed number of steps; runs alternate between the three ways
(in rotating order) to spread the machine's noise evenly. Fixed start-up costs (imports,
building the Trainer) are not in the throughput: ``--startup`` measures them separately.
Writes a JSON file and a PNG bar chart; the last line printed is ``ratio <template/raw>``.
Named workloads (their overrides and step counts) are in ``configs/bench.yaml``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence, Sized
from pathlib import Path
from typing import Any

METHODS = {
    "raw": "hand-written loop, DataLoader",
    "template": "template (Lightning)",
    "raw_template_data": "hand-written loop, template data + optimizer",
}
PACKAGE = __package__ or __name__.rpartition(".")[0]
# Optimizer arguments that choose an implementation, not the algorithm: a tutorial leaves
# them at torch's defaults, the template may configure them (way 1 drops them).
IMPLEMENTATION_FLAGS = ("fused", "foreach", "capturable", "differentiable")
# Without `--steps`, `--warmup` and a workload that sets them.
DEFAULT_STEPS, DEFAULT_WARMUP = 300, 30


def workloads() -> dict[str, dict[str, Any]]:
    """The named workloads of ``configs/bench.yaml`` (none if the file is gone)."""
    from omegaconf import OmegaConf

    from .config import config_dir

    path = config_dir() / "bench.yaml"
    if not path.is_file():
        return {}
    loaded = OmegaConf.to_container(OmegaConf.load(path))
    assert isinstance(loaded, dict)
    return {str(name): dict(spec) for name, spec in loaded.items()}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    named = workloads()
    parser = argparse.ArgumentParser(
        prog=f"python -m {PACKAGE}.bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        help="Hydra overrides of train.py, after the workload's (e.g. model=mine data=mine)",
    )
    parser.add_argument(
        "--workload",
        choices=[*sorted(named), "none"],
        default="mlp" if "mlp" in named else "none",
        help="a named workload of configs/bench.yaml; `none`: only the overrides given",
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--on-device",
        choices=["auto", "true", "false"],
        nargs="?",
        const="true",
        default="auto",
        help="data.on_device for the template and its data path in way 3, where the data "
        "module has that switch (default: its config's; --on-device alone: true)",
    )
    parser.add_argument("--steps", type=int, help="timed steps per run (default: per workload)")
    parser.add_argument("--warmup", type=int, help="untimed steps before each run")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each way, alternating")
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
    workload = named.get(args.workload, {})
    args.overrides = [*workload.get("overrides", []), *args.overrides]
    args.steps = args.steps or workload.get("steps", DEFAULT_STEPS)
    args.warmup = workload.get("warmup", DEFAULT_WARMUP) if args.warmup is None else args.warmup
    args.name = args.workload if args.workload != "none" else "custom"
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
    from .run.trainer_arguments import with_trainer_arguments

    overrides = [
        # The template's step machinery, no checkpoints or plots (an override can change it).
        "callbacks=[progress_bar,resumable_loader]",
        *args.overrides,
        f"trainer.accelerator={'gpu' if args.device == 'cuda' else 'cpu'}",
        "trainer.devices=1",
        "trainer.strategy=auto",
        "logger=none",
    ]
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = hydra_compose(config_name="train", overrides=with_trainer_arguments(overrides))
    with open_dict(cfg):
        cfg.paths.output_dir = tempfile.mkdtemp(prefix="bench-")
        if "on_device" in cfg.data and args.on_device != "auto":
            cfg.data.on_device = args.on_device == "true"
        if cfg.model.get("scheduler") is not None:
            cfg.model.scheduler = None  # the hand-written loop has none
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


def _batch_size(batch: Any) -> int:
    from lightning.pytorch.utilities.data import extract_batch_size

    return extract_batch_size(batch)


def _loss(output: Any) -> Any:
    """The loss a ``training_step`` returned (a tensor, or a dict with ``loss``)."""
    return output["loss"] if isinstance(output, dict) else output


def _no_log(*args: Any, **kwargs: Any) -> None:
    """``self.log`` in a hand-written loop: there is nothing to log to."""


def hand_written_loop(
    module: Any,
    optimizers: list[Any],
    batches: Callable[[], Iterable[Any]],
    device: Any,
    warmup: int,
    steps: int,
    schedulers: list[Any] | None = None,
) -> dict[str, float]:
    """The tutorial loop around the module's own step; samples per second over ``steps``
    steps after ``warmup``.

    Automatic optimization: ``zero_grad``, the step's loss, ``backward``, ``step`` of the
    first optimizer. Manual optimization (``self.automatic_optimization = False``, a GAN): the
    module's step does its optimizers' work itself, as its own loop would; what it asks of a
    Trainer (``self.optimizers()``, ``manual_backward``, ``self.trainer.is_last_batch``...)
    is answered by `LoopState` (for any module: a step may read its optimizer's lr).
    """
    from lightning.pytorch.utilities import move_data_to_device

    module.to(device)
    module.train()
    module.log = module.log_dict = _no_log
    manual = not module.automatic_optimization
    # What the step may ask of a Trainer (`self.optimizers()`, to log the lr, too)
    loop = LoopState(module, optimizers, schedulers or [])
    with_index = _takes_batch_idx(module)
    watch = Stopwatch(device)
    step = 0
    while True:
        epoch = batches()
        size = len(epoch) if isinstance(epoch, Sized) else -1  # `trainer.is_last_batch`
        for index, batch in enumerate(epoch):
            if step == warmup:
                watch.start()
            batch = move_data_to_device(batch, device)
            arguments = (batch, index) if with_index else (batch,)
            loop.is_last_batch = index == size - 1
            if manual:
                module.training_step(*arguments)
                loop.global_step += 1
            else:
                optimizers[0].zero_grad()
                loss = _loss(module.training_step(*arguments))
                loss.backward()
                optimizers[0].step()
                loop.global_step += 1
            step += 1
            if step > warmup:
                watch.samples += _batch_size(batch)
            if step == warmup + steps:
                watch.stop()
                return watch.rates()
        loop.current_epoch += 1


def _takes_batch_idx(module: Any) -> bool:
    """Whether ``training_step`` takes ``batch_idx`` (Lightning passes it only then)."""
    parameters = inspect.signature(module.training_step).parameters.values()
    return len(parameters) > 1 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


class LoopState:
    """What a manually optimizing module's step asks of its Trainer, in a hand-written loop:
    ``self.optimizers()`` and ``self.lr_schedulers()`` (the torch objects themselves),
    ``self.manual_backward(loss)`` (``loss.backward()``), ``self.toggle_optimizer`` (Lightning's
    own, which reads ``trainer.optimizers``), ``self.trainer.is_last_batch``,
    ``current_epoch`` and ``global_step``."""

    def __init__(self, module: Any, optimizers: list[Any], schedulers: list[Any]) -> None:
        from types import SimpleNamespace

        self.optimizers = optimizers
        self.lr_scheduler_configs = [SimpleNamespace(scheduler=s) for s in schedulers]
        self.is_last_batch = False
        self.current_epoch = self.global_step = 0
        self.training, self.sanity_checking = True, False
        module.optimizers = lambda use_pl_optimizer=True: (
            optimizers[0] if len(optimizers) == 1 else list(optimizers)
        )
        module.lr_schedulers = lambda: (
            None if not schedulers else schedulers[0] if len(schedulers) == 1 else schedulers
        )
        module.manual_backward = lambda loss, *args, **kwargs: loss.backward(*args, **kwargs)
        module._trainer = self  # `self.trainer` in the module's step reads this object


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
        self.module = module
        return module

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self.step == self.warmup:
            self.watch.start()

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.step += 1
        if self.step > self.warmup:
            self.watch.samples += _batch_size(batch)
        if self.step == self.warmup + self.steps:
            self.watch.stop()
            # Batches, not `max_steps`: Lightning's steps are optimizer steps (two a batch in
            # a GAN, one every N batches with accumulation).
            self.module.trainer.should_stop = True


def configured_optimizers(module: Any) -> tuple[list[Any], list[Any]]:
    """The optimizers and learning-rate schedulers of whatever ``configure_optimizers``
    returned, parsed by Lightning's own parser (every form Lightning takes works here)."""
    from lightning.pytorch.core.optimizer import _configure_optimizers

    optimizers, schedulers, _ = _configure_optimizers(module.configure_optimizers())
    return list(optimizers), [
        config["scheduler"] if isinstance(config, dict) else config for config in schedulers
    ]


def tutorial_loader(loader: Any) -> Any:
    """A plain, shuffling ``DataLoader`` of the data set ``loader`` reads, as a tutorial
    writes it (one sample at a time, the default collate function unless the loader has its
    own)."""
    from torch.utils.data import DataLoader, TensorDataset

    from .data.batching import keep_batch

    dataset = loader.dataset
    if isinstance(dataset, TensorDataset):
        dataset = TensorDataset(*dataset.tensors)  # without whole-batch indexing
    collate = None if loader.collate_fn is keep_batch else loader.collate_fn
    return DataLoader(dataset, batch_size=loader.batch_size, shuffle=True, collate_fn=collate)


def _without_schedulers(configure: Callable[[], Any]) -> Callable[[], Any]:
    """``configure_optimizers`` returning its optimizers alone: the hand-written loop steps
    no scheduler (and one that follows a validation metric, ReduceLROnPlateau, has none to
    follow here: validation is off)."""

    def configure_optimizers() -> Any:
        from lightning.pytorch.core.optimizer import _configure_optimizers

        return _configure_optimizers(configure())[0]

    return configure_optimizers


def _default_implementation(optimizer: Any) -> Any:
    """The same optimizer class and settings over the same parameters, at torch's default
    implementation (no ``fused``, ``foreach``...)."""
    accepted = inspect.signature(type(optimizer)).parameters
    groups = [
        {
            k: v
            for k, v in group.items()
            if k not in IMPLEMENTATION_FLAGS and k in {*accepted, "params"}
        }
        for group in optimizer.param_groups
    ]
    return type(optimizer)(groups)


class Bench:
    """Builds each way from the same config and times one run of it."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        from .run import build, entry

        entry.register()
        self.args = args
        self.cfg = compose(args)
        self.device = torch.device(args.device)
        self.datamodule = build.instantiate_data(self.cfg)
        self.datamodule.prepare_data()
        self.datamodule.setup("fit")
        # A Trainer that never fits: the data module may ask an attached one which device it
        # trains on (`data.on_device` on the in-memory base), here and in way 3's loader.
        self.probe = self._trainer(1, [])
        self.datamodule.trainer = self.probe
        self.template_loader = self._template_loader()
        self.datamodule.trainer = None
        plain = build.instantiate_data(self.cfg, on_device=False)
        plain.prepare_data()
        plain.setup("fit")
        self.raw_loader = tutorial_loader(plain.train_dataloader())
        self.batch_size = int(self.raw_loader.batch_size)
        self.train_samples = len(self.raw_loader.dataset)

    def _template_loader(self) -> Any:
        from .callbacks.resumable_loader import resumable

        return resumable(self.datamodule.train_dataloader(), self.cfg.get("seed"))

    @property
    def data_path(self) -> str:
        from torch.utils.data import DataLoader

        return (
            "a DataLoader"
            if isinstance(self.template_loader, DataLoader)
            else "sliced on the device"
        )

    def _trainer(self, max_steps: int, callbacks: list[Any]) -> Any:
        from .run import build

        return build.trainer(
            self.cfg,
            callbacks,
            [],
            max_steps=max_steps,
            max_epochs=-1,
            min_epochs=0,
            min_steps=None,
            limit_val_batches=0,
            num_sanity_val_steps=0,
            enable_checkpointing=False,
            enable_model_summary=False,
        )

    def _model(self) -> Any:
        import torch

        from .run.build import model_for_data

        torch.manual_seed(0)
        module = model_for_data(self.cfg, self.datamodule)
        # Layers made in `configure_model` exist before `configure_optimizers`, as in a fit
        # (Lightning calls the hook again there; the docs make it idempotent).
        module.configure_model()
        return module

    def _raw_model_and_optimizers(self, method: str) -> tuple[Any, list[Any], list[Any]]:
        """The module, its optimizers and schedulers: as configured (way 3) or as a tutorial
        writes them (way 1: same classes and hyperparameters, torch's default
        implementation; its schedulers then drive those optimizers)."""
        module = self._model()
        optimizers, schedulers = configured_optimizers(module)
        if method == "raw":
            tutorial = [_default_implementation(optimizer) for optimizer in optimizers]
            for scheduler in schedulers:  # the same schedule, on the tutorial's optimizer
                scheduler.optimizer = tutorial[optimizers.index(scheduler.optimizer)]
            optimizers = tutorial
        return module, optimizers, schedulers

    def run(self, method: str) -> dict[str, float]:
        """One timed run of a way: samples per second by the wall clock and by CPU time."""
        args = self.args
        if method == "template":
            from .run.build import instantiate_group

            timer = StepTimer(args.warmup, args.steps, self.device)
            trainer = self._trainer(-1, instantiate_group(self.cfg.get("callbacks")))
            module = timer.attach(self._model())
            if module.automatic_optimization:  # as in the hand-written loop: no scheduler
                module.configure_optimizers = _without_schedulers(module.configure_optimizers)
            trainer.fit(module, datamodule=self.datamodule)
            return timer.watch.rates()
        module, optimizers, schedulers = self._raw_model_and_optimizers(method)
        if method == "raw":
            batches: Callable[[], Iterable[Any]] = lambda: self.raw_loader  # noqa: E731
        else:
            batches = self._template_batches
        return hand_written_loop(
            module, optimizers, batches, self.device, args.warmup, args.steps, schedulers
        )

    def _template_batches(self) -> Iterable[Any]:
        self.datamodule.trainer = self.probe
        try:
            return self._template_loader()
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


def measure_startup(args: argparse.Namespace, repeats: int) -> dict[str, list[float]]:
    """`train --help` seconds, and seconds from process start to the first training step."""
    help_s, first_step_s = [], []
    accelerator = "gpu" if args.device == "cuda" else "cpu"
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
            start = _run_train("--help", cwd=tmp)
            help_s.append(time.time() - start)
            marker = Path(tmp) / "first_step"
            start = _run_train(
                *args.overrides,
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
    startup = measure_startup(args, args.repeats) if args.startup else None

    bench = Bench(args)
    print(f"template data path: {bench.data_path} (data.on_device={args.on_device})")
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
        "workload": args.name,
        "overrides": list(args.overrides),
        "device": args.device,
        "device_name": device_name(args.device),
        "on_device": args.on_device,
        "data_path": bench.data_path,
        "batch_size": bench.batch_size,
        "train_samples": bench.train_samples,
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
    stem = f"bench_{args.name}_{args.device}{suffix}"
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
