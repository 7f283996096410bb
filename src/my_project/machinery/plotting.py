"""Plots a person would rather look at than read, for any task: learning curves (a panel per
metric, a line per stage), the test confusion matrix (classification), predicted against true
values (regression; scikit-learn draws these two). ``val/acc``, ``val_acc``, ``valid_acc`` and
``val_acc_epoch`` all are the ``acc`` of stage ``val``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

_STAGE = re.compile(r"^(train|training|val|valid|validation|test)(?:/|_)(.+)$")
_STAGE_NAMES = {"training": "train", "valid": "val", "validation": "val"}


def split_metric_name(name: str) -> tuple[str, str] | None:
    """``("val", "acc")`` for ``val/acc`` or ``val_acc_epoch``; None without a stage, or for a
    per-step value (``..._step``)."""
    found = None if name.endswith("_step") else _STAGE.match(name.removesuffix("_epoch"))
    return (_STAGE_NAMES.get(found[1], found[1]), found[2]) if found else None


def _figure(*args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, *plt.subplots(*args, constrained_layout=True, **kwargs)


def _save(plt: Any, fig: Any, path: str | Path) -> Path:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_learning_curves(history: Sequence[Mapping[str, float]], path: str | Path) -> Path | None:
    """One panel per metric, train against val per epoch (numbered from 0, as the checkpoints'
    names). None when no epoch-level train or val metric was logged."""
    panels: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for row in history:
        for key, value in row.items():
            parts = split_metric_name(key)
            if parts and parts[0] != "test" and not parts[1].endswith("_best"):
                points = panels.setdefault(parts[1], {}).setdefault(parts[0], [])
                points.append((int(row["epoch"]), float(value)))
    if not panels:
        return None
    names = sorted(panels, key=lambda n: (n != "loss", n))  # the loss first
    columns = min(len(names), 3)
    rows = math.ceil(len(names) / columns)
    plt, fig, axes = _figure(rows, columns, figsize=(5.2 * columns, 4.0 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        for stage, points in sorted(panels[name].items()):  # train, then val
            ax.plot(*zip(*sorted(points), strict=True), "-o", markersize=3, label=stage)
        ax.set(title=name, xlabel="epoch")
        ax.xaxis.get_major_locator().set_params(integer=True, min_n_ticks=1)  # whole epochs
        ax.grid(alpha=0.3)
        ax.legend()
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    return _save(plt, fig, path)


def plot_confusion_matrix(
    true: np.ndarray, predicted: np.ndarray, count: int, path: Path, where: str = ""
) -> Path:
    """Counts of each true class (rows) predicted as each class; the diagonal is what is right.
    ``where``: which test loader (``, loader 1``)."""
    from sklearn.metrics import ConfusionMatrixDisplay

    # At least as wide as the title, for a handful of classes too.
    plt, fig, ax = _figure(figsize=(max(4.8, 1.0 + 0.55 * count), max(3.8, 0.8 + 0.5 * count)))
    ConfusionMatrixDisplay.from_predictions(
        true, predicted, labels=range(count), ax=ax, cmap="Blues", include_values=count <= 30
    )
    ax.set_title(f"Test confusion matrix{where} (accuracy {np.mean(true == predicted):.3f})")
    return _save(plt, fig, path)


def plot_predicted_vs_true(
    predicted: np.ndarray, true: np.ndarray, path: Path, where: str = ""
) -> Path:
    """Each test sample as a point; on the diagonal, the prediction is right. R² and RMSE.
    ``where``: which test loader."""
    from sklearn.metrics import PredictionErrorDisplay, r2_score

    rmse = math.sqrt(np.mean((true - predicted) ** 2))
    plt, fig, ax = _figure(figsize=(5.2, 5.0))
    PredictionErrorDisplay.from_predictions(true, predicted, kind="actual_vs_predicted", ax=ax)
    title = f"Test set{where}: R² {r2_score(true, predicted):.3f}, RMSE {rmse:.3g} ({len(true)} samples)"
    ax.set_title(title)
    return _save(plt, fig, path)
