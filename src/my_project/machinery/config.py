"""Where the Hydra configs are, and how a composed config and a path are shown.

Only omegaconf and rich are imported here: entry points use this before torch is needed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def config_dir() -> Path:
    """The `configs/` folder: inside the installed package (a wheel carries them, see
    pyproject.toml), else at the root of the checkout (an editable install, users edit it)."""
    for candidate in (PACKAGE_DIR / "configs", PACKAGE_DIR.parents[1] / "configs"):
        if (candidate / "train.yaml").is_file():
            return candidate
    raise FileNotFoundError(
        f"No Hydra configs found next to {PACKAGE_DIR} or at the checkout root; reinstall the "
        "package (`pip install .`) or run from the repository checkout."
    )


def shown_path(path: str | Path) -> str:
    """``path`` as a command typed here takes it: relative to the current directory when it is
    below it (`logs/train/runs/...`), else absolute."""
    absolute = Path(path).absolute()
    with_cwd = Path.cwd() in absolute.parents
    return str(absolute.relative_to(Path.cwd()) if with_cwd else absolute).replace(os.sep, "/")


def print_config_tree(
    config: Mapping[str, Any],
    order: Sequence[str] = ("data", "model", "trainer", "callbacks", "logger", "paths"),
    save_to: str | Path | None = None,
) -> None:
    """Print a resolved config (secrets masked) as a Rich tree, one branch per group, groups in
    ``order`` first; ``save_to``: to that file instead, without colours."""
    import rich.syntax
    import rich.tree
    from rich.console import Console

    tree = rich.tree.Tree("CONFIG", style="bold", guide_style="dim")
    for name in [f for f in order if f in config] + [f for f in config if f not in order]:
        value = config[name]
        text = OmegaConf.to_yaml(value) if isinstance(value, Mapping) else str(value)
        tree.add(str(name), style="bold cyan", guide_style="dim").add(  # long values wrap
            rich.syntax.Syntax(
                text.rstrip(), "yaml", theme="ansi_dark", background_color="default", word_wrap=True
            )
        )
    if save_to is not None:
        with open(save_to, "w") as handle:
            Console(file=handle, width=120, color_system=None).print(tree)
        return
    console = Console()  # a log file (SLURM, CI, `> out.txt`): as wide as the saved one
    (console if console.is_terminal else Console(width=120)).print(tree)
