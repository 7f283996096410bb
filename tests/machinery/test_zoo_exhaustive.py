"""The zoo's whole cross-product: every module of `tests/machinery/zoo/` in every mode, where
test_zoo.py runs each mode once, on the module it was broken for.

Every module: trained in 2 processes (DDP) with its test metrics against a one-process eval
of the same checkpoint; trained with `trainer.strategy=dp` (bit-equal to one process on a
CPU); `python eval.py ckpt_path=...` and `python predict.py ckpt_path=...` exactly as the
README writes them, one process each, and predict.py on files of the test inputs; serve.py
answering what predict.py writes (or refusing at start), export.py writing ONNX or refusing in
one paragraph; kill -9 mid-epoch and `resume=`, bit-identical, in one and in two processes;
the benchmark. And ddp_spawn in a 2-job sweep with its tests.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from .helpers import ON_CPU, read_metrics, run_entry
from .zoo_contract import (
    SEEDED,
    SPAWN,
    TIMEOUT,
    ZOO,
    Outcome,
    assert_exported_or_refused_in_one_paragraph,
    assert_same_run,
    assert_serve_refuses_at_start,
    assert_served_answers_equal_predict_py_for_any_inputs,
    assert_the_benchmark_times,
    best_checkpoint,
    done,
    kill_9_and_resume,
    requests_of_the_test_split,
    sweep,
    sweep_checkpoints,
    sweep_key,
    train_zoo,
)

pytestmark = [pytest.mark.slow, pytest.mark.exhaustive]
# Bound on the relative difference of a float-sum metric (the zoo's own Metric with a `sum`
# state, `self.log(..., sync_dist=True)`) between 2 processes and one: float32 rounding of
# sums taken in another order (measured up to 2e-7).
FLOAT_SUM_BOUND = 1e-6


def by_setting(names: list[str], processes: int) -> list[list[str]]:
    """The names grouped by what one sweep shares (checkpoint interval, strategy)."""
    groups: dict[tuple[int, str], list[str]] = {}
    for name in names:
        groups.setdefault(sweep_key(name, processes), []).append(name)
    return list(groups.values())


@pytest.fixture(scope="module")
def one(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    return train_zoo(tmp_path_factory.mktemp("zoo") / "one", list(ZOO))


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    root, runs = tmp_path_factory.mktemp("zoo"), {}
    for index, names in enumerate(by_setting(list(ZOO), 2)):
        runs.update(train_zoo(root / f"ddp{index}", names, processes=2))
    return runs


@pytest.mark.parametrize("name", list(ZOO))
def test_ddp_test_metrics_equal_a_one_process_eval_of_the_checkpoint(
    two: dict[str, Outcome], tmp_path: Path, name: str
) -> None:
    run = done(two[name])
    assert json.loads((run / "run_info.json").read_text())["world_size"] == 2
    result = run_entry(
        "eval",
        f"ckpt_path={best_checkpoint(run)}",
        "logger=none",
        f"hydra.run.dir={tmp_path}",
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    single, ddp = read_metrics(tmp_path), read_metrics(run)
    assert math.isfinite(single[ZOO[name].test_metric])
    for metric in ZOO[name].ddp_exact:
        assert ddp[metric] == single[metric], metric
    for metric in ZOO[name].ddp_rounded:
        assert abs(ddp[metric] - single[metric]) <= FLOAT_SUM_BOUND * abs(single[metric]), metric


def test_dp_trains_every_module_like_one_process(one: dict[str, Outcome], tmp_path: Path) -> None:
    names = list(ZOO)
    jobs = sweep(
        "train",
        tmp_path,
        "experiment",
        [f"zoo_{n}" for n in names],
        *SEEDED,
        "callbacks.last_checkpoint.every_n_train_steps=5",
        "trainer.strategy=dp",
        "trainer.devices=2",
        made="metrics.json",
    )
    for name, job in zip(names, jobs, strict=True):
        assert read_metrics(done(job)) == read_metrics(done(one[name])), name


@pytest.mark.parametrize("name", list(ZOO))
def test_eval_and_predict_exactly_as_the_readme_writes_them(
    one: dict[str, Outcome], tmp_path: Path, name: str
) -> None:
    best = best_checkpoint(done(one[name]))
    result = run_entry("eval", f"ckpt_path={best}", f"hydra.run.dir={tmp_path / 'eval'}")
    assert result.returncode == 0, result.stderr[-3000:]
    metric = ZOO[name].test_metric
    evaluated = read_metrics(tmp_path / "eval")[metric]
    assert math.isfinite(evaluated)
    if not ZOO[name].random_test:
        assert evaluated == read_metrics(one[name])[metric]

    result = run_entry("predict", f"ckpt_path={best}", f"hydra.run.dir={tmp_path / 'predict'}")
    if ZOO[name].predict_header is None:
        assert result.returncode == 2 and "predict_step" in result.stderr
        return
    assert result.returncode == 0, result.stderr[-3000:]
    header, *rows = (tmp_path / "predict" / "predictions.csv").read_text().splitlines()
    assert header == ZOO[name].predict_header and len(rows) == ZOO[name].predict_rows


@pytest.mark.parametrize("name", list(ZOO))
def test_predict_on_files_of_the_test_inputs_and_serve_answer_as_predict_on_the_split(
    one: dict[str, Outcome], tmp_path: Path, name: str
) -> None:
    """`python predict.py ckpt_path=... input_path=<folder>` of the test inputs (a .npy file,
    or a .npz of named arrays per padded batch) writes the split's rows but the targets; and
    `python serve.py ckpt_path=...` answers them as predict.py wrote them. A module that cannot
    predict (a GAN's forward takes noise) is refused by both in one paragraph."""
    run = done(one[name])
    if ZOO[name].predict_header is None:
        assert_serve_refuses_at_start(name, run, tmp_path / "serve")
        return
    best = best_checkpoint(run)
    result = run_entry("predict", f"ckpt_path={best}", f"hydra.run.dir={tmp_path / 'split'}")
    assert result.returncode == 0, result.stderr[-3000:]
    split = tmp_path / "split" / "predictions.csv"
    folder = tmp_path / "inputs"
    folder.mkdir()
    for k, request in enumerate(requests_of_the_test_split(name, tmp_path)):
        if ZOO[name].inputs:
            np.savez(folder / f"batch_{k}.npz", **request["inputs"])
        else:
            np.save(folder / "inputs.npy", np.array(request["inputs"], dtype=np.float32))
    result = run_entry(
        "predict",
        f"ckpt_path={best}",
        f"input_path={folder}",
        f"hydra.run.dir={tmp_path / 'files'}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    header, *rows = (tmp_path / "files" / "predictions.csv").read_text().split()
    split_header, *split_rows = split.read_text().split()
    kept = [i for i, c in enumerate(split_header.split(",")) if i and c[:6] != "target"]
    kept = [i for i in kept if split_header.split(",")[i] != "dataloader"]
    assert header.split(",")[2:] == [split_header.split(",")[i] for i in kept], header
    expected = [[row.split(",")[i] for i in kept] for row in split_rows[: len(rows)]]
    assert [row.split(",")[2:] for row in rows] == expected
    assert_served_answers_equal_predict_py_for_any_inputs(name, run, split, tmp_path)


@pytest.fixture(scope="module")
def exported(
    one: dict[str, Outcome], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Outcome]:
    """`python export.py -m ckpt_path=<best>,...` for every module (a refusal ends a sweep:
    the modules left are swept again)."""
    return sweep_checkpoints(
        "export", tmp_path_factory.mktemp("zoo") / "export", one, made="model.onnx"
    )


@pytest.mark.parametrize("name", list(ZOO))
def test_export_writes_onnx_or_refuses_in_one_paragraph(
    exported: dict[str, Outcome], name: str
) -> None:
    assert_exported_or_refused_in_one_paragraph(name, exported[name])


@pytest.mark.parametrize("name", list(ZOO))
def test_kill_9_and_resume_in_one_process(
    one: dict[str, Outcome], tmp_path: Path, name: str
) -> None:
    reference = done(one[name])
    every, saved = kill_9_and_resume(name, tmp_path / "run")
    assert saved["global_step"] % every == 0 and saved["epoch"] == 1
    assert_same_run(tmp_path / "run", reference)


@pytest.mark.parametrize("name", list(ZOO))
def test_kill_9_and_resume_in_two_processes(
    two: dict[str, Outcome], tmp_path: Path, name: str
) -> None:
    reference = done(two[name])
    every, saved = kill_9_and_resume(name, tmp_path / "run", processes=2)
    assert saved["global_step"] % every == 0 and saved["epoch"] == 1
    assert_same_run(tmp_path / "run", reference)


@pytest.mark.parametrize("name", list(ZOO))
def test_the_benchmark_times_every_module(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_the_benchmark_times(name, tmp_path, capsys)


def test_ddp_spawn_in_a_sweep_of_two_jobs_with_their_tests(tmp_path: Path) -> None:
    jobs = sweep(
        "train", tmp_path, "model.lr", ["0.02", "0.05"], *ON_CPU, *SPAWN, made="metrics.json"
    )
    for job in map(done, jobs):
        assert json.loads((job / "run_info.json").read_text())["world_size"] == 2
        assert 0 < read_metrics(job)["test_acc"] <= 1


def test_ddp_tells_a_gan_to_find_unused_parameters(tmp_path: Path) -> None:
    """Plain `ddp` on a module whose losses leave parameters out stops at its second step with
    DDP's own error, which says what to set (`ddp_find_unused_parameters_true`, which the runs
    above use)."""
    result = run_entry(
        "train",
        *ON_CPU,
        *SEEDED,
        "experiment=zoo_gan",
        "trainer.devices=2",
        "trainer.strategy=ddp",
        f"hydra.run.dir={tmp_path}",
        timeout=TIMEOUT,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "find_unused_parameters=True" in " ".join(result.stderr.split())
