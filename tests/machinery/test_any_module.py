"""Each fix of the machinery for the module patterns of the Lightning docs, in one process, on
the zoo's modules (tests/machinery/zoo/): what test_zoo.py shows through the entry points,
here at the piece that does it. Fits are tiny (64 samples, an epoch or two)."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from omegaconf import open_dict
from torch.utils.data import DataLoader, TensorDataset

from my_project.machinery.callbacks.monitored_metric import MonitoredMetricIsLogged
from my_project.machinery.callbacks.plots import PlotCallback
from my_project.machinery.callbacks.resumable_loader import resumable
from my_project.machinery.callbacks.schedule_on_resume import ScheduleOnResume
from my_project.machinery.errors import UserError
from my_project.machinery.preflight import contract
from my_project.machinery.reliability import signals
from my_project.machinery.run.entry import with_trainer_arguments
from my_project.machinery.run.hydra_errors import explain
from my_project.machinery.run.predict import as_classes, classifier_of
from my_project.machinery.tasks import binary_probabilities

from .helpers import CONFIG_DIR, SEARCH_MACHINERY_CONFIGS, pinned
from .zoo import gan, kwargs_subclass, plateau, two_val_loaders


def trainer(tmp_path: Path, *callbacks: Callback, epochs: int = 2, **kwargs: Any) -> L.Trainer:
    return L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        callbacks=list(callbacks),
        **kwargs,
    )


# -- several validation loaders -------------------------------------------------------------
@pytest.mark.slow
def test_a_monitor_of_one_of_several_validation_loaders_is_found(tmp_path: Path) -> None:
    """With two loaders Lightning leaves callback_metrics empty after the sanity check; the
    names come from what validation logged."""
    check = ModelCheckpoint(dirpath=tmp_path, monitor="val_acc/dataloader_idx_0", mode="max")
    fit = trainer(tmp_path, check, MonitoredMetricIsLogged(), epochs=1)
    fit.fit(two_val_loaders.TwoValClassifier(), two_val_loaders.TwoValData())
    assert Path(check.best_model_path).is_file()

    wrong = ModelCheckpoint(dirpath=tmp_path, monitor="val_acc", mode="max")
    with pytest.raises(UserError, match=r"its validation logs val_acc/dataloader_idx_0, "):
        trainer(tmp_path, wrong, MonitoredMetricIsLogged(), epochs=1).fit(
            two_val_loaders.TwoValClassifier(), two_val_loaders.TwoValData()
        )


# -- learning curves ------------------------------------------------------------------------
@pytest.mark.slow
def test_values_logged_per_step_only_are_plotted_at_their_epochs_last_step(
    tmp_path: Path,
) -> None:
    """A GAN logs g_loss and d_loss on every step (`log_dict`, no on_epoch): the curves are
    each epoch's last value, as `callback_metrics` holds it, under the stage that logged them."""

    class LastSteps(Callback):
        def __init__(self) -> None:
            self.values: dict[int, dict[str, float]] = {}

        def on_train_epoch_end(self, trainer: L.Trainer, *args: Any) -> None:
            metrics = trainer.callback_metrics
            self.values[trainer.current_epoch] = {
                n: float(metrics[n]) for n in ("g_loss", "d_loss")
            }

    plots, last = PlotCallback(str(tmp_path)), LastSteps()
    trainer(tmp_path, last, plots).fit(gan.GAN(), gan.RingData())
    assert [row["epoch"] for row in plots.history] == [0, 1]
    for row in plots.history:
        for name in ("g_loss", "d_loss"):
            assert row[f"train/{name}"] == last.values[row["epoch"]][name]
    assert (tmp_path / "learning_curves.png").is_file()


# -- one-logit binary classifiers -----------------------------------------------------------
def test_one_output_against_0_1_labels_is_a_binary_classifier() -> None:
    labels = torch.tensor([0.0, 1.0, 1.0, 0.0])
    logits = torch.tensor([-2.0, 3.0, 0.5, 0.2])
    assert torch.allclose(binary_probabilities(logits, labels), logits.sigmoid())
    probabilities = torch.tensor([[0.1], [0.9], [0.6], [0.7]])  # a sigmoid in forward
    assert torch.equal(binary_probabilities(probabilities, labels), probabilities[:, 0])
    assert binary_probabilities(logits, torch.tensor([0.5, 1.5, 2.0, 3.0])) is None  # regression
    assert binary_probabilities(torch.randn(4, 2), labels.long()) is None  # class scores

    assert classifier_of(torch.nn.Identity(), (logits, labels)) == "logits"  # predict.py's
    columns = as_classes(logits, "logits")
    assert list(columns) == ["prediction", "prob"]
    assert columns["prediction"].tolist() == [0, 1, 1, 1]
    regression = (torch.tensor([0.3, 2.0]), torch.tensor([0.5, 2.5]))
    assert classifier_of(torch.nn.Identity(), regression) is None


# -- ReduceLROnPlateau on resume ------------------------------------------------------------
class AlwaysOnAPlateau(plateau.PlateauClassifier):
    """The zoo's module, its plateau declared at every epoch (a threshold no loss meets)."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, factor=0.5, patience=0, threshold=10.0
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "monitor": "val_loss"},
        }


class LearningRate(Callback):
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.lr = trainer.optimizers[0].param_groups[0]["lr"]


def fit_plateau(tmp_path: Path, lr: float, epochs: int, ckpt: str | None = None) -> LearningRate:
    seen = LearningRate()
    last = ModelCheckpoint(dirpath=tmp_path, save_last=True)
    torch.manual_seed(0)
    run = trainer(tmp_path, last, ScheduleOnResume(), seen, epochs=epochs)
    run.fit(AlwaysOnAPlateau(lr=lr), plateau.PlateauData(), ckpt_path=ckpt)
    return seen


def test_a_changed_lr_on_resume_starts_the_plateau_afresh_at_this_runs_lr(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fit_plateau(tmp_path, lr=0.04, epochs=3)
    saved = torch.load(tmp_path / "last.ckpt", weights_only=True)
    restored = saved["optimizer_states"][0]["param_groups"][0]["lr"]
    assert restored == 0.04 / 4  # halved after epochs 2 and 3 (the first sets the best)

    with caplog.at_level(logging.INFO):
        unchanged = fit_plateau(tmp_path / "same", 0.04, 4, str(tmp_path / "last.ckpt"))
    assert unchanged.lr == restored and "Resumed at step" not in caplog.text

    with caplog.at_level(logging.INFO):
        changed = fit_plateau(tmp_path / "changed", 0.004, 4, str(tmp_path / "last.ckpt"))
    assert changed.lr == 0.004  # the reductions so far are dropped with the old settings
    assert "Resumed at step" in caplog.text


# -- **kwargs forwarded to a parent -----------------------------------------------------------
class FixedClasses(kwargs_subclass.BaseClassifier):
    """Sets a parent argument itself and forwards the rest."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(num_classes=3, **kwargs)


def test_the_datas_model_kwargs_reach_a_parent_through_a_subclasss_kwargs() -> None:
    offered = kwargs_subclass.KwargsData().model_kwargs()
    cls = kwargs_subclass.SmoothedClassifier
    assert contract.arguments_from_data(cls, {"smoothing"}, offered) == offered
    cfg = {"_target_": f"{cls.__module__}.{cls.__qualname__}", "smoothing": 0.2}
    model = contract.instantiate_model(cfg, cls, offered)
    assert model.hparams.num_classes == 3 and model.smoothing == 0.2

    # The subclass sets num_classes itself: the data's offer of it is not passed twice.
    target = {"_target_": f"{__name__}.FixedClasses"}
    model = contract.instantiate_model(target, FixedClasses, offered)
    assert model.hparams.num_features == 8


# -- exact resume whatever the team's DataLoader ------------------------------------------------
def test_the_resumable_loader_leaves_the_global_rng_alone() -> None:
    """A DataLoader without a generator draws its workers' base seed from the global RNG
    when its iterator is made: after a resume that draw came after the restored RNG states,
    and dropout drew other numbers than in the run that never stopped."""
    data = TensorDataset(torch.arange(20.0))
    for shuffle in (True, False):
        loader = resumable(DataLoader(data, batch_size=4, shuffle=shuffle), seed=3)
        before = torch.get_rng_state()
        batches = [batch[0].tolist() for batch in loader]
        assert torch.equal(torch.get_rng_state(), before) and len(batches) == 5
        assert callable(loader.state_dict) and callable(loader.load_state_dict)


# -- configure_model ---------------------------------------------------------------------------
@pytest.mark.slow
def test_a_checkpoint_of_layers_made_in_configure_model_matches_a_new_module(
    tmp_path: Path,
) -> None:
    """Before a fit calls `configure_model`, the module has no such layers: a resume checks the
    checkpoint against them as `configure_model` builds them (a resume of such a module was
    refused)."""
    from my_project.machinery.preflight.checkpoint import check_checkpoint_matches
    from my_project.machinery.run.deferred import build_layers

    from .zoo import configure_model

    run = trainer(tmp_path, ModelCheckpoint(dirpath=tmp_path, save_last=True), epochs=1)
    run.fit(configure_model.LateBuiltClassifier(), configure_model.LateBuiltData())
    fresh, data = configure_model.LateBuiltClassifier(), configure_model.LateBuiltData()
    assert fresh.net is None
    data.setup("fit")
    build_layers(fresh, "fit", trainer(tmp_path / "again"), data)
    assert check_checkpoint_matches(str(tmp_path / "last.ckpt"), fresh)["global_step"] == 8


# -- any Trainer argument -------------------------------------------------------------------------
def test_any_trainer_argument_is_taken_without_a_plus() -> None:
    """Set or added (`++`): the Trainer refuses an argument it does not take itself."""
    assert with_trainer_arguments(
        ["trainer.num_sanity_val_steps=0", "+trainer.limit_val_batches=2", "model.lr=0.1"]
    ) == ["++trainer.num_sanity_val_steps=0", "+trainer.limit_val_batches=2", "model.lr=0.1"]


def test_a_misspelt_key_is_refused_with_the_closest_names() -> None:
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        for override, hint in (
            ("trainer.max_epoch=3", "Did you mean `trainer.max_epochs`"),
            ("model.lrr=0.1", "Did you mean `model.lr`?"),
        ):
            with pytest.raises(Exception) as raised:
                zoo = [SEARCH_MACHINERY_CONFIGS, "experiment=zoo_binary"]  # not the example's
                compose("train", overrides=pinned([*zoo, override]))
            message = str(explain(raised.value))
            assert hint in message, message  # not only Hydra's advice, `+model.lrr=`


# -- ddp_spawn -----------------------------------------------------------------------------------
def test_what_the_signal_handling_puts_on_the_trainer_pickles(tmp_path: Path) -> None:
    """The spawn launchers (`ddp_spawn`) pickle the Trainer for their processes."""
    run = trainer(tmp_path, signals.StopTogether())
    signals.StopTogether().setup(run, None, "fit")  # type: ignore[arg-type]
    pickle.dumps(run.fit_loop.epoch_loop._broadcast_sigterm_tensor)
    pickle.dumps(run.callbacks)


# -- train(cfg) from Hydra's compose API ---------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("hydra_node", ["set_config", "node", "none"])
def test_train_runs_on_a_config_from_hydras_compose_api(
    hydra_node: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As lightning-hydra-template's tests and notebooks call it: `compose(...,
    return_hydra_config=True)` (with `HydraConfig().set_config(cfg)` or not), or a config
    without a hydra node; no run directory given: one is made as `hydra.run.dir` makes it."""
    from my_project.machinery.run.train import train

    monkeypatch.chdir(tmp_path)
    overrides = pinned(
        [SEARCH_MACHINERY_CONFIGS, "experiment=zoo_binary", "trainer.max_epochs=1", "logger=csv"]
    )
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=hydra_node != "none")
    if hydra_node == "set_config":
        with open_dict(cfg):
            cfg.paths.output_dir = str(tmp_path / "given")
        HydraConfig().set_config(cfg)
    try:
        metrics = train(cfg)
    finally:
        HydraConfig.instance().cfg = None  # type: ignore[assignment]
    assert 0 < metrics["test_acc"] <= 1
    if hydra_node == "set_config":
        assert (tmp_path / "given" / "metrics.json").is_file()
    else:
        (run,) = (tmp_path / "logs" / "train" / "runs").iterdir()
        assert (run / "metrics.json").is_file() and (run / "learning_curves.png").is_file()
