"""Where the Hydra configs are, and how a composed config and a path are shown (no torch)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def config_dir() -> Path:
    """The `configs/` folder: in the installed package (a wheel), else at the checkout's root."""
    for candidate in (PACKAGE_DIR / "configs", PACKAGE_DIR.parents[1] / "configs"):
        if (candidate / "train.yaml").is_file():
            return candidate
    raise FileNotFoundError(
        f"No Hydra configs found next to {PACKAGE_DIR} or at the checkout root; reinstall the "
        "package (`pip install .`) or run from the repository checkout."
    )


def shown_path(path: str | Path) -> str:
    """``path`` relative to the current directory when it is below it, else absolute."""
    absolute = Path(path).absolute()
    with_cwd = Path.cwd() in absolute.parents
    return str(absolute.relative_to(Path.cwd()) if with_cwd else absolute).replace(os.sep, "/")


_ORDER = ("data", "model", "trainer", "callbacks", "logger", "paths")


def print_config_tree(config: Mapping[str, Any], save_to: str | Path | None = None) -> None:
    """Print a resolved config (secrets masked) as a Rich tree, one branch per group; ``save_to``:
    to that file instead, without colours."""
    import rich.syntax
    import rich.tree
    from rich.console import Console

    tree = rich.tree.Tree("CONFIG", style="bold", guide_style="dim")
    for name in [f for f in _ORDER if f in config] + [f for f in config if f not in _ORDER]:
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
