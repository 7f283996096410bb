"""Plots a person would rather look at than read, for any task.

- learning curves: every metric logged once per epoch, one panel per metric, a line per stage
  (train, val; one per loader with several validation loaders), the best epoch of the
  monitored metric marked;
- classification: the test confusion matrix;
- regression: predicted against true values of the test set.

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

STAGES = ("train", "val", "test")
_STAGE = re.compile(r"^(train|training|val|valid|validation|test)(?:/|_)(.+)$")
_STAGE_NAMES = {"training": "train", "valid": "val", "validation": "val"}


def split_metric_name(name: str) -> tuple[str, str] | None:
    """``("val", "acc")`` for ``val/acc`` or ``val_acc_epoch``; None without a stage, or for a
    per-step value (``..._step``)."""
    if name.endswith("_step"):
        return None
    found = _STAGE.match(name.removesuffix("_epoch"))
    if not found:
        return None
    return _STAGE_NAMES.get(found.group(1), found.group(1)), found.group(2)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_learning_curves(
    history: Sequence[Mapping[str, float]],
    path: str | Path,
    monitor: str | None = None,
    mode: str = "max",
) -> Path | None:
    """One panel per metric, train against val per epoch; ``monitor``'s best epoch marked.

    Returns None when no epoch-level train or val metric was logged.
    """
    panels: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for row in history:
        for key, value in row.items():
            where = _panel_and_line(key)
            if where is None:
                continue
            panel, line = where
            panels.setdefault(panel, {}).setdefault(line, []).append(
                (int(row["epoch"]), float(value))
            )
    if not panels:
        return None
    plt = _pyplot()
    names = sorted(panels, key=lambda n: (n != "loss", n))  # the loss first
    columns = min(len(names), 3)
    rows = math.ceil(len(names) / columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(5.2 * columns, 4.0 * rows), squeeze=False, constrained_layout=True
    )
    monitored = _panel_and_line(monitor) if monitor else None
    # Epochs as Lightning numbers them (from 0): as in the progress bar, metrics.csv and the
    # checkpoints' names (`epoch_007.ckpt`).
    for ax, name in zip(axes.flat, names, strict=False):
        for line in sorted(panels[name], key=lambda label: (label.split()[0] != "train", label)):
            epochs, values = zip(*sorted(panels[name][line]), strict=True)
            style = "-o" if line.startswith("train") else "-s"
            ax.plot(epochs, values, style, markersize=3, label=line)
        if monitored is not None and monitored[0] == name and panels[name].get(monitored[1]):
            _mark_best(ax, panels[name][monitored[1]], mode, monitored[1])
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


def _panel_and_line(key: str) -> tuple[str, str] | None:
    """``("loss", "train")`` for ``train_loss``; ``("acc", "val 1")`` for
    ``val_acc/dataloader_idx_1``; None for what is not a train or val metric of an epoch."""
    parts = split_metric_name(key)
    if parts is None or parts[0] == "test" or parts[1].endswith("_best"):
        return None
    stage, name = parts
    loader = _LOADER.search(name)
    if loader:
        return name[: loader.start()], f"{stage} {loader[1]}"
    return name, stage


_LOADER = re.compile(r"/dataloader_idx_(\d+)$")


def _mark_best(ax: Any, points: list[tuple[int, float]], mode: str, stage: str) -> None:
    pick = max if mode == "max" else min
    epoch, best = pick(points, key=lambda point: point[1])
    ax.axvline(epoch, color="grey", linestyle=":", linewidth=1)
    # The label on the side of the line, and of the point, with more room.
    left = epoch > max(e for e, _ in points) / 2
    low, high = ax.get_ylim()
    below = best > (low + high) / 2
    ax.annotate(
        f"best {stage} {best:.3g}\n(epoch {epoch})",
        (epoch, best),
        textcoords="offset points",
        xytext=(-10 if left else 10, -30 if below else 20),
        ha="right" if left else "left",
        fontsize=9,
    )


def plot_confusion_matrix(
    matrix: np.ndarray, path: str | Path, class_names: Sequence[str] | None = None
) -> Path:
    """Row-normalised confusion matrix with counts in each cell; the diagonal is what is right."""
    plt = _pyplot()
    matrix = np.asarray(matrix)
    n = matrix.shape[0]
    names = list(class_names) if class_names is not None else [str(i) for i in range(n)]
    totals = matrix.sum(axis=1, keepdims=True)
    rates = np.divide(matrix, totals, out=np.zeros_like(matrix, dtype=float), where=totals > 0)
    accuracy = np.trace(matrix) / max(matrix.sum(), 1)
    # At least as wide as the title, for a handful of classes too.
    size = (max(4.8, 1.0 + 0.55 * n), max(3.8, 0.8 + 0.5 * n))
    fig, ax = plt.subplots(figsize=size, constrained_layout=True)
    image = ax.imshow(rates, cmap="Blues", vmin=0, vmax=1)
    if n <= 30:  # beyond that the counts are unreadable
        for i in range(n):
            for j in range(n):
                if matrix[i, j]:
                    ax.text(
                        j,
                        i,
                        str(int(matrix[i, j])),
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white" if rates[i, j] > 0.5 else "black",
                    )
    ticks = range(n) if n <= 30 else []
    ax.set(
        xticks=ticks,
        yticks=ticks,
        xticklabels=names if n <= 30 else [],
        yticklabels=names if n <= 30 else [],
        xlabel="predicted",
        ylabel="true",
        title=f"Test confusion matrix (accuracy {accuracy:.3f})",
    )
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="fraction of true class")
    return _save(plt, fig, path)


def confusion_matrix(predicted: np.ndarray, true: np.ndarray, num_classes: int) -> np.ndarray:
    """Counts of (true, predicted) pairs, rows by true class."""
    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(matrix, (true.astype(np.int64), predicted.astype(np.int64)), 1)
    return matrix


def plot_predicted_vs_true(predicted: np.ndarray, true: np.ndarray, path: str | Path) -> Path:
    """Each test sample as a point; on the diagonal, the prediction is right. R² and RMSE."""
    plt = _pyplot()
    predicted, true = np.ravel(predicted).astype(float), np.ravel(true).astype(float)
    residual = float(np.sum((true - predicted) ** 2))
    total = float(np.sum((true - true.mean()) ** 2))
    r2 = 1 - residual / total if total > 0 else float("nan")
    rmse = math.sqrt(residual / max(len(true), 1))
    fig, ax = plt.subplots(figsize=(5.2, 5.0), constrained_layout=True)
    ax.scatter(true, predicted, s=12, alpha=0.6)
    low, high = float(min(true.min(), predicted.min())), float(max(true.max(), predicted.max()))
    ax.plot([low, high], [low, high], color="grey", linestyle=":", linewidth=1)
    ax.set(
        xlabel="true",
        ylabel="predicted",
        title=f"Test set: R² {r2:.3f}, RMSE {rmse:.3g} ({len(true)} samples)",
    )
    ax.grid(alpha=0.3)
    return _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: str | Path) -> Path:
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
