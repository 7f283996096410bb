"""The zoo's contract, shared by its slow tests (test_zoo.py) and test_zoo_exhaustive.py: what
each module of `tests/machinery/zoo/` logs, plots and predicts, and the runs that check it.

Every run of a module uses the same seeded, deterministic settings, so one run in one process
is the reference that a killed-and-resumed run must equal bit for bit, and the checkpoint
that eval.py, predict.py, serve.py and export.py read. Runs of several modules go through one
process where they can (a `-m` sweep over `experiment=zoo_<name>`), as a team sweeps its own
experiments; a module whose job fails fails its own tests only (`Failed`), the others go on.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from .helpers import (
    ROOT,
    SEARCH_MACHINERY_CONFIGS,
    assert_same_after_resume,
    clean_env,
    compose_config,
    csv_rows,
    pinned,
    read_metrics,
    run_entry,
)


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
    # Rows of predict.py's CSV for the test split: each sample of each test loader once.
    predict_rows: int = 23
    # A dict batch's inputs, the keys its model reads (a request to serve.py names them);
    # () for a batch whose inputs are its first element or itself.
    inputs: tuple[str, ...] = ()
    # What export.py's one paragraph names where torch's exporter cannot take forward (None:
    # exported, ONNX Runtime matching PyTorch; a module that cannot predict is refused too).
    export_refusal: str | None = None


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
        inputs=("tokens", "mask"),
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
    # What teams moving in from lightning-hydra-template bring (LHT_TEAMS, below).
    "lht": Zoo(
        "test/acc",
        frozenset({"train/loss", "train/acc", "val/loss", "val/acc", "val/acc_best"}),
        "confusion_matrix.png",
        "index,target,prediction," + ",".join(f"prob_{k}" for k in range(10)),
        resume_two=(5, 12),  # its data module splits the batch across processes: 8 steps an epoch
        ddp_exact=("test/acc",),  # test/loss: a MeanMetric of batch means, batches of 4 under DDP
    ),
    "one_cycle": Zoo(
        "test_acc",
        frozenset({"train_loss", "val_loss", "val_acc"}),
        "confusion_matrix.png",
        CLASSES3,
        ddp_exact=ACC,
    ),
    "two_test_loaders": Zoo(
        "test_acc/dataloader_idx_0",
        frozenset({"train_loss", "val_acc"}),
        "confusion_matrix.png",
        # its own predict_step's probabilities, for the rows of both test loaders
        "index,target,dataloader,output_0,output_1,output_2",
        ddp_exact=("test_acc/dataloader_idx_0", "test_acc/dataloader_idx_1"),
        predict_rows=46,
    ),
    # Token sequences padded into dict batches, a GRU over `pack_padded_sequence` (which torch's
    # exporter cannot take), its own predict_step.
    "packed": Zoo(
        "test_acc",
        frozenset({"train_loss", "val_acc"}),
        None,
        "index,prediction,prob_0,prob_1",
        ddp_exact=ACC,
        inputs=("input_ids", "lengths"),
        export_refusal="`_, hidden = self.rnn(packed)` (GRU.forward)",
    ),
    # forward returns (mean, log_var): a column group, a served field, an ONNX output each.
    "heteroscedastic": Zoo(
        "test_mse",
        frozenset({"train_loss", "val_loss", "val_mse"}),
        None,
        "index,target,output_0,output_1",
        ddp_rounded=("test_mse", "test_loss"),
    ),
    # A logit per label against multi-hot targets: per-label probabilities and 0/1 labels.
    "multilabel": Zoo(
        "test_acc",
        frozenset({"train_loss", "val_loss", "val_acc"}),
        None,
        "index," + ",".join(f"{c}_{k}" for c in ("target", "prediction", "prob") for k in range(4)),
        ddp_exact=ACC,
    ),
    # Layers built in `setup(stage)` from what the data module read (built anew at each call).
    "setup_layers": Zoo(
        "test_acc",
        frozenset({"train_loss", "val_acc"}),
        "confusion_matrix.png",
        CLASSES3,
        ddp_exact=ACC,
    ),
    # Class weights from the labels in `setup`, a plain tensor moved where it is used.
    "class_weights": Zoo(
        "test_acc",
        frozenset({"train_loss", "val_acc"}),
        "confusion_matrix.png",
        CLASSES3,
        ddp_exact=ACC,
    ),
}
# Teams moving in from lightning-hydra-template: its module (net, `_partial_`
# optimizer and scheduler from Hydra, list hyperparameters, files under data_dir), the docs'
# OneCycleLR sized by `self.trainer.estimated_stepping_batches`, several test loaders. Every
# contract runs on these in the slow tier (test_zoo_lht.py); on the others each mode runs once
# there, on the module it was broken for (test_zoo.py), and everywhere in the exhaustive tier.
LHT_TEAMS = ["lht", "one_cycle", "two_test_loaders"]
# The Lightning docs' patterns (test_zoo.py; LHT_TEAMS: test_zoo_lht.py).
DOCS_PATTERNS = [name for name in ZOO if name not in LHT_TEAMS]
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


@dataclass(frozen=True)
class Failed:
    """A job that did not leave what it should have: why, as its command printed it."""

    output: str


Outcome = Path | Failed


def done(outcome: Outcome) -> Path:
    """The job's directory; the test fails with the job's own error where it failed."""
    if isinstance(outcome, Failed):
        pytest.fail(outcome.output, pytrace=False)
    return outcome


def sweep(
    script: str, sweep_dir: Path, key: str, choices: list[str], *common: str, made: str
) -> list[Outcome]:
    """``python <script>.py -m <common> key=c1,c2,...``: one process, one job a choice; each
    job's directory, in the order of the choices, where it wrote ``made``. A job that did not
    is `Failed` with its error (Hydra goes on to the next job after a failing one; after a job
    that exits, a bad input's exit status, the jobs left are swept again)."""
    outcomes: list[Outcome] = []
    while len(outcomes) < len(choices):
        rest = choices[len(outcomes) :]
        folder = (
            sweep_dir if not outcomes else sweep_dir.with_name(f"{sweep_dir.name}+{len(outcomes)}")
        )
        result = run_entry(
            script, "-m", *common, f"{key}={','.join(rest)}", f"hydra.sweep.dir={folder}",
            timeout=TIMEOUT,
        )  # fmt: skip
        started = len(re.findall(r"\t#\d+ : ", result.stdout))  # Hydra's line as a job starts
        if not started:
            return [*outcomes, *[Failed(tail(result))] * len(rest)]
        for number, choice in enumerate(rest[:started]):
            job = folder / str(number)
            ok = (job / made).is_file()
            outcomes.append(job if ok else Failed(job_error(result, f"{key}={choice}")))
    return outcomes


def tail(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout[-2000:] + result.stderr[-4000:]


def job_error(result: subprocess.CompletedProcess[str], override: str) -> str:
    """What a sweep printed about its job with ``override``: Hydra's report of the job's
    error, or the end of the sweep's output (a job that exits prints its one paragraph last)."""
    for report in result.stderr.split("Error executing job with overrides: ")[1:]:
        if f"'{override}'" in report.split("\n", 1)[0]:
            return f"{override}: {report[-4000:]}"
    return f"{override}: {tail(result)}"


def train_zoo(sweep_dir: Path, names: list[str], processes: int = 1) -> dict[str, Outcome]:
    """Each named module trained with its seeded settings (the same `every_n_train_steps`
    and strategy for all of them), in one `-m` sweep; their run directories."""
    assert len({sweep_key(n, processes) for n in names}) == 1, "one sweep, one setting"
    common = [*seeded(names[0], processes)]
    common.remove(experiment(names[0]))
    runs = sweep(
        "train", sweep_dir, "experiment", [f"zoo_{n}" for n in names], *common, made="metrics.json"
    )
    return dict(zip(names, runs, strict=True))


def sweep_checkpoints(
    script: str, sweep_dir: Path, runs: dict[str, Outcome], *common: str, made: str
) -> dict[str, Outcome]:
    """``python <script>.py -m ckpt_path=<each run's best checkpoint>`` as the README writes
    it (no model=, data= nor search path): each module's job. A run that failed fails here
    too."""
    trained = {name: run for name, run in runs.items() if not isinstance(run, Failed)}
    checkpoints = [str(best_checkpoint(run)) for run in trained.values()]
    jobs = sweep(script, sweep_dir, "ckpt_path", checkpoints, *common, made=made) if trained else []
    swept: dict[str, Outcome] = dict(zip(trained, jobs, strict=True))
    return {
        name: Failed(f"not trained: {run.output}") if isinstance(run, Failed) else swept[name]
        for name, run in runs.items()
    }


def sweep_key(name: str, processes: int) -> tuple[int, str]:
    """What must be alike for modules trained in one sweep: checkpoint interval, strategy."""
    every = (ZOO[name].resume_one if processes == 1 else ZOO[name].resume_two)[0]
    return every, ZOO[name].ddp_strategy if processes > 1 else "auto"


def checkpoint(run_dir: Path, name: str = "last.ckpt") -> dict[str, Any]:
    """A checkpoint the test's own run just wrote, whole: how the template's commands read
    checkpoints (eval, predict, resume, serve, export) is what the contracts check."""
    return torch.load(run_dir / "checkpoints" / name, weights_only=False)


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
    """Bit-identical: metrics, every weight, the plotted history and the CSV log (but for the
    epoch means of plain values logged in the epoch it resumed in: `assert_same_after_resume`)."""
    assert_same_after_resume(read_metrics(resumed), read_metrics(reference))
    got, want = checkpoint(resumed), checkpoint(reference)
    assert got["global_step"] == want["global_step"] and got["epoch"] == want["epoch"]
    assert got["state_dict"].keys() == want["state_dict"].keys()
    for key, value in want["state_dict"].items():
        assert torch.equal(got["state_dict"][key], value), key
    assert_same_after_resume(history(resumed), history(reference))
    assert_same_after_resume(csv_rows(resumed), csv_rows(reference))


def assert_the_benchmark_times(name: str, out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m ...bench --workload none experiment=zoo_<name>`, in this process: it ends
    printing the ratio it returns, and times both ways."""
    from my_project.machinery.bench import main

    result = main(
        [
            "--workload", "none", SEARCH_MACHINERY_CONFIGS, f"experiment=zoo_{name}",
            "--steps", "6", "--warmup", "2", "--repeats", "1",
        ]
    )  # fmt: skip
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"ratio {result['ratio']:.3f}"
    assert all(rate > 0 for rate in result["samples_per_s"].values()), result


def inputs_of_the_test_split(name: str, tmp_path: Path) -> np.ndarray:
    """The inputs of the module's test loader (its first, where it has several), in order, as
    its data module gives them."""
    from hydra.utils import instantiate

    cfg = compose_config([SEARCH_MACHINERY_CONFIGS, experiment(name)], tmp_path)
    data = instantiate(cfg.data)
    data.prepare_data()
    data.setup("test")
    loaders = data.test_dataloader()
    loader = loaders[0] if isinstance(loaders, (list, tuple)) else loaders
    return torch.cat([batch[0] for batch in loader]).numpy()


def assert_served_answers_equal_predict_py(
    name: str, run: Path, predictions: Path, tmp_path: Path
) -> None:
    """`python serve.py ckpt_path=<best>` as the README writes it: its answer to the test
    inputs, sent in one request, is what predict.py wrote for the same samples."""
    from .serving import serving

    inputs = inputs_of_the_test_split(name, tmp_path)
    header, *rows = predictions.read_text().splitlines()
    columns = header.split(",")
    written = {
        c: [float(row.split(",")[columns.index(c)]) for row in rows[: len(inputs)]] for c in columns
    }
    checkpoint = best_checkpoint(run)
    with serving(f"ckpt_path={checkpoint}", f"hydra.run.dir={tmp_path / 'serve'}") as server:
        status, answer = server.predict({"inputs": inputs.tolist()})
    assert status == 200, answer
    for key, values in answer.items():
        served = np.array(values, dtype=np.float64).reshape(len(inputs), -1)
        width = served.shape[1]
        names = [key] if width == 1 else [f"{key}_{k}" for k in range(width)]
        assert set(names) <= set(columns), (names, header)
        expected = np.array([written[c] for c in names]).T
        assert np.abs(served - expected).max() <= 2e-6, key  # predict.py writes 6 decimals


def assert_exported_onnx_matches(name: str, run: Path, tmp_path: Path) -> None:
    """`python export.py ckpt_path=<best> format=onnx` as the README writes it: one ONNX file
    that ONNX Runtime, on the test inputs, finds equal to PyTorch (export.yaml's bound)."""
    result = run_entry(
        "export",
        f"ckpt_path={best_checkpoint(run)}",
        "format=onnx",
        f"hydra.run.dir={tmp_path}",
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, tail(result)
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith(f"Wrote {tmp_path / 'model.onnx'}: "), last
    checked = re.search(r"on the (\d+) inputs of the test split.*max abs difference (\S+)\.$", last)
    assert checked, last
    assert int(checked[1]) in {23, ZOO[name].predict_rows}, last  # each test input once
    assert float(checked[2]) <= 1e-5, last


def requests_of_the_test_split(name: str, tmp_path: Path) -> list[dict[str, Any]]:
    """What a client sends serve.py for the module's test loader (its first, where it has
    several), in order: every input in one request, or for dict batches (whose sizes past the
    first dimension differ from batch to batch) a request per batch of its named inputs."""
    from hydra.utils import instantiate

    cfg = compose_config([SEARCH_MACHINERY_CONFIGS, experiment(name)], tmp_path)
    data = instantiate(cfg.data)
    data.prepare_data()
    data.setup("test")
    loaders = data.test_dataloader()
    loader = loaders[0] if isinstance(loaders, (list, tuple)) else loaders
    if not ZOO[name].inputs:
        batches = [batch[0] if isinstance(batch, (list, tuple)) else batch for batch in loader]
        return [{"inputs": torch.cat(batches).tolist()}]
    return [{"inputs": {k: batch[k].tolist() for k in ZOO[name].inputs}} for batch in loader]


def assert_served_answers_equal_predict_py_for_any_inputs(
    name: str, run: Path, predictions: Path, tmp_path: Path
) -> None:
    """`python serve.py ckpt_path=<best>` as the README writes it: its answers to the test
    inputs, sent as `requests_of_the_test_split`, are what predict.py wrote for the same
    samples, field by field (a tuple's `output_<k>`, a multi-label's per-label columns)."""
    from .serving import serving

    requests = requests_of_the_test_split(name, tmp_path)
    header, *rows = predictions.read_text().splitlines()
    columns = header.split(",")
    with serving(
        f"ckpt_path={best_checkpoint(run)}", f"hydra.run.dir={tmp_path / 'serve'}"
    ) as server:
        answers = [server.predict(request) for request in requests]
    assert all(status == 200 for status, _ in answers), answers
    served: dict[str, list[Any]] = {}
    for _, answer in answers:
        for key, values in answer.items():
            served.setdefault(key, []).extend(values)
    count = len(next(iter(served.values())))
    written = {
        c: [float(row.split(",")[columns.index(c)]) for row in rows[:count]] for c in columns
    }
    for key, values in served.items():
        array = np.array(values, dtype=np.float64).reshape(count, -1)
        names = [key] if array.shape[1] == 1 else [f"{key}_{k}" for k in range(array.shape[1])]
        assert set(names) <= set(columns), (names, header)
        expected = np.array([written[c] for c in names]).T
        assert np.abs(array - expected).max() <= 2e-6, key  # predict.py writes 6 decimals


def assert_serve_refuses_at_start(name: str, run: Path, tmp_path: Path) -> None:
    """A module that cannot answer (its forward takes noise): serve.py stops before it
    listens, one paragraph naming predict_step, exit status 2, no run directory."""
    result = run_entry(
        "serve", f"ckpt_path={best_checkpoint(run)}", f"hydra.run.dir={tmp_path}", timeout=TIMEOUT
    )
    assert result.returncode == 2, tail(result)
    assert "Traceback" not in result.stderr and "predict_step" in result.stderr, tail(result)
    assert not tmp_path.exists()


def assert_exported_or_refused_in_one_paragraph(name: str, outcome: Outcome) -> None:
    """An export job of ``export.py -m ckpt_path=...``: one ONNX file (written only once ONNX
    Runtime matched PyTorch on every test input), its inputs named as forward's (``input`` for
    one), any batch size; or, where torch's exporter cannot take the module, one paragraph
    naming the line of its forward and the operation, never a traceback, nothing written."""
    import onnxruntime

    refusal = ZOO[name].export_refusal or ("predict_step" if not ZOO[name].predict_header else None)
    if refusal is None:
        job = done(outcome)
        assert sorted(p.name for p in job.iterdir() if p.suffix == ".onnx") == ["model.onnx"]
        session = onnxruntime.InferenceSession(str(job / "model.onnx"))
        inputs = session.get_inputs()
        assert [i.name for i in inputs] == list(ZOO[name].inputs or ["input"]), inputs
        assert all(i.shape[0] == "batch" for i in inputs), inputs
        return
    assert isinstance(outcome, Failed), f"{name} was exported: {outcome}"
    message = " ".join(outcome.output.split())
    assert "Traceback" not in outcome.output, outcome.output
    assert "cannot " in message and refusal in message, message
