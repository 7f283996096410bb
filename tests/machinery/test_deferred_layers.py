"""Layers a module builds late, in `setup(stage)` from its data or in `configure_model` from
`self.trainer` (the zoo's `setup_layers` and `configure_model`): the config's values reach them
before anything of a run is written, and a checkpoint's weights load into them wherever a
checkpoint is read (its zoo contracts: eval, predict, serve, export and resume as the README
writes them, test_zoo.py). A compiled network's checkpoint loads into the uncompiled one."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from lightning.pytorch import Trainer
from torch import nn

from my_project.machinery.errors import UserError
from my_project.machinery.preflight.checkpoint import check_checkpoint_matches
from my_project.machinery.run import deferred
from my_project.machinery.run.build import load_model, model_for_data
from my_project.machinery.run.train import train

from .helpers import SEARCH_MACHINERY_CONFIGS, compose_config, read_metrics
from .zoo.configure_model import LateBuiltClassifier, LateBuiltData
from .zoo.setup_layers import DataShapedClassifier, ShapesFromData

LATE = ["configure_model", "setup_layers"]
QUICK = ["trainer.max_epochs=1", "logger=none", "seed=7"]


def config(name: str, tmp_path: Path, *overrides: str) -> object:
    return compose_config(
        [SEARCH_MACHINERY_CONFIGS, f"experiment=zoo_{name}", *QUICK, *overrides], tmp_path
    )


@pytest.mark.parametrize("name", LATE)
@pytest.mark.parametrize(
    ("hidden", "complaint"),
    [
        (0, r"a layer of size 0: its parameter \w+\.0\.weight has shape \(0, \d\)"),
        (-4, "negative dimension -4"),
    ],
    ids=["hidden=0", "hidden=-4"],
)
def test_a_value_that_reaches_layers_built_late_is_refused_before_anything_is_written(
    name: str, hidden: int, complaint: str, tmp_path: Path
) -> None:
    """`model.hidden=0` would train a (0, n) layer at chance; `model.hidden=-4` fail in torch
    once the run directory is written."""
    run = tmp_path / "run"
    with pytest.raises(UserError, match=complaint):
        train(config(name, run, f"model.hidden={hidden}"))
    assert not run.exists()


def test_trying_the_late_layers_leaves_the_random_numbers_to_the_run(tmp_path: Path) -> None:
    """The run's own layers draw the numbers they would draw without the trial."""
    cfg = config("setup_layers", tmp_path)
    data = ShapesFromData()
    data.setup("fit")
    model = model_for_data(cfg, data)
    torch.manual_seed(3)
    random.seed(3)
    np.random.seed(3)
    before = torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()
    trainer = Trainer(accelerator="cpu", logger=False, enable_checkpointing=False)
    tried = deferred.tried(lambda: model_for_data(cfg, data), model, "fit", trainer, data)
    assert tried is not model and tried.body[0].weight.shape == (16, 6)
    assert not hasattr(model, "body")  # the run's own model: built by Lightning, later
    assert torch.equal(torch.get_rng_state(), before[0])
    assert random.getstate() == before[1] and (np.random.get_state()[1] == before[2]).all()


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The zoo's setup_layers module, trained one epoch (in this process)."""
    run = tmp_path_factory.mktemp("setup_layers") / "run"
    train(config("setup_layers", run))
    return run


def test_a_loaded_model_keeps_its_weights_when_a_trainer_sets_it_up_again(trained: Path) -> None:
    """Its `setup` builds new layers at every call (as the Lightning docs' example does):
    eval.py's `trainer.test` of the loaded model tests the checkpoint's weights."""
    (best,) = (trained / "checkpoints").glob("epoch_*.ckpt")
    target = "tests.machinery.zoo.setup_layers.DataShapedClassifier"
    model = load_model(target, str(best), stage="test")
    saved = torch.load(best, weights_only=True)["state_dict"]
    assert model.state_dict().keys() == saved.keys()
    trainer = Trainer(accelerator="cpu", logger=False, enable_progress_bar=False)
    (tested,) = trainer.test(model, datamodule=ShapesFromData())
    for key, value in saved.items():
        assert torch.equal(model.state_dict()[key], value), key
    assert tested["test_acc"] == pytest.approx(read_metrics(trained)["test_acc"], abs=1e-7)


def test_a_late_model_is_checked_against_a_resumes_checkpoint(trained: Path) -> None:
    """`resume=` compares the checkpoint with the layers the module will have: a checkpoint
    of other layers is refused (not a key list once the run is written)."""
    other = LateBuiltClassifier()
    data = LateBuiltData()
    data.setup("fit")
    deferred.build_layers(other, "fit", Trainer(accelerator="cpu", logger=False), data)
    with pytest.raises(
        UserError, match=r"is a checkpoint of a different model: net\.0\.weight missing"
    ) as refused:
        check_checkpoint_matches(str(trained / "checkpoints" / "last.ckpt"), other)
    # the differences past the first three are counted, not an ellipsis before the full stop
    assert re.search(r" \(and \d+ more\)\. Give the model", str(refused.value)), refused.value


def test_a_compiled_networks_weights_load_into_the_uncompiled_network() -> None:
    """LHT's `compile=true` compiles its network in `setup("fit")`: the checkpoint's names are
    `net._orig_mod.*`, eval's model (not compiled) has `net.*`, and the other way round."""

    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, 2))

    plain, compiled = Holder(), Holder()
    compiled.net = torch.compile(compiled.net)
    assert set(compiled.state_dict()) == {"net._orig_mod.0.weight", "net._orig_mod.0.bias"}
    plain.load_state_dict(deferred.weights_for(plain, compiled.state_dict()))
    compiled.load_state_dict(deferred.weights_for(compiled, plain.state_dict()))
    assert deferred.weights_for(plain, plain.state_dict()).keys() == plain.state_dict().keys()


def test_a_resume_that_would_compile_otherwise_says_so(trained: Path, tmp_path: Path) -> None:
    model = load_model(
        "tests.machinery.zoo.setup_layers.DataShapedClassifier",
        str(trained / "checkpoints" / "last.ckpt"),
    )
    model.body = torch.compile(model.body)
    with pytest.raises(
        UserError, match=r"compiled with torch.compile .* Resume with the `compile` setting"
    ):
        check_checkpoint_matches(str(trained / "checkpoints" / "last.ckpt"), model)


class CompilesWhenFitting(DataShapedClassifier):
    """Its own layers, and a `setup` that compiles them when fitting (LHT's `compile`)."""

    def __init__(self, hidden: int = 4, lr: float = 0.02) -> None:
        super().__init__(hidden, lr)
        self.body = nn.Sequential(nn.Linear(6, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, 3)

    def setup(self, stage):
        if stage == "fit":
            self.body = torch.compile(self.body)


def test_a_checkpoint_away_from_its_run_loads_where_the_late_hook_needs_no_data(
    tmp_path: Path,
) -> None:
    """No config.yaml beside it, so no data module to attach: a module whose late hook needs
    none still loads, into layers built as its `setup` builds them."""
    model = CompilesWhenFitting()
    path = tmp_path / "alone.ckpt"
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams)}, path)
    loaded = load_model(f"{__name__}.CompilesWhenFitting", str(path))
    assert torch.equal(loaded.head.weight, model.head.weight)
