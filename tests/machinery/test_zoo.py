"""Every promise of "Bring your own model and data", across the module patterns of the
Lightning docs: the zoo of `tests/machinery/zoo/` (two validation loaders, dropout and noise,
a GAN with two optimizers, ReduceLROnPlateau, a one-logit binary classifier, an autoencoder
on bare tensors, padded dict batches, a Metric of its own with sync_dist, a subclass
forwarding **kwargs, configure_model, manual gradient accumulation, a GRU over packed
sequences, a tuple output, a multi-label classifier). What teams moving in from
lightning-hydra-template bring, with every contract over it: test_zoo_lht.py.

The lean tier: every module trains once in one process (one `-m` sweep, one process), and
eval.py and predict.py read those runs; DDP, dp, kill -9 and resume, ddp_spawn, serve.py and
export.py run on the modules where each was broken. Every module in every mode (dp too) is
test_zoo_exhaustive.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from my_project.machinery.errors import UserError

from .helpers import ON_CPU, SEARCH_MACHINERY_CONFIGS, compose_config, read_metrics, run_entry
from .zoo_contract import (
    DOCS_PATTERNS,
    SPAWN,
    TIMEOUT,
    ZOO,
    Outcome,
    assert_exported_onnx_matches,
    assert_exported_or_refused_in_one_paragraph,
    assert_same_run,
    assert_served_answers_equal_predict_py,
    assert_served_answers_equal_predict_py_for_any_inputs,
    assert_the_benchmark_times,
    best_checkpoint,
    checkpoint,
    done,
    history,
    kill_9_and_resume,
    sweep_checkpoints,
    train_zoo,
)

pytestmark = pytest.mark.slow
PREDICTED = [name for name in DOCS_PATTERNS if ZOO[name].predict_header is not None]
# Trained in 2 processes here: where DDP broke or is not exact.
DDP = ["two_val_loaders", "metric_sum"]
# Served here: dict inputs (named arrays, the module's own predict_step), a tuple output.
SERVED = ["packed", "heteroscedastic"]
# Exported here (one sweep): dict inputs (named ONNX inputs), a tuple output, and last (its
# refusal ends the sweep) what torch's exporter cannot take, `pack_padded_sequence`.
EXPORTED = ["padded", "heteroscedastic", "packed"]


@pytest.fixture(scope="module")
def zoo_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every module of the zoo, trained once in one process: `python train.py -m
    experiment=zoo_a,zoo_b,...` (the reference run of every check below)."""
    return train_zoo(tmp_path_factory.mktemp("zoo") / "one", DOCS_PATTERNS)


@pytest.mark.parametrize("name", DOCS_PATTERNS)
def test_every_module_trains_and_plots_what_it_logs(
    zoo_runs: dict[str, Outcome], name: str
) -> None:
    run, expected = done(zoo_runs[name]), ZOO[name]
    metrics = read_metrics(run)
    assert math.isfinite(metrics[expected.test_metric]), metrics
    assert json.loads((run / "run_info.json").read_text())["world_size"] == 1
    assert (run / "learning_curves.png").stat().st_size > 10_000
    rows = history(run)
    assert [row["epoch"] for row in rows] == [0, 1]
    for row in rows:  # every value it logs in training or validation, every epoch
        assert set(row) - {"epoch"} == expected.curves, row
    plots = {"confusion_matrix.png", "predictions.png"}
    assert {p.name for p in run.iterdir() if p.name in plots} == (
        {expected.task_plot} if expected.task_plot else set()
    )


def test_two_validation_loaders_pick_the_best_checkpoint_by_the_first(
    zoo_runs: dict[str, Outcome],
) -> None:
    run = done(zoo_runs["two_val_loaders"])
    best = checkpoint(run, best_checkpoint(run).name)
    (state,) = (v for k, v in best["callbacks"].items() if k.startswith("ModelCheckpoint"))
    assert state["monitor"] == "val_acc/dataloader_idx_0"
    scores = [row["val_acc/dataloader_idx_0"] for row in history(run)]
    assert float(state["best_model_score"]) == pytest.approx(max(scores))


@pytest.fixture(scope="module")
def evaluated(
    zoo_runs: dict[str, Outcome], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Outcome]:
    """`python eval.py ckpt_path=<best>` for every module (one `-m` sweep, one process)."""
    folder = tmp_path_factory.mktemp("zoo") / "eval"
    return sweep_checkpoints("eval", folder, zoo_runs, "logger=none", made="metrics.json")


@pytest.mark.parametrize("name", DOCS_PATTERNS)
def test_eval_as_the_readme_writes_it_gives_each_modules_test_metric(
    zoo_runs: dict[str, Outcome], evaluated: dict[str, Outcome], name: str
) -> None:
    """`python eval.py ckpt_path=<best>`: no model=, data=, nor search path. The same test
    metric as the training run's test (the GAN's test draws noise: close)."""
    metric = ZOO[name].test_metric
    evaluated_value = read_metrics(done(evaluated[name]))[metric]
    trained = read_metrics(done(zoo_runs[name]))[metric]
    if ZOO[name].random_test:
        assert math.isfinite(evaluated_value) and evaluated_value == pytest.approx(trained, rel=0.2)
    else:
        assert evaluated_value == trained


@pytest.fixture(scope="module")
def predicted(
    zoo_runs: dict[str, Outcome], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Outcome]:
    """`python predict.py ckpt_path=<best>` for every module that predicts (one sweep)."""
    runs = {name: zoo_runs[name] for name in PREDICTED}
    folder = tmp_path_factory.mktemp("zoo") / "predict"
    return sweep_checkpoints("predict", folder, runs, made="predictions.csv")


@pytest.mark.parametrize("name", PREDICTED)
def test_predict_as_the_readme_writes_it_writes_each_modules_outputs(
    predicted: dict[str, Outcome], name: str
) -> None:
    header, *rows = (done(predicted[name]) / "predictions.csv").read_text().splitlines()
    assert header == ZOO[name].predict_header
    assert len(rows) == ZOO[name].predict_rows  # the test split, each sample once
    if name == "binary":  # class and probability of class 1, against 0/1 labels
        for row in rows:
            _, target, prediction, prob = row.split(",")
            assert target in "01" and prediction == str(int(float(prob) > 0.5))
    if name == "multilabel":  # 0/1 and the probability of each label, by the same rule
        for row in rows:
            cells = row.split(",")[1:]
            targets, labels, probs = cells[:4], cells[4:8], [float(p) for p in cells[8:]]
            assert set(targets) <= {"0", "1"} and min(probs) > 0 and max(probs) < 1
            assert labels == [str(int(p > 0.5)) for p in probs]


def test_predict_names_what_a_module_whose_forward_takes_no_inputs_needs(
    zoo_runs: dict[str, Outcome], tmp_path: Path
) -> None:
    """A GAN's forward takes noise, not the data's batches: one Error naming predict_step
    (in this process: `predict` is what predict.py runs)."""
    from my_project.machinery.run.predict import predict

    checkpoint = best_checkpoint(done(zoo_runs["gan"]))
    team = [SEARCH_MACHINERY_CONFIGS, "model=zoo_gan", "data=zoo_gan"]  # composed by code
    cfg = compose_config([*team, f"ckpt_path={checkpoint}"], tmp_path, "predict")
    with pytest.raises(UserError, match=r"GAN cannot take the inputs of the test split") as error:
        predict(cfg)
    assert "Without a predict_step of its own" in str(error.value)
    assert not (tmp_path / "predictions.csv").exists()


def test_predict_reads_files_of_new_inputs_as_it_reads_the_split(
    zoo_runs: dict[str, Outcome], predicted: dict[str, Outcome], tmp_path: Path
) -> None:
    """`input_path=` a folder of the test inputs: a .npy and a .csv file (with a header line)
    for a multi-label classifier, a .npz of named arrays per padded batch for dict inputs. The
    rows the split gets, the same columns but the targets, after a `file` column (in process:
    `predict` is what predict.py runs)."""
    import numpy as np

    from my_project.machinery.run.predict import predict

    from .zoo_contract import requests_of_the_test_split

    for name in ("multilabel", "packed"):
        folder = tmp_path / name / "inputs"
        folder.mkdir(parents=True)
        requests = requests_of_the_test_split(name, tmp_path / name)
        files: list[str] = []
        if name == "multilabel":
            inputs = np.array(requests[0]["inputs"], dtype=np.float32)
            np.save(folder / "a.npy", inputs[:10])
            header = ",".join(f"feature_{k}" for k in range(inputs.shape[1]))
            np.savetxt(folder / "b.csv", inputs[10:], delimiter=",", header=header, comments="")
            files = ["a.npy"] * 10 + ["b.csv"] * (len(inputs) - 10)
        for k, request in enumerate(requests if name == "packed" else []):
            arrays = {key: np.array(value) for key, value in request["inputs"].items()}
            np.savez(folder / f"batch_{k}.npz", **arrays)
            files += [f"batch_{k}.npz"] * len(arrays["lengths"])
        checkpoint = best_checkpoint(done(zoo_runs[name]))
        team = [SEARCH_MACHINERY_CONFIGS, f"model=zoo_{name}", f"data=zoo_{name}"]
        overrides = [*team, f"ckpt_path={checkpoint}", f"input_path={folder}"]
        written = predict(compose_config(overrides, tmp_path / name / "run", "predict"))
        split_header, *split_rows = (done(predicted[name]) / "predictions.csv").read_text().split()
        kept = [i for i, c in enumerate(split_header.split(",")) if i and c[:6] != "target"]
        header, *rows = written.read_text().split()
        assert header.split(",") == ["index", "file", *(split_header.split(",")[i] for i in kept)]
        assert [row.split(",")[1] for row in rows] == files
        expected = [[row.split(",")[i] for i in kept] for row in split_rows]
        assert [row.split(",")[2:] for row in rows] == expected, name


@pytest.mark.parametrize("name", SERVED)
def test_serve_as_the_readme_writes_it_answers_dict_inputs_and_tuple_outputs(
    zoo_runs: dict[str, Outcome], predicted: dict[str, Outcome], name: str, tmp_path: Path
) -> None:
    """Named arrays through the module's own predict_step (a request per padded batch), and a
    field per output of a tuple: what predict.py wrote for the same samples."""
    predictions = done(predicted[name]) / "predictions.csv"
    assert_served_answers_equal_predict_py_for_any_inputs(
        name, done(zoo_runs[name]), predictions, tmp_path
    )


@pytest.fixture(scope="module")
def exported(
    zoo_runs: dict[str, Outcome], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Outcome]:
    """`python export.py -m ckpt_path=<best>,...` for `EXPORTED` (one sweep)."""
    runs = {name: zoo_runs[name] for name in EXPORTED}
    folder = tmp_path_factory.mktemp("zoo") / "export"
    return sweep_checkpoints("export", folder, runs, made="model.onnx")


@pytest.mark.parametrize("name", EXPORTED)
def test_export_as_the_readme_writes_it_names_the_inputs_or_refuses_in_one_paragraph(
    exported: dict[str, Outcome], name: str
) -> None:
    assert_exported_or_refused_in_one_paragraph(name, exported[name])


def test_serve_refuses_at_start_a_module_whose_forward_takes_no_inputs(
    zoo_runs: dict[str, Outcome], tmp_path: Path
) -> None:
    """A GAN's forward takes noise: serve.py sends the data's first batch through it as a
    request before it listens, and stops with one Error naming predict_step."""
    from my_project.machinery.run.serve import serve

    from .serving import free_port

    checkpoint = best_checkpoint(done(zoo_runs["gan"]))
    team = [SEARCH_MACHINERY_CONFIGS, "model=zoo_gan", "data=zoo_gan", f"port={free_port()}"]
    cfg = compose_config([*team, f"ckpt_path={checkpoint}"], tmp_path / "run", "serve")
    with pytest.raises(UserError, match=r"GAN cannot take the inputs of the test split") as error:
        serve(cfg)
    assert "predict_step" in str(error.value)
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """The modules of `DDP`, trained in 2 processes (one sweep); the rest of the zoo under
    DDP is the exhaustive tier's (test_zoo_exhaustive.py)."""
    return train_zoo(tmp_path_factory.mktemp("zoo") / "ddp", DDP, processes=2)


def test_ddp_runs_with_several_validation_loaders(ddp_runs: dict[str, Outcome]) -> None:
    run = done(ddp_runs["two_val_loaders"])
    assert json.loads((run / "run_info.json").read_text())["world_size"] == 2
    assert {"val_acc/dataloader_idx_0", "val_acc/dataloader_idx_1"} <= set(read_metrics(run))


@pytest.fixture(scope="module")
def ddp_evaluated(
    ddp_runs: dict[str, Outcome], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Outcome]:
    """A one-process `eval.py` of each DDP run's best checkpoint (one sweep)."""
    folder = tmp_path_factory.mktemp("zoo") / "ddp_eval"
    return sweep_checkpoints("eval", folder, ddp_runs, "logger=none", made="metrics.json")


@pytest.mark.parametrize("name", DDP)
def test_ddp_test_metrics_against_one_process_exact_or_within_float_rounding(
    ddp_runs: dict[str, Outcome], ddp_evaluated: dict[str, Outcome], name: str
) -> None:
    """The DDP run's test metrics against a one-process eval of its best checkpoint: counts
    (accuracy) bit-equal; float sums (the module's own Metric with a `sum` state,
    `self.log(..., sync_dist=True)`) equal to float32 rounding (measured: up to 2e-7
    relative; bound 1e-6)."""
    run = done(ddp_runs[name])
    assert json.loads((run / "run_info.json").read_text())["world_size"] == 2
    single, ddp = read_metrics(done(ddp_evaluated[name])), read_metrics(run)
    assert math.isfinite(single[ZOO[name].test_metric])
    assert ZOO[name].ddp_exact or ZOO[name].ddp_rounded
    for metric in ZOO[name].ddp_exact:
        assert ddp[metric] == single[metric], metric
    for metric in ZOO[name].ddp_rounded:
        one, two = single[metric], ddp[metric]
        assert abs(one - two) <= 1e-6 * abs(one), (metric, one, two)


def test_a_value_logged_without_sync_dist_is_the_whole_sets(
    ddp_runs: dict[str, Outcome], ddp_evaluated: dict[str, Outcome]
) -> None:
    """Each process's sum and sample count combined (`callbacks/whole_metrics.py`), as for
    `sync_dist=True`: not one rank's 12 samples."""
    single = read_metrics(done(ddp_evaluated["metric_sum"]))
    unsynced = read_metrics(done(ddp_runs["metric_sum"]))["test_loss_unsynced"]
    assert abs(unsynced - single["test_loss"]) <= 1e-6 * abs(single["test_loss"])


@pytest.mark.parametrize("name", ["dropout_noise", "accumulate"])
def test_kill_9_and_resume_in_one_process_ends_bit_identical(
    zoo_runs: dict[str, Outcome], tmp_path: Path, name: str
) -> None:
    """dropout_noise draws random numbers in its step (dropout, torch.randn) from a DataLoader
    without a generator; accumulate counts one optimizer step every two batches (the CSV's
    step is the loggers' own)."""
    reference = done(zoo_runs[name])
    run = tmp_path / "run"
    every, saved = kill_9_and_resume(name, run)
    assert saved["global_step"] % every == 0 and saved["epoch"] == 1
    assert saved["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]["batches"] > 0
    assert_same_run(run, reference)


@pytest.mark.exhaustive  # ddp_spawn's pickling: test_any_module.py; its sweep: test_zoo_exhaustive.py
def test_ddp_spawn_runs_with_exact_test_metrics(tmp_path: Path) -> None:
    """`trainer.strategy=ddp_spawn` pickles the Trainer for its processes: a single run, with
    exact test metrics (each test sample once: a one-process eval agrees). In a `-m` sweep:
    test_zoo_exhaustive.py."""
    common = [*ON_CPU, *SPAWN]
    result = run_entry("train", *common, f"hydra.run.dir={tmp_path / 'alone'}", timeout=TIMEOUT)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    alone = read_metrics(tmp_path / "alone")
    assert json.loads((tmp_path / "alone" / "run_info.json").read_text())["world_size"] == 2
    from my_project.machinery.run.evaluate import evaluate

    team = [SEARCH_MACHINERY_CONFIGS, "model=zoo_binary", "data=zoo_binary", "logger=none"]
    ckpt = f"ckpt_path={best_checkpoint(tmp_path / 'alone')}"
    single = evaluate(compose_config([*team, ckpt], tmp_path / "eval", "eval"))
    assert single["test_acc"] == alone["test_acc"]


@pytest.mark.parametrize("name", ["gan", "accumulate", "plateau", "configure_model"])
def test_the_benchmark_times_modules_that_ask_more_of_their_loop(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m ...bench --workload none experiment=...` (in this process): the hand-written
    loop lets a manually optimizing module's step drive its optimizers (two a batch for the
    GAN), answers `self.optimizers()` (plateau logs its lr), and has configure_model's layers."""
    assert_the_benchmark_times(name, tmp_path, capsys)


def test_serve_and_export_as_the_readme_writes_them_build_layers_made_in_setup(
    zoo_runs: dict[str, Outcome], predicted: dict[str, Outcome], tmp_path: Path
) -> None:
    """Every next step a run prints works for a module whose layers are sized by its data in
    `setup(stage)` (eval and predict: above): serve answers what predict.py wrote, export
    matches PyTorch."""
    run, predictions = done(zoo_runs["setup_layers"]), done(predicted["setup_layers"])
    assert_served_answers_equal_predict_py(
        "setup_layers", run, predictions / "predictions.csv", tmp_path / "serve"
    )
    assert_exported_onnx_matches("setup_layers", run, tmp_path / "export")


def test_resume_of_a_run_with_layers_made_in_setup_trains_on(
    zoo_runs: dict[str, Outcome], tmp_path: Path
) -> None:
    """`resume=<run> trainer.max_epochs=3` of the finished 2-epoch run (a copy of it): the
    checkpoint is checked against the layers `setup` will build, and training goes on."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(done(zoo_runs["setup_layers"]), run)
    result = run_entry("train", f"resume={run}", "trainer.max_epochs=3", timeout=TIMEOUT)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert checkpoint(run)["epoch"] == 2 and checkpoint(run)["global_step"] == 24
