"""Every private name of Lightning the machinery uses (machinery/lightning_compat.py) is still
there and does what it did: a Lightning update that changes one fails here, not in a run.

The one patch replaces `_TrainingEpochLoop._broadcast_sigterm_tensor`: its source and the
lines of `advance` that call it are pinned by hash for the versions it was checked against."""

from __future__ import annotations

import ast
import hashlib
import inspect
from typing import Any

import hydra
import lightning
import pytest
import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loops.training_epoch_loop import _TrainingEpochLoop
from packaging.version import Version

from my_project.machinery import lightning_compat as compat

from .docs_style import LitClassifier, LitDataModule

# sha256 (12 digits) of `_broadcast_sigterm_tensor`'s source and of the two `advance` lines
# that call it under DDP, identical in 2.5.2, 2.5.6, 2.6.1 and 2.6.6 (absent before 2.5.2).
BROADCAST, CALL_SITE = "d008de3211df", "c627798d5082"


def _source(name: str) -> str:
    """A method of `_TrainingEpochLoop` as written in Lightning's file."""
    source = inspect.getsource(inspect.getmodule(_TrainingEpochLoop))  # type: ignore[arg-type]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(source, node) or ""
    return ""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def test_the_patched_method_is_the_one_checked_or_absent() -> None:
    version = Version(lightning.__version__)
    if not hasattr(_TrainingEpochLoop, "_broadcast_sigterm_tensor"):
        assert version < compat.PATCH_CHECKED[0], "a new Lightning removed it: drop the patch"
        return
    lines = [line.strip() for line in _source("advance").splitlines()]
    at = next(i for i, line in enumerate(lines) if "_broadcast_sigterm_tensor" in line)
    call_site = "\n".join(lines[at - 1 : at + 1])
    assert (_digest(_source("_broadcast_sigterm_tensor")), _digest(call_site)) == (
        BROADCAST,
        CALL_SITE,
    ), (
        "Lightning changed the per-batch SIGTERM broadcast: check lightning_compat's patch "
        "against it (it may now be every N steps, #21640), then update the hashes and versions"
    )
    low, high = compat.PATCH_CHECKED
    assert low <= version <= high, f"Lightning {version}: check the patch, then widen PATCH_CHECKED"


class Look(Callback):
    """What the compat functions read from a real run, at the points the machinery reads it."""

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self.seen["patched"] = compat.skip_sigterm_broadcast(trainer)

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        entries = compat.logged_entries(compat.validation_results(trainer))
        self.seen["validation"] = sorted(compat.logged_name(e) for e in entries)
        self.seen["training"] = len(compat.logged_entries(compat.training_results(trainer)))


def test_the_private_state_the_machinery_reads_and_sets_is_where_it_was(tmp_path: Any) -> None:
    look, last = Look(), ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=3)
    compat.also_every_epoch(last)
    trainer = Trainer(
        max_epochs=1,
        limit_train_batches=4,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[look, last],
    )
    trainer.fit(LitClassifier(16, 4), datamodule=LitDataModule())
    version = Version(lightning.__version__)
    applies = hasattr(_TrainingEpochLoop, "_broadcast_sigterm_tensor") and (
        compat.PATCH_CHECKED[0] <= version <= compat.PATCH_CHECKED[1]
    )
    assert look.seen["patched"] is applies
    if applies:
        assert trainer.fit_loop.epoch_loop._broadcast_sigterm_tensor is compat._no_broadcast
    assert look.seen["validation"] and look.seen["training"] >= 1
    # both saves: every 3 steps and at the epoch's end
    assert last._last_global_step_saved == 4 and len(list(tmp_path.glob("*.ckpt"))) >= 1
    assert not trainer.received_sigterm
    compat.stop_between_batches(trainer)
    assert trainer.received_sigterm
    assert compat.ddp_launch(trainer.strategy) == (None, None)


def test_the_imported_private_names_have_the_signatures_used() -> None:
    from torch.utils.data import DataLoader, SequentialSampler, TensorDataset

    # the dataset by keyword: Lightning leaves DataLoader's __init__ recording its arguments
    # after a loader hook raised in this process (an earlier test's team bug), positional or not
    loader = DataLoader(dataset=TensorDataset(torch.arange(4.0)), batch_size=2)
    args, kwargs = compat.loader_args(loader, SequentialSampler(loader.dataset), None)
    assert kwargs["batch_size"] == 2 and not args
    assert compat.update_dataloader(loader, SequentialSampler(loader.dataset)).batch_size == 2
    for name in ("_call_children_scripts", "_check_can_spawn_children", "launch"):
        assert callable(getattr(compat.SubprocessScriptLauncher, name)), name
    from lightning.pytorch.strategies import DDPStrategy

    assert callable(DDPStrategy._configure_launcher)
    strategy = DDPStrategy(start_method="spawn")
    compat.set_launcher(strategy, "launcher")
    assert strategy.launcher == "launcher" and compat.start_method(strategy) == "spawn"


@pytest.mark.parametrize("start", ["popen", "spawn"])
def test_the_ddp_launch_is_read_from_the_strategy(start: str) -> None:
    trainer = Trainer(accelerator="cpu", devices=2, strategy=f"ddp_{start}".replace("_popen", ""))
    assert compat.ddp_launch(trainer.strategy) == (start, "gloo")


class LooksAtTheTestsValues(Callback):
    """What `callbacks/whole_metrics.py` reads and switches, as the test's last batch ends."""

    def __init__(self) -> None:
        self.combinable: dict[str, bool] = {}

    def on_test_batch_end(self, trainer: Trainer, *args: Any, **kwargs: Any) -> None:
        if not trainer.test_loop.batch_progress.is_last_batch:
            return
        for entry in compat.logged_entries(compat.active_results(trainer)):
            self.combinable[compat.logged_name(entry)] = compat.combinable(entry)
            if compat.combinable(entry):
                compat.combine_across_processes(entry, True)
                assert entry.meta.sync.should and not compat.combinable(entry)
                compat.combine_across_processes(entry, False)  # one process: nothing to combine


def test_a_value_logged_without_sync_dist_is_one_lightning_can_combine() -> None:
    """A plain tensor logged for the epoch is combinable (Lightning keeps its sum and sample
    count, and syncs it as `sync_dist=True` once told to; in one process Lightning drops
    `sync_dist`, so `test_loss` is too); a torchmetrics metric, which syncs itself, is not."""
    look = LooksAtTheTestsValues()
    trainer = Trainer(
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[look],
    )
    trainer.test(LitClassifier(16, 4), datamodule=LitDataModule())
    assert look.combinable == {"test_loss": True, "test_acc": False, "test_error": True}


def test_hydras_error_reporting_is_wrapped_only_where_it_was_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hydra._internal.utils as hydra_utils

    from my_project.machinery import hydra_compat

    assert hydra_compat.checked(), f"Hydra {hydra.__version__}: check hydra_compat, then widen"
    assert list(inspect.signature(hydra_utils.run_and_report).parameters) == ["func"]
    original, calls = hydra_utils.run_and_report, []

    def wrap(func: Any) -> Any:
        calls.append(func)
        return func

    with hydra_compat.errors_reported_by(wrap) as applied:
        assert applied and hydra_utils.run_and_report(lambda: 7) == 7 and len(calls) == 1
    assert hydra_utils.run_and_report is original
    monkeypatch.setattr(hydra_compat, "CHECKED", (Version("0.1"), Version("0.2")))
    with hydra_compat.errors_reported_by(wrap) as applied:
        assert not applied and hydra_utils.run_and_report is original


def test_hydras_command_line_parser_knows_its_flags_and_the_overrides() -> None:
    from my_project.machinery import hydra_compat

    args = hydra_compat.args_parser().parse_args(["--config-dir=/x", "-m", "a=1", "b=2"])
    assert (args.config_dir, args.multirun, args.overrides) == ("/x", True, ["a=1", "b=2"])
