"""A module written as lightning-hydra-template writes it (`lht_style.py`: `net` built by
Hydra and left out of its hyperparameters, `_partial_` optimizer and scheduler; a data module
whose hyperparameters hold a list from its yaml, a tuple, an enum and a path) trains, tests its
best checkpoint, and every command reads back what the run wrote: eval, predict, `resume=`,
export and serve. Checkpoints hold plain data (`atomic_io.plain`); the module is rebuilt with
the objects its run's config built (`build.load_model`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from .helpers import SEARCH_MACHINERY_CONFIGS, read_metrics, run_entry
from .serving import serving

LHT = [SEARCH_MACHINERY_CONFIGS, "experiment=lht_style", "logger=csv"]
READ = [SEARCH_MACHINERY_CONFIGS]  # eval, predict, serve, export: model and data from the run


@pytest.fixture(scope="module")
def lht_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("lht") / "run"
    result = run_entry("train", *LHT, "trainer.max_epochs=2", f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


@pytest.mark.slow
def test_an_lht_style_run_reads_back_every_checkpoint_it_wrote(
    lht_run: Path, tmp_path: Path
) -> None:
    trained = read_metrics(lht_run)
    assert trained["test/acc"] > 0.7  # the test of the best checkpoint, after training
    saved = torch.load(lht_run / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["hyper_parameters"]["optimizer"]["_partial_"] is True
    assert saved["datamodule_hyper_parameters"]["train_val_test_split"] == [512, 128, 89]
    (best,) = (lht_run / "checkpoints").glob("epoch_*.ckpt")

    result = run_entry("eval", *READ, f"ckpt_path={best}", f"hydra.run.dir={tmp_path / 'e'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_metrics(tmp_path / "e")["test/acc"] == trained["test/acc"]

    result = run_entry("predict", *READ, f"ckpt_path={best}", f"hydra.run.dir={tmp_path / 'p'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len((tmp_path / "p" / "predictions.csv").read_text().splitlines()) == 1 + 89

    result = run_entry("export", *READ, f"ckpt_path={best}", f"hydra.run.dir={tmp_path / 'x'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "x" / "model.onnx").stat().st_size > 0

    with serving(*READ, f"ckpt_path={best}", f"hydra.run.dir={tmp_path / 's'}") as server:
        status, answer = server.predict({"inputs": np.zeros((2, 16)).tolist()})
    assert status == 200 and np.array(answer["prob"]).shape == (2, 4), answer

    result = run_entry("train", f"resume={lht_run}", "trainer.max_epochs=3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert torch.load(lht_run / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 2
