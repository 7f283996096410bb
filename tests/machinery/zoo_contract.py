"""The zoo's contract, shared by its slow tests (test_zoo.py) and test_zoo_exhaustive.py: what
each module of `tests/machinery/zoo/` logs, plots and predicts, and the runs that check it.

Every run of a module uses the same seeded, deterministic settings, so one run in one process
is the reference that a killed-and-resumed run must equal bit for bit, and the checkpoint
that eval.py and predict.py read. Runs of several modules go through one process where they
can (a `-m` sweep over `experiment=zoo_<name>`), as a team sweeps its own experiments.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from .helpers import ROOT, SEARCH_MACHINERY_CONFIGS, clean_env, pinned, read_metrics, run_entry


@dataclass(frozen=True)
class Zoo:
    """What one module of the zoo is expected to leave."""

    test_metric: str  # in metrics.json after training and after eval.py
    curves: frozenset[str]  # keys of the plotted history (stage/name for unstaged names)
    task_plot: str | None  # confusion_matrix.png, predictions.png, or none (no (x, y) batches)
    predict_header: str | None  # None: predict.py stops with one Error paragraph
    # kill -9 and resume: (every_n_train_steps, step to pause at) in 1 and in 2 processes
    resume_one: tuple[int, int] = (5, 12)
    resume_two: tuple[int, int] = (5, 6)
    # its test step draws random numbers (a GAN's noise): eval.py's test, seeded by eval's
    # config, draws others than the training run's test did
    random_test: bool = False
    # Test metrics synchronised across processes under DDP: bit-equal to one process (counts:
    # torchmetrics' accuracy states), or equal to float rounding (float sums: a Metric's own
    # `sum` state, `self.log(..., sync_dist=True)`). The others are logged without sync_dist:
    # under DDP, rank 0's value.
    ddp_exact: tuple[str, ...] = ()
    ddp_rounded: tuple[str, ...] = ()
    # A GAN toggling its two optimizers leaves parameters out of each loss: DDP must be told
    # (`trainer.strategy=ddp` stops at its first step saying so).
    ddp_strategy: str = "ddp"


CLASSES3 = "index,target,prediction,prob_0,prob_1,prob_2"  # a classifier: class, probabilities
ACC = ("test_acc",)
ZOO: dict[str, Zoo] = {
    "two_val_loaders": Zoo(
        "test_acc",
        frozenset(
            {
                "train_loss",
                "val_loss/dataloader_idx_0",
                "val_loss/dataloader_idx_1",
                "val_acc/dataloader_idx_0",
                "val_acc/dataloader_idx_1",
            }
        ),
        "confusion_matrix.png",
        CLASSES3,
        ddp_exact=ACC,
    ),
    "dropout_noise": Zoo(
        "test_loss",
        frozenset({"train_loss", "val_loss"}),
        "predictions.png",
        "index,target,prediction",
    ),
    "gan": Zoo(
        "test_distance",
        frozenset({"train/g_loss", "train/d_loss", "val_distance"}),
        None,
        None,  # its forward takes noise: it needs a predict_step, and is told so
        resume_one=(5, 24),  # two optimizer steps a batch
        resume_two=(5, 12),
        random_test=True,
        ddp_strategy="ddp_find_unused_parameters_true",
    ),
    "plateau": Zoo(
        "test_acc",
        frozenset({"train_loss", "train/lr", "val_loss", "val_acc"}),
        "confusion_matrix.png",
        CLASSES3,
        ddp_exact=ACC,
    ),
    "binary": Zoo(
        "test_acc",
        frozenset({"train_loss", "val_loss", "val_acc"}),
        "confusion_matrix.png",
        "index,target,prediction,prob",
        ddp_exact=ACC,
    ),
    "autoencoder": Zoo(
        "test_loss",
        frozenset({"train_loss", "val_loss"}),
        None,
        "index," + ",".join(f"output_{k}" for k in range(8)),
    ),
    "padded": Zoo(
        "test_acc",
        frozenset({"train_loss", "val_acc"}),
        None,
        "index,prediction,prob_0,prob_1",
        ddp_exact=ACC,
    ),
    "metric_sum": Zoo(
        "test_mae",
        frozenset({"train_loss", "val_loss", "val_mae"}),
        "predictions.png",
        "index,target,prediction",
        ddp_rounded=("test_mae", "test_loss"),
    ),
    "kwargs_subclass": Zoo(
        "test_acc",
        frozenset({"train_loss", "val_acc"}),
        "confusion_matrix.png",
        CLASSES3,
        ddp_exact=ACC,
    ),
    "configure_model": Zoo(
        "test_acc",
        frozenset({"train_loss", "val_acc"}),
        "confusion_matrix.png",
        CLASSES3,
        ddp_exact=ACC,
    ),
    "accumulate": Zoo(
        "test_loss",
        frozenset({"train_loss", "val_loss"}),
        "predictions.png",
        "index,target,prediction",
        resume_one=(5, 6),  # one optimizer step every two batches
        resume_two=(3, 4),
    ),
}
# 64 training samples in batches of 8: 8 steps an epoch in one process, 4 in each of two.
SEEDED = [
    SEARCH_MACHINERY_CONFIGS,
    "trainer.max_epochs=2",
    "logger=csv",
    "seed=7",
    "trainer.deterministic=true",
]
TIMEOUT = 540
# ddp_spawn: the binary classifier, one epoch (Lightning's CSV logger fails under spawn when
# the test adds columns: logger=none, as the README says).
SPAWN = [
    *(o for o in SEEDED if not o.startswith("logger=")),
    "experiment=zoo_binary",
    "trainer.max_epochs=1",
    "trainer.devices=2",
    "trainer.strategy=ddp_spawn",
    "logger=none",
]


def experiment(name: str) -> str:
    return f"experiment=zoo_{name}"


def seeded(name: str, processes: int = 1) -> list[str]:
    every = (ZOO[name].resume_one if processes == 1 else ZOO[name].resume_two)[0]
    overrides = [
        *SEEDED,
        experiment(name),
        f"callbacks.last_checkpoint.every_n_train_steps={every}",
    ]
    if processes > 1:
        overrides += [f"trainer.devices={processes}", f"trainer.strategy={ZOO[name].ddp_strategy}"]
    return overrides


def sweep(script: str, sweep_dir: Path, values: dict[str, list[str]], *common: str) -> list[Path]:
    """``python <script>.py -m key=v1,v2,... <common>``: one process, one job a value; the
    job directories in the order of the values."""
    swept = [f"{key}={','.join(choices)}" for key, choices in values.items()]
    result = run_entry(
        script, "-m", *common, *swept, f"hydra.sweep.dir={sweep_dir}", timeout=TIMEOUT
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs = len(next(iter(values.values())))
    return [sweep_dir / str(number) for number in range(jobs)]


def train_zoo(sweep_dir: Path, names: list[str], processes: int = 1) -> dict[str, Path]:
    """Each named module trained with its seeded settings (the same `every_n_train_steps`
    and strategy for all of them), in one `-m` sweep; their run directories."""
    assert len({sweep_key(n, processes) for n in names}) == 1, "one sweep, one setting"
    common = [*seeded(names[0], processes)]
    common.remove(experiment(names[0]))
    runs = sweep("train", sweep_dir, {"experiment": [f"zoo_{n}" for n in names]}, *common)
    return dict(zip(names, runs, strict=True))


def sweep_key(name: str, processes: int) -> tuple[int, str]:
    """What must be alike for modules trained in one sweep: checkpoint interval, strategy."""
    every = (ZOO[name].resume_one if processes == 1 else ZOO[name].resume_two)[0]
    return every, ZOO[name].ddp_strategy if processes > 1 else "auto"


def checkpoint(run_dir: Path, name: str = "last.ckpt") -> dict[str, Any]:
    return torch.load(run_dir / "checkpoints" / name, weights_only=True)


def best_checkpoint(run_dir: Path) -> Path:
    (best,) = (run_dir / "checkpoints").glob("epoch_*.ckpt")
    return best


def history(run_dir: Path) -> list[dict[str, float]]:
    ckpt = checkpoint(run_dir)
    return next(v["history"] for k, v in ckpt["callbacks"].items() if "PlotCallback" in k)


def kill_9_and_resume(name: str, run_dir: Path, processes: int = 1) -> tuple[int, dict[str, Any]]:
    """Train ``name`` until it pauses mid-epoch at its pause step, kill -9 the run (every
    process of it), and resume it with `resume=`. Returns the step of the checkpoint it
    resumed from and that checkpoint's progress."""
    every, step = ZOO[name].resume_one if processes == 1 else ZOO[name].resume_two
    marker = run_dir.parent / f"{run_dir.name}.paused"
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "train.py"),
            *pinned(seeded(name, processes)),
            f"hydra.run.dir={run_dir}",
            "+callbacks.pause._target_=tests.machinery.fault_injection.PauseAtStep",
            f"+callbacks.pause.step={step}",
            f"+callbacks.pause.marker={marker}",
        ],
        cwd=ROOT,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: kill -9 reaches every rank
    )
    deadline = time.monotonic() + TIMEOUT
    try:
        while not marker.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"{name} never reached step {step}:\n{process.communicate()[0][-3000:]}"
                )
            time.sleep(0.1)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)
    saved = checkpoint(run_dir)
    result = run_entry("train", f"resume={run_dir}", timeout=TIMEOUT)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return every, saved


def assert_same_run(resumed: Path, reference: Path) -> None:
    """Bit-identical: metrics, every weight, the plotted history and the CSV log."""
    assert read_metrics(resumed) == read_metrics(reference)
    got, want = checkpoint(resumed), checkpoint(reference)
    assert got["global_step"] == want["global_step"] and got["epoch"] == want["epoch"]
    assert got["state_dict"].keys() == want["state_dict"].keys()
    for key, value in want["state_dict"].items():
        assert torch.equal(got["state_dict"][key], value), key
    assert history(resumed) == history(reference)
    assert (resumed / "csv" / "metrics.csv").read_text() == (
        reference / "csv" / "metrics.csv"
    ).read_text()


def assert_the_benchmark_times(name: str, out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m ...bench --workload none experiment=zoo_<name>`, in this process: it ends
    printing the ratio its JSON holds, and times every method."""
    from my_project.machinery.bench import main

    main(
        [
            "--workload", "none", SEARCH_MACHINERY_CONFIGS, f"experiment=zoo_{name}",
            "--steps", "6", "--warmup", "2", "--repeats", "1", "--out", str(out),
        ]
    )  # fmt: skip
    result = json.loads((out / "bench_custom_cpu.json").read_text())
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"ratio {result['ratio']:.3f}"
    assert all(m["median"] > 0 for m in result["methods"].values()), result["methods"]
