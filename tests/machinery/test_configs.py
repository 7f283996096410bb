"""Every option of every config group composes and resolves (Hydra compose API)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from my_project.machinery.preflight.values import check_config_types

from .helpers import CONFIG_DIR, compose_config

# Groups a user picks from on the command line; `hydra` is Hydra's own.
GROUPS = sorted(
    str(path.parent.relative_to(CONFIG_DIR)) + "=" + path.stem
    for path in CONFIG_DIR.rglob("*.yaml")
    if path.parent != CONFIG_DIR and path.parent.name != "hydra"
)
GLOBAL_GROUPS = ("experiment", "debug")


def test_every_group_has_options() -> None:
    groups = {option.split("=")[0] for option in GROUPS}
    assert {
        "data",
        "model",
        "model/net",
        "trainer",
        "logger",
        "callbacks",
        "paths",
        "debug",
        "experiment",
    } <= groups


@pytest.mark.parametrize("override", GROUPS)
def test_group_option_composes_and_resolves(override: str, tmp_path: Path) -> None:
    group = override.split("=")[0]
    # Sub-configs of callbacks/logger are also selectable one at a time.
    cfg = compose_config([override], tmp_path)
    container = OmegaConf.to_container(cfg, resolve=True)
    assert container["paths"]["output_dir"] == str(tmp_path)
    if group in ("data", "trainer", "model"):
        assert "_target_" in container[group]
    check_config_types(cfg)  # every value matches its target's annotation


def test_eval_config_requires_a_checkpoint(tmp_path: Path) -> None:
    cfg = compose_config([], tmp_path, config_name="eval")
    assert OmegaConf.is_missing(cfg, "ckpt_path")


def test_trainer_arguments_are_overridable(tmp_path: Path) -> None:
    # The defaults themselves are a generation-time choice (cookiecutter.json); the keys are not.
    trainer = compose_config([], tmp_path).trainer
    assert {"accelerator", "devices", "strategy", "precision", "max_epochs"} <= set(trainer)
    cfg = compose_config(
        ["trainer.devices=2", "trainer.precision=bf16-mixed", "trainer.max_epochs=3"], tmp_path
    )
    assert (cfg.trainer.devices, cfg.trainer.precision, cfg.trainer.max_epochs) == (
        2,
        "bf16-mixed",
        3,
    )


@pytest.mark.parametrize(
    ("overrides", "profiler"),
    [
        ([], "NullProfiler"),
        (["debug=profiler"], "SimpleProfiler"),
        (["trainer.profiler=advanced"], "AdvancedProfiler"),
    ],
)
def test_trainer_profiles_nothing_by_default_and_profiles_on_request(
    tmp_path: Path, overrides: list[str], profiler: str
) -> None:
    from hydra.utils import instantiate

    cfg = compose_config(["trainer.accelerator=cpu", *overrides], tmp_path)
    trainer = instantiate(cfg.trainer, logger=False, enable_progress_bar=False)
    assert type(trainer.profiler).__name__ == profiler
