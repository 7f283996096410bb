"""Every option of the machinery's config groups composes and resolves (Hydra compose API),
on a team's own module and data (the team's own groups: tests/project/test_configs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from my_project.machinery.preflight.values import check_config_types

from .helpers import CONFIG_DIR, DOCS_STYLE, DOCS_STYLE_EVAL, compose_config

# The machinery's groups (the team's are data, model, experiment, hparams_search).
MACHINERY_GROUPS = ("trainer", "callbacks", "logger", "paths", "debug")
GROUPS = sorted(
    str(path.parent.relative_to(CONFIG_DIR)) + "=" + path.stem
    for path in CONFIG_DIR.rglob("*.yaml")
    if path.parent != CONFIG_DIR and path.parent.name in MACHINERY_GROUPS
)


def test_every_machinery_group_has_options() -> None:
    assert {option.split("=")[0] for option in GROUPS} == set(MACHINERY_GROUPS)


@pytest.mark.parametrize("override", GROUPS)
def test_group_option_composes_and_resolves(override: str, tmp_path: Path) -> None:
    # Sub-configs of callbacks/logger are also selectable one at a time.
    cfg = compose_config([*DOCS_STYLE, override], tmp_path)
    container = OmegaConf.to_container(cfg, resolve=True)
    assert container["paths"]["output_dir"] == str(tmp_path)
    assert "_target_" in container["trainer"]
    check_config_types(cfg)  # every value matches its target's annotation


def test_eval_config_requires_a_checkpoint(tmp_path: Path) -> None:
    cfg = compose_config(DOCS_STYLE_EVAL, tmp_path, config_name="eval")
    assert OmegaConf.is_missing(cfg, "ckpt_path")


def test_trainer_arguments_are_overridable(tmp_path: Path) -> None:
    # The defaults themselves are a generation-time choice (cookiecutter.json); the keys are not.
    trainer = compose_config(DOCS_STYLE, tmp_path).trainer
    assert {"accelerator", "devices", "strategy", "precision", "max_epochs"} <= set(trainer)
    cfg = compose_config(
        [*DOCS_STYLE, "trainer.devices=2", "trainer.precision=bf16-mixed", "trainer.max_epochs=3"],
        tmp_path,
    )
    assert (cfg.trainer.devices, cfg.trainer.precision, cfg.trainer.max_epochs) == (
        2,
        "bf16-mixed",
        3,
    )


@pytest.mark.parametrize(
    ("overrides", "profiler"),
    [
        ([], "PassThroughProfiler"),
        (["debug=profiler"], "SimpleProfiler"),
        (["++trainer.profiler=advanced"], "AdvancedProfiler"),  # what train.py makes of it
    ],
)
def test_trainer_profiles_nothing_by_default_and_profiles_on_request(
    tmp_path: Path, overrides: list[str], profiler: str
) -> None:
    from hydra.utils import instantiate

    cfg = compose_config([*DOCS_STYLE, *overrides], tmp_path)
    trainer = instantiate(cfg.trainer, logger=False, enable_progress_bar=False)
    assert type(trainer.profiler).__name__ == profiler


def test_printed_config_tree_keeps_long_values_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Printed to a file or pipe (SLURM logs, CI), a long run directory was cut at 80 columns."""
    from my_project.machinery.config import print_config_tree

    long_dir = "/runs/" + "x" * 150 + "/END"
    config = {"paths": {"output_dir": long_dir}, "trainer": {"devices": 1}}
    print_config_tree(config)
    print_config_tree(config, save_to=tmp_path / "tree.log")
    for shown in (capsys.readouterr().out, (tmp_path / "tree.log").read_text()):
        assert shown.count("x") == 150 and "/END" in shown
