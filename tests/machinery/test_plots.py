"""The plots a run leaves are readable whatever the task's size."""

from __future__ import annotations

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
    rng = np.random.default_rng(0)
    true = rng.integers(0, num_classes, 500)
    matrix = plotting.confusion_matrix(true, true, num_classes)
    plotting.plot_confusion_matrix(matrix, tmp_path / "cm.png")
    fig = drawn[0]
    title = fig.axes[0].title
    assert title.get_text() == "Test confusion matrix (accuracy 1.000)"
    box, page = title.get_window_extent(), fig.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1, (box, page)
    assert page.y0 <= box.y0 and box.y1 <= page.y1, (box, page)
