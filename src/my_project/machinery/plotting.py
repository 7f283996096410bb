"""Plots a person would rather look at than read, for any task.

- learning curves: every metric logged once per epoch, one panel per metric, a line per stage
  (train, val; one per loader with several validation loaders), the best epoch of the
  monitored metric marked;
- classification: the test confusion matrix; regression: predicted against true values.

Metric names are split into stage and metric the common ways: ``val/acc``, ``val_acc``,
``valid_acc``, ``val_acc_epoch`` all are the ``acc`` of stage ``val``.
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
_LOADER = re.compile(r"/dataloader_idx_(\d+)$")


def split_metric_name(name: str) -> tuple[str, str] | None:
    """``("val", "acc")`` for ``val/acc`` or ``val_acc_epoch``; None without a stage, or for a
    per-step value (``..._step``)."""
    found = None if name.endswith("_step") else _STAGE.match(name.removesuffix("_epoch"))
    return (_STAGE_NAMES.get(found[1], found[1]), found[2]) if found else None


def _panel_and_line(key: str) -> tuple[str, str] | None:
    """``("loss", "train")`` for ``train_loss``; ``("acc", "val 1")`` for
    ``val_acc/dataloader_idx_1``; None for what is not a train or val metric of an epoch."""
    parts = split_metric_name(key)
    if parts is None or parts[0] == "test" or parts[1].endswith("_best"):
        return None
    loader = _LOADER.search(parts[1])
    return (parts[1][: loader.start()], f"{parts[0]} {loader[1]}") if loader else parts[::-1]


def _figure(*args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, *plt.subplots(*args, constrained_layout=True, **kwargs)


def _save(plt: Any, fig: Any, path: str | Path) -> Path:
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_learning_curves(
    history: Sequence[Mapping[str, float]], path: str | Path, monitor: str | None, mode: str
) -> Path | None:
    """One panel per metric, train against val per epoch (numbered from 0, as the progress bar
    and the checkpoints' names); ``monitor``'s best epoch marked. None when no epoch-level
    train or val metric was logged."""
    panels: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for row in history:
        for key, value in row.items():
            if (where := _panel_and_line(key)) is not None:
                points = panels.setdefault(where[0], {}).setdefault(where[1], [])
                points.append((int(row["epoch"]), float(value)))
    if not panels:
        return None
    names = sorted(panels, key=lambda n: (n != "loss", n))  # the loss first
    columns = min(len(names), 3)
    rows = math.ceil(len(names) / columns)
    plt, fig, axes = _figure(rows, columns, figsize=(5.2 * columns, 4.0 * rows), squeeze=False)
    monitored = _panel_and_line(monitor) if monitor else None
    for ax, name in zip(axes.flat, names, strict=False):
        for line in sorted(panels[name], key=lambda label: (label.split()[0] != "train", label)):
            epochs, values = zip(*sorted(panels[name][line]), strict=True)
            style = "-o" if line.startswith("train") else "-s"
            ax.plot(epochs, values, style, markersize=3, label=line)
        if monitored is not None and monitored[0] == name and panels[name].get(monitored[1]):
            points = panels[name][monitored[1]]
            epoch, best = (max if mode == "max" else min)(points, key=lambda point: point[1])
            label = f"best {monitored[1]} {best:.3g} (epoch {epoch})"
            ax.axvline(epoch, color="grey", linestyle=":", linewidth=1, label=label)
        ax.set(title=name, xlabel="epoch")
        seen = sorted({epoch for points in panels[name].values() for epoch, _ in points})
        if len(seen) <= 12:  # few epochs: a tick on each (one epoch got ticks 0.96 ... 1.04)
            ax.set_xticks(seen)
            ax.set_xlim(seen[0] - 0.5, seen[-1] + 0.5)
        else:
            ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend()
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    return _save(plt, fig, path)


def plot_confusion_matrix(matrix: np.ndarray, path: str | Path, where: str = "") -> Path:
    """Row-normalised confusion matrix with counts in each cell; the diagonal is what is
    right. ``where``: which test loader (``, loader 1``)."""
    matrix = np.asarray(matrix)
    n = matrix.shape[0]
    totals = matrix.sum(axis=1, keepdims=True)
    rates = np.divide(matrix, totals, out=np.zeros_like(matrix, dtype=float), where=totals > 0)
    accuracy = np.trace(matrix) / max(matrix.sum(), 1)
    # At least as wide as the title, for a handful of classes too.
    plt, fig, ax = _figure(figsize=(max(4.8, 1.0 + 0.55 * n), max(3.8, 0.8 + 0.5 * n)))
    image = ax.imshow(rates, cmap="Blues", vmin=0, vmax=1)
    ticks = range(n) if n <= 30 else []  # beyond that, counts and ticks are unreadable
    for i, j in zip(*np.nonzero(matrix), strict=True) if ticks else []:
        color = "white" if rates[i, j] > 0.5 else "black"
        ax.text(j, i, str(int(matrix[i, j])), ha="center", va="center", fontsize=8, color=color)
    ax.set(xticks=ticks, yticks=ticks, xlabel="predicted", ylabel="true")
    ax.set_title(f"Test confusion matrix{where} (accuracy {accuracy:.3f})")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="fraction of true class")
    return _save(plt, fig, path)


def plot_predicted_vs_true(
    predicted: np.ndarray, true: np.ndarray, path: str | Path, where: str = ""
) -> Path:
    """Each test sample as a point; on the diagonal, the prediction is right. R² and RMSE."""
    predicted, true = np.ravel(predicted).astype(float), np.ravel(true).astype(float)
    residual = float(np.sum((true - predicted) ** 2))
    total = float(np.sum((true - true.mean()) ** 2))
    r2 = 1 - residual / total if total > 0 else float("nan")
    rmse = math.sqrt(residual / max(len(true), 1))
    plt, fig, ax = _figure(figsize=(5.2, 5.0))
    ax.scatter(true, predicted, s=12, alpha=0.6)
    low, high = float(min(true.min(), predicted.min())), float(max(true.max(), predicted.max()))
    ax.plot([low, high], [low, high], color="grey", linestyle=":", linewidth=1)
    title = f"Test set{where}: R² {r2:.3f}, RMSE {rmse:.3g} ({len(true)} samples)"
    ax.set(xlabel="true", ylabel="predicted", title=title)
    ax.grid(alpha=0.3)
    return _save(plt, fig, path)
