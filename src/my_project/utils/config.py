"""Where the Hydra configs are, and how a composed config is shown.

Only omegaconf and rich are imported here: entry points use this before torch is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def config_dir() -> Path:
    """The `configs/` folder: inside the installed package, else at the root of the checkout.

    A wheel carries the configs as ``<package>/configs`` (see pyproject.toml); an editable
    install or a plain checkout reads the root ``configs/`` that users edit.
    """
    for candidate in (PACKAGE_DIR / "configs", PACKAGE_DIR.parents[1] / "configs"):
        if (candidate / "train.yaml").is_file():
            return candidate
    raise FileNotFoundError(
        f"No Hydra configs found next to {PACKAGE_DIR} or at the checkout root; reinstall the "
        "package (`pip install .`) or run from the repository checkout."
    )


def print_config_tree(
    cfg: DictConfig,
    order: Sequence[str] = ("data", "model", "trainer", "callbacks", "logger", "paths"),
    resolve: bool = True,
    save_to: str | Path | None = None,
) -> None:
    """Print the composed config as a Rich tree, one branch per group, groups in ``order`` first.

    Secrets (keys like ``api_key``, values of secret environment variables) show as ``***``.
    """
    import rich
    import rich.syntax
    import rich.tree

    from ..reliability.secrets import mask_secrets

    cfg = OmegaConf.create(mask_secrets(OmegaConf.to_container(cfg, resolve=resolve)))

    tree = rich.tree.Tree("CONFIG", style="bold", guide_style="dim")
    fields = [f for f in order if f in cfg] + [f for f in cfg if f not in order]
    for field in fields:
        branch = tree.add(str(field), style="bold cyan", guide_style="dim")
        value = cfg[field]
        text = (
            OmegaConf.to_yaml(value, resolve=resolve)
            if isinstance(value, DictConfig)
            else str(value)
        )
        branch.add(
            rich.syntax.Syntax(text.rstrip(), "yaml", theme="ansi_dark", background_color="default")
        )
    rich.print(tree)
    if save_to is not None:
        from rich.console import Console

        with open(save_to, "w") as handle:
            Console(file=handle, width=120, color_system=None).print(tree)
