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
from omegaconf import OmegaConf

from .helpers import (
    CONFIG_DIR,
    DOCS_STYLE,
    SEARCH_MACHINERY_CONFIGS,
    clean_env,
    compose_config,
    pinned,
    read_metrics,
    run_entry,
)
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

    # `data.<key>=` sets a key of the run's data, one the entry's default data lacks too
    changed = ("data.batch_size=7", "data.train_val_test_split=[512,128,89]")
    eval_dir = f"hydra.run.dir={tmp_path / 'e'}"
    result = run_entry("eval", *READ, f"ckpt_path={best}", *changed, eval_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"trained them ({lht_run / 'config.yaml'}), with {' '.join(changed)};" in result.stdout
    assert read_metrics(tmp_path / "e")["test/acc"] == trained["test/acc"]
    used = OmegaConf.load(next((tmp_path / "e").rglob("hparams.yaml"))).data
    assert used == {**OmegaConf.load(lht_run / "config.yaml").data, "batch_size": 7}

    result = run_entry("predict", *READ, f"ckpt_path={best}", f"hydra.run.dir={tmp_path / 'p'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len((tmp_path / "p" / "predictions.csv").read_text().splitlines()) == 1 + 89

    result = run_entry("export", *READ, f"ckpt_path={best}", f"hydra.run.dir={tmp_path / 'x'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "x" / "model.onnx").stat().st_size > 0

    with serving(*READ, f"ckpt_path={best}", f"hydra.run.dir={tmp_path / 's'}") as server:
        status, answer = server.predict({"inputs": np.zeros((2, 16)).tolist()})
    assert status == 200 and np.array(answer["prob"]).shape == (2, 4), answer

    # resumed as a SLURM batch job's task: none of Lightning's false warnings on a resume
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "train", "SLURM_NTASKS": "1"}
    env = clean_env(**slurm, SLURM_PROCID="0", SLURM_NTASKS_PER_NODE="1", SLURM_NNODES="1")
    result = run_entry("train", f"resume={lht_run}", "trainer.max_epochs=3", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert torch.load(lht_run / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 2
    said = result.stdout + result.stderr
    assert "Restored all states from the checkpoint" in said, said[-3000:]
    for false in ("Previous log files", "exists and is not empty", "SLURM auto-requeueing"):
        assert false not in said, said[-3000:]


def test_a_data_setting_on_eval_changes_that_key_of_the_runs_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python eval.py ckpt_path=<ckpt> data.<key>=value` keeps the data of the checkpoint's run
    and changes that key (one the entry's default data lacks too); only `data=<name>` chooses
    other data; a key the run's data lacks is refused with the closest ones."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from my_project.machinery.errors import UserError
    from my_project.machinery.run.checkpoint_config import use_checkpoint_run
    from my_project.machinery.run.run_data import for_the_run_data

    run = tmp_path / "run"
    trained = compose_config(DOCS_STYLE, run)
    (run / "checkpoints").mkdir(parents=True)
    OmegaConf.save(OmegaConf.to_container(trained, resolve=True), run / "config.yaml")
    ckpt = f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}"

    typed = for_the_run_data("eval", [ckpt, "data.batch_size=8", "data.test_size=7"])
    assert typed == [ckpt, "++data.batch_size=8", "++data.test_size=7"]
    chosen = [ckpt, "data=digits", "data.batch_size=8"]  # the group chosen: Hydra's as typed
    assert for_the_run_data("eval", chosen) == chosen
    with pytest.raises(UserError, match=r"has no `data.batch_sise`\. Did you mean `data.batch"):
        for_the_run_data("eval", [ckpt, "data.batch_sise=8"])

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("eval", overrides=pinned(typed), return_hydra_config=True)
    HydraConfig().set_config(cfg)
    try:
        use_checkpoint_run(cfg, typed[0].split("=", 1)[1])
    finally:
        HydraConfig.instance().cfg = None  # type: ignore[assignment]
    expected = {**trained.data, "batch_size": 8, "test_size": 7}
    assert OmegaConf.to_container(cfg.data) == expected
    said = capsys.readouterr().out
    assert (
        "Model and data: as the run" in said and "with data.batch_size=8 data.test_size=7;" in said
    )
