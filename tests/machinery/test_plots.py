"""The plots a run leaves are readable whatever the task's size."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from my_project.machinery import plotting


@pytest.mark.parametrize("num_classes", [2, 3, 4, 10, 40])
def test_confusion_matrix_title_fits_the_figure(
    num_classes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team's three-class task once got a title cut at both ends ("onfusion matrix (acc")."""
    drawn: list[Any] = []

    def keep(plt: Any, fig: Any, path: str | Path) -> Path:
        fig.canvas.draw()
        drawn.append(fig)
        return Path(path)

    monkeypatch.setattr(plotting, "_save", keep)
    true = np.random.default_rng(0).integers(0, num_classes, 500)
    plotting.plot_confusion_matrix(true, true, num_classes, tmp_path / "cm.png")
    fig = drawn[0]
    title = fig.axes[0].title
    assert title.get_text() == "Test confusion matrix (accuracy 1.000)"
    box, page = title.get_window_extent(), fig.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1, (box, page)
    assert page.y0 <= box.y0 and box.y1 <= page.y1, (box, page)


@pytest.mark.parametrize("epochs", [1, 3, 40])
def test_learning_curves_number_epochs_as_the_checkpoints_do(
    epochs: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From 0, as `epoch_000.ckpt` and the progress bar; whole-epoch ticks, even for one; the
    loss first, a line per stage."""
    drawn: list[Any] = []
    monkeypatch.setattr(plotting, "_save", lambda plt, fig, path: drawn.append(fig) or path)
    history = [
        {"epoch": e, "train/loss": 1.0 / (e + 1), "val/loss": 1.2 / (e + 1), "val/acc": e / epochs}
        for e in range(epochs)
    ]
    plotting.plot_learning_curves(history, tmp_path / "curves.png")
    loss, acc = drawn[0].axes[:2]
    assert loss.get_title() == "loss" and acc.get_title() == "acc"
    ticks = loss.get_xticks()
    low, high = loss.get_xlim()
    shown = [t for t in ticks if low <= t <= high]
    assert shown and all(float(t).is_integer() for t in shown), shown
    assert [line.get_label() for line in loss.lines] == ["train", "val"]
    (val,) = acc.lines
    assert list(val.get_xdata()) == list(range(epochs))  # epochs from 0


def test_a_test_set_that_cannot_be_plotted_is_said_once_by_rank_0(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every DDP process finds the batches are not (inputs, targets): rank 0 alone says so."""
    from types import SimpleNamespace

    from my_project.machinery.callbacks.plots import PlotCallback

    said = []
    for rank in (0, 1):
        plots = PlotCallback(str(tmp_path))
        trainer = SimpleNamespace(is_global_zero=rank == 0)
        with caplog.at_level(logging.INFO, logger=PlotCallback.__module__):
            plots.on_test_batch_end(trainer, None, None, {"x": 1}, 0)  # type: ignore[arg-type]
        said.append([r.getMessage() for r in caplog.records])
        caplog.clear()
    why = "TypeError: test batches are not (inputs, targets, ...)"
    assert said == [[f"Plots: no test-set plot ({why})."], []]
