"""`logger=mlflow`: a real `mlflow server` on localhost (SQLite backend) receives a training
with the config as parameters and as a file, the metrics per epoch, and the best checkpoint;
secrets stay masked there. Without MLFLOW_TRACKING_URI the store is in the run directory; a
DDP training is one MLflow run."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from my_project.machinery.errors import UserError
from my_project.machinery.loggers.mlflow import mlflow_logger, shown_uri

from .helpers import DOCS_STYLE, ROOT, clean_env, run_entry
from .serving import HOST, free_port

FAKE_KEY = "fakekey" + "0123456789abcdef" * 2 + "0123"
FAKE_TOKEN = "tok_only_in_this_test_27182818"
RUN = [*DOCS_STYLE, "trainer.max_epochs=2", "logger=mlflow"]


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`mlflow server` with a SQLite backend store, its artifacts in a folder; its URI and
    its folder."""
    root = tmp_path_factory.mktemp("mlflow_server")
    port = free_port()
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "mlflow"),
            "server",
            "--backend-store-uri",
            f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--host",
            HOST,
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=clean_env(),
        start_new_session=True,
    )
    uri = f"http://{HOST}:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=5) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        assert process.poll() is None, "mlflow server exited"
        assert time.monotonic() < deadline, "mlflow server not ready in 180 s"
        time.sleep(0.5)
    try:
        yield uri, root
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def runs_of(uri: str, experiment: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    return [] if found is None else client.search_runs([found.experiment_id])


@pytest.mark.slow
def test_the_server_receives_params_metrics_per_epoch_config_and_best_checkpoint(
    tracking_server: tuple[str, Path], tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    uri, server_root = tracking_server
    run_dir = tmp_path / "run"
    result = run_entry(
        "train",
        *RUN,
        "logger.mlflow.experiment_name=one-process",
        f"+extra.api_token={FAKE_TOKEN}",
        f"hydra.run.dir={run_dir}",
        env=clean_env(MLFLOW_TRACKING_URI=uri, MLFLOW_TRACKING_TOKEN=FAKE_KEY),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"MLflow: logging to {uri}." in result.stdout + result.stderr
    (run,) = runs_of(uri, "one-process")
    assert run.info.status == "FINISHED" and run.info.run_name == "train"
    params = run.data.params
    assert params["model/lr"] == "0.01" and params["trainer/max_epochs"] == "2"
    assert params["extra/api_token"] == "***"
    assert params["num_classes"] == "4"  # the model's hyperparameters, from Lightning
    assert run.data.tags["dev"] == "true"  # the config's `tags`
    client = MlflowClient(uri)
    history = client.get_metric_history(run.info.run_id, "val_acc")
    assert len(history) == 2 and history[0].step < history[1].step  # one per epoch
    assert {"train_loss_epoch", "test_acc"} <= set(run.data.metrics)
    assert sorted(a.path for a in client.list_artifacts(run.info.run_id, "checkpoints")) == [
        f"checkpoints/{p.name}" for p in (run_dir / "checkpoints").glob("epoch_*.ckpt")
    ]
    downloaded = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "got")))
    assert (downloaded / "config.yaml").read_text() == (run_dir / "config.yaml").read_text()
    best = next((run_dir / "checkpoints").glob("epoch_*.ckpt"))
    assert (downloaded / "checkpoints" / best.name).read_bytes() == best.read_bytes()
    assert "api_token: '***'" in (downloaded / "config.yaml").read_text()

    output = result.stdout + result.stderr
    for secret in (FAKE_KEY, FAKE_TOKEN):
        assert secret not in output
        assert all(secret not in str(v) for v in [*params.values(), *run.data.tags.values()])
        stored = [p for p in server_root.rglob("*") if p.is_file()] + [
            p for p in run_dir.rglob("*") if p.is_file()
        ]
        leaks = [p for p in stored if secret.encode() in p.read_bytes()]
        assert leaks == [], f"{secret} found in {leaks}"
    assert not (run_dir / "mlflow.db").exists()  # the server holds it all


@pytest.mark.exhaustive  # MLflow's params, metrics and artifacts in the slow tier: the server test
def test_a_ddp_run_is_one_mlflow_run_in_the_run_directory_without_a_tracking_uri(
    tmp_path: Path,
) -> None:
    result = run_entry(
        "train", *RUN, "trainer.devices=2", "trainer.strategy=ddp", f"hydra.run.dir={tmp_path}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"MLflow: logging to {tmp_path / 'mlflow.db'}" in result.stdout + result.stderr
    experiment = OmegaConf.load(ROOT / "configs/logger/mlflow.yaml").mlflow.experiment_name
    (run,) = runs_of(f"sqlite:///{tmp_path / 'mlflow.db'}", experiment)
    assert run.info.status == "FINISHED" and run.data.params["trainer/devices"] == "2"
    assert {"val_acc", "test_acc"} <= set(run.data.metrics)
    artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
    assert artifacts.is_relative_to(tmp_path / "mlartifacts")
    assert (artifacts / "config.yaml").is_file()
    assert [p.name for p in (artifacts / "checkpoints").iterdir()] == [
        p.name for p in (tmp_path / "checkpoints").glob("epoch_*.ckpt")
    ]
    assert not (ROOT / "mlruns").exists() and not (ROOT / "mlflow.db").exists()


def test_a_tracking_server_that_does_not_answer_stops_the_run_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(UserError, match=r"http://127\.0\.0\.1:9 cannot be reached"):
        mlflow_logger(str(tmp_path), tracking_uri="http://user:secret@127.0.0.1:9")
    assert time.monotonic() - started < 10


def test_credentials_in_a_tracking_uri_are_not_shown() -> None:
    assert shown_uri("https://ann:pa55word@mlflow.example.org:8443/x") == (
        "https://mlflow.example.org:8443/x"
    )
    assert shown_uri("sqlite:////tmp/mlflow.db") == "sqlite:////tmp/mlflow.db"


def test_a_missing_optional_dependency_names_the_extra_to_install() -> None:
    from my_project.machinery.errors import require_extra

    require_extra(("json",), "serve", "serve.py")
    with pytest.raises(UserError, match=r"needs no_such_module_27, .* the project's `serve` extra"):
        require_extra(("json", "no_such_module_27"), "serve", "serve.py")
