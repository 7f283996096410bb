"""Plots a person would rather look at than read: learning curves and a confusion matrix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_learning_curves(history: Sequence[Mapping[str, float]], path: str | Path) -> Path:
    """Loss and accuracy per epoch, train against validation, best validation epoch marked."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for ax, metric, title in ((axes[0], "loss", "Loss"), (axes[1], "acc", "Accuracy")):
        for stage, style in (("train", "-o"), ("val", "-s")):
            points = [
                (row["epoch"], row[f"{stage}/{metric}"])
                for row in history
                if f"{stage}/{metric}" in row
            ]
            if points:
                epochs, values = zip(*points, strict=True)
                ax.plot(np.array(epochs) + 1, values, style, markersize=3, label=stage)
        ax.set(title=title, xlabel="epoch")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend()
    val_acc = [(row["epoch"], row["val/acc"]) for row in history if "val/acc" in row]
    if val_acc:
        best_epoch, best = max(val_acc, key=lambda point: point[1])
        axes[1].axvline(best_epoch + 1, color="grey", linestyle=":", linewidth=1)
        axes[1].annotate(
            f"best val {best:.3f}\n(epoch {best_epoch + 1})",
            (best_epoch + 1, best),
            textcoords="offset points",
            xytext=(-10, -30),
            ha="right",
            fontsize=9,
        )
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


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
    fig, ax = plt.subplots(figsize=(1.0 + 0.55 * n, 0.8 + 0.5 * n), constrained_layout=True)
    image = ax.imshow(rates, cmap="Blues", vmin=0, vmax=1)
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
    ax.set(
        xticks=range(n),
        yticks=range(n),
        xticklabels=names,
        yticklabels=names,
        xlabel="predicted",
        ylabel="true",
        title=f"Test confusion matrix (accuracy {accuracy:.3f})",
    )
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="fraction of true class")
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
