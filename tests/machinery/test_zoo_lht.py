"""What teams moving in from lightning-hydra-template bring (`LHT_TEAMS` of the zoo), with every
contract of the zoo over it: LHT's own module and data module (`tests/machinery/zoo/lht/`: the
network and a `_partial_` optimizer and scheduler from Hydra, `save_hyperparameters(logger=False)`
(the network recorded, not pickled, and rebuilt from the run's config), `compile`,
MeanMetric/MaxMetric, a list split from the yaml, files written and read under `data_dir`), the
Lightning docs' OneCycleLR sized by
`self.trainer.estimated_stepping_batches`, and several test loaders.

Each trains once in one process (one `-m` sweep) and in two (DDP, one sweep); eval.py,
predict.py, serve.py and export.py read those runs as the README writes them; `dp` trains like
one process; kill -9 mid-epoch and `resume=` end bit-identical (the OneCycleLR in two
processes too); the benchmark times them; their plots are the ones they log.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from .helpers import ROOT, read_metrics, run_entry
from .zoo_contract import (
    LHT_TEAMS,
    SEEDED,
    TIMEOUT,
    ZOO,
    Outcome,
    assert_exported_onnx_matches,
    assert_same_run,
    assert_served_answers_equal_predict_py,
    assert_the_benchmark_times,
    best_checkpoint,
    checkpoint,
    done,
    history,
    kill_9_and_resume,
    seeded,
    sweep,
    sweep_checkpoints,
    tail,
    train_zoo,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Each module trained once in one process: `python train.py -m experiment=zoo_lht,...`
    (the reference run of every check below)."""
    return train_zoo(tmp_path_factory.mktemp("lht") / "one", LHT_TEAMS)


@pytest.mark.parametrize("name", LHT_TEAMS)
def test_trains_tests_and_plots_what_it_logs(runs: dict[str, Outcome], name: str) -> None:
    run, expected = done(runs[name]), ZOO[name]
    assert math.isfinite(read_metrics(run)[expected.test_metric])
    assert json.loads((run / "run_info.json").read_text())["world_size"] == 1
    assert (run / "learning_curves.png").stat().st_size > 10_000
    rows = history(run)
    assert [row["epoch"] for row in rows] == [0, 1]
    for row in rows:  # every value it logs in training or validation, every epoch
        assert set(row) - {"epoch"} == expected.curves, row
    assert (run / "confusion_matrix.png").stat().st_size > 10_000


def test_several_test_loaders_get_a_confusion_matrix_each(runs: dict[str, Outcome]) -> None:
    run = done(runs["two_test_loaders"])
    for name in ("confusion_matrix.png", "confusion_matrix_dataloader_1.png"):
        assert (run / name).stat().st_size > 10_000, name


def test_lhts_data_module_writes_its_files_under_data_dir_and_reads_its_list_split(
    runs: dict[str, Outcome],
) -> None:
    """`train_val_test_split: [64, 24, 23]` from the yaml (a ListConfig, saved with the run),
    the files `prepare_data` wrote under `paths.data_dir`, and LHT's hyperparameters: the
    factories and `compile`, and the network as the record of its class (rebuilt from the
    run's config)."""
    saved = checkpoint(done(runs["lht"]))
    data = saved["datamodule_hyper_parameters"]
    assert list(data["train_val_test_split"]) == [64, 24, 23]
    written = (ROOT / data["data_dir"] / "digits8x8").glob("*.npz")  # relative: to the run's
    assert sorted(path.name for path in written) == ["test.npz", "train.npz"]
    assert not (ROOT / data["data_dir"]).resolve().is_relative_to(ROOT)  # not the project's
    assert {"optimizer", "scheduler", "compile"} <= set(saved["hyper_parameters"])
    net = "tests.machinery.zoo.lht.models.components.simple_dense_net.SimpleDenseNet"
    assert saved["hyper_parameters"]["net"] == {"_object_": net}  # a record: never unpickled


@pytest.fixture(scope="module")
def evaluated(
    runs: dict[str, Outcome], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Outcome]:
    """`python eval.py -m ckpt_path=<each best>` (one sweep)."""
    folder = tmp_path_factory.mktemp("lht") / "eval"
    return sweep_checkpoints("eval", folder, runs, "logger=none", made="metrics.json")


@pytest.mark.parametrize("name", LHT_TEAMS)
def test_eval_as_the_readme_writes_it_gives_the_training_runs_test_metric(
    runs: dict[str, Outcome], evaluated: dict[str, Outcome], name: str
) -> None:
    metric = ZOO[name].test_metric
    assert read_metrics(done(evaluated[name]))[metric] == read_metrics(done(runs[name]))[metric]


@pytest.fixture(scope="module")
def predicted(
    runs: dict[str, Outcome], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Outcome]:
    """`python predict.py -m ckpt_path=<each best>` (one sweep)."""
    folder = tmp_path_factory.mktemp("lht") / "predict"
    return sweep_checkpoints("predict", folder, runs, made="predictions.csv")


@pytest.mark.parametrize("name", LHT_TEAMS)
def test_predict_as_the_readme_writes_it_writes_each_test_sample_once(
    predicted: dict[str, Outcome], name: str
) -> None:
    header, *rows = (done(predicted[name]) / "predictions.csv").read_text().splitlines()
    assert header == ZOO[name].predict_header
    assert len(rows) == ZOO[name].predict_rows  # two test loaders: each one's samples


@pytest.mark.parametrize("name", LHT_TEAMS)
def test_serve_as_the_readme_writes_it_answers_what_predict_writes(
    runs: dict[str, Outcome], predicted: dict[str, Outcome], name: str, tmp_path: Path
) -> None:
    predictions = done(predicted[name]) / "predictions.csv"
    assert_served_answers_equal_predict_py(name, done(runs[name]), predictions, tmp_path)


@pytest.mark.parametrize("name", LHT_TEAMS)
def test_export_as_the_readme_writes_it_matches_pytorch(
    runs: dict[str, Outcome], name: str, tmp_path: Path
) -> None:
    assert_exported_onnx_matches(name, done(runs[name]), tmp_path)


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Each module trained in 2 processes (`trainer.devices=2`, one sweep)."""
    return train_zoo(tmp_path_factory.mktemp("lht") / "ddp", LHT_TEAMS, processes=2)


@pytest.fixture(scope="module")
def ddp_evaluated(
    ddp_runs: dict[str, Outcome], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Outcome]:
    """A one-process `eval.py` of each DDP run's best checkpoint (one sweep)."""
    folder = tmp_path_factory.mktemp("lht") / "ddp_eval"
    return sweep_checkpoints("eval", folder, ddp_runs, "logger=none", made="metrics.json")


@pytest.mark.parametrize("name", LHT_TEAMS)
def test_ddp_test_accuracy_equals_a_one_process_eval_of_its_checkpoint(
    ddp_runs: dict[str, Outcome], ddp_evaluated: dict[str, Outcome], name: str
) -> None:
    """Accuracy (torchmetrics' counts, synchronised) bit-equal; LHT's data module halves its
    batch per process (`setup` reads `self.trainer.world_size`)."""
    run = done(ddp_runs[name])
    assert json.loads((run / "run_info.json").read_text())["world_size"] == 2
    single, ddp = read_metrics(done(ddp_evaluated[name])), read_metrics(run)
    assert ZOO[name].ddp_exact
    for metric in ZOO[name].ddp_exact:
        assert ddp[metric] == single[metric], metric


@pytest.fixture(scope="module")
def dp_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Each module trained with `trainer.strategy=dp trainer.devices=2` (one sweep)."""
    common = [*SEEDED, "callbacks.last_checkpoint.every_n_train_steps=5"]
    common += ["trainer.strategy=dp", "trainer.devices=2"]
    folder = tmp_path_factory.mktemp("lht") / "dp"
    experiments = [f"zoo_{name}" for name in LHT_TEAMS]
    jobs = sweep("train", folder, "experiment", experiments, *common, made="metrics.json")
    return dict(zip(LHT_TEAMS, jobs, strict=True))


@pytest.mark.parametrize("name", LHT_TEAMS)
def test_dp_trains_like_one_process(
    runs: dict[str, Outcome], dp_runs: dict[str, Outcome], name: str
) -> None:
    """On a CPU, `dp` splits nothing: its metrics are the one-process run's, bit for bit."""
    assert read_metrics(done(dp_runs[name])) == read_metrics(done(runs[name]))


@pytest.mark.parametrize("name", LHT_TEAMS)
def test_kill_9_and_resume_in_one_process_ends_bit_identical(
    runs: dict[str, Outcome], tmp_path: Path, name: str
) -> None:
    """Mid-epoch: LHT's MaxMetric reset in `on_train_start` and its factories, the OneCycleLR's
    schedule and AdamW betas, the epoch's running sums of each test loader's module."""
    reference = done(runs[name])
    every, saved = kill_9_and_resume(name, tmp_path / "run")
    assert saved["global_step"] % every == 0 and saved["epoch"] == 1
    assert saved["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]["batches"] > 0
    assert_same_run(tmp_path / "run", reference)


def test_kill_9_and_resume_of_the_one_cycle_schedule_in_two_processes_ends_bit_identical(
    ddp_runs: dict[str, Outcome], tmp_path: Path
) -> None:
    reference = done(ddp_runs["one_cycle"])
    every, saved = kill_9_and_resume("one_cycle", tmp_path / "run", processes=2)
    assert saved["global_step"] % every == 0 and saved["epoch"] == 1
    assert_same_run(tmp_path / "run", reference)


@pytest.mark.parametrize("name", LHT_TEAMS)
def test_the_benchmark_times_modules_that_read_their_trainer(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m ...bench --workload none experiment=...` (in this process): LHT's optimizer
    over `self.trainer.model.parameters()` and its data module's `self.trainer.world_size`,
    the OneCycleLR's `self.trainer.estimated_stepping_batches`, several test loaders."""
    assert_the_benchmark_times(name, tmp_path, capsys)


@pytest.mark.exhaustive  # torch.compile on a CPU: a minute or two of compiling
def test_lhts_compile_option_trains_and_eval_reads_its_checkpoint(tmp_path: Path) -> None:
    """`model.compile=true`: LHT's `setup("fit")` puts `torch.compile(self.net)` in place of
    its network, so the checkpoint's weights are saved under `net._orig_mod.`; the run tests,
    and `eval.py` of its best checkpoint (a model rebuilt, not compiled) gives the same
    accuracy."""
    run = tmp_path / "run"
    result = run_entry(
        "train", *seeded("lht"), "model.compile=true", f"hydra.run.dir={run}", timeout=TIMEOUT
    )
    assert result.returncode == 0, tail(result)
    assert any(".net._orig_mod." in f".{key}" for key in checkpoint(run)["state_dict"])
    evaluated = run_entry(
        "eval",
        f"ckpt_path={best_checkpoint(run)}",
        "logger=none",
        f"hydra.run.dir={tmp_path / 'eval'}",
        timeout=TIMEOUT,
    )
    assert evaluated.returncode == 0, tail(evaluated)
    assert read_metrics(tmp_path / "eval")["test/acc"] == read_metrics(run)["test/acc"]


def test_a_batch_larger_than_the_split_is_named_as_typed_where_the_data_module_divides_it(
    tmp_path: Path,
) -> None:
    """LHT's data module makes each process's batches `batch_size // world_size`: a batch too
    large for its 64 training digits in two processes is refused in the value typed,
    `data.batch_size=256`, and the values that fit are in those terms too."""
    import lightning as L

    from my_project.machinery.errors import UserError
    from my_project.machinery.preflight.data import check_training_data

    from .zoo.lht.data.mnist_datamodule import MNISTDataModule

    split = [64, 24, 23]
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", logger=False)
    data = MNISTDataModule(data_dir=str(tmp_path), batch_size=256, train_val_test_split=split)
    with pytest.raises(UserError) as refused:
        check_training_data(data, trainer, 256)
    assert str(refused.value).startswith(
        "data.batch_size=256 (the data module divides it among the 2 processes: batches of 128)"
        " is larger than the training split (64 examples)"
    )
    assert "Use `data.batch_size=128` or another value up to 128." in str(refused.value)
    one = L.Trainer(accelerator="cpu", devices=1, logger=False)
    data = MNISTDataModule(data_dir=str(tmp_path), batch_size=256, train_val_test_split=split)
    with pytest.raises(UserError, match=r"^data.batch_size=256 is larger .* up to 64\.$"):
        check_training_data(data, one, 256)
