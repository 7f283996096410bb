"""A search config that names its own model and data, run with an experiment that names others:
Hydra lets the search's `override` win, so the search would tune a model nobody asked for. The
sweeper refuses it before any trial (the paragraph composed here; a whole refused command is
in the bad-input table of the project's tests)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from hydra_plugins.my_project_optuna.pinned_groups import overridden_choices

from .helpers import CONFIG_DIR, MACHINERY_CONFIGS

# A team's search config that names its model and data, as configs/hparams_search/mlp.yaml does.
PINNED = """\
# @package _global_
defaults:
  - override /data: lht_style
  - override /model: lht_style
  - override /hydra/sweeper: optuna
optimized_metric: val/acc_best
hydra:
  mode: MULTIRUN
  sweeper:
    params:
      model.optimizer.lr: interval(0.0001, 0.1)
"""
# The same without them: it searches whatever model the run has.
UNPINNED = PINNED.replace("  - override /data: lht_style\n  - override /model: lht_style\n", "")


def refusal(tmp_path: Path, search: str, *overrides: str) -> str | None:
    """The sweeper's paragraph for `python train.py -m hparams_search=<search config> ...`."""
    folder = tmp_path / "configs" / "hparams_search"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "team.yaml").write_text(search)
    paths = f"hydra.searchpath=['file://{tmp_path / 'configs'}','file://{MACHINERY_CONFIGS}']"
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("train", [paths, "hparams_search=team", *overrides], return_hydra_config=True)
        return overridden_choices(cfg, GlobalHydra.instance().config_loader())


def test_a_search_naming_other_groups_than_the_experiment_is_refused_naming_both(
    tmp_path: Path,
) -> None:
    message = refusal(tmp_path, PINNED, "experiment=docs_style")
    assert message is not None
    assert message.startswith(
        "hparams_search=team names its own model and data (configs/hparams_search/team.yaml: "
        "`override /data: lht_style`, `override /model: lht_style`), and they win over "
        "experiment=docs_style's (model=docs_style, data=docs_style): this search would tune "
        "data=lht_style, model=lht_style, not experiment=docs_style."
    )
    assert "copy configs/hparams_search/team.yaml to configs/hparams_search/<name>.yaml" in message
    assert "`python train.py -m hparams_search=<name> experiment=docs_style`" in message


@pytest.mark.parametrize(
    ("search", "overrides"),
    [
        pytest.param(PINNED, ["experiment=lht_style"], id="the experiment picks the same"),
        pytest.param(PINNED, [], id="no experiment"),
        pytest.param(
            PINNED,
            ["experiment=docs_style", "model=docs_style", "data=lht_style"],
            id="the command line picks the groups",
        ),
        pytest.param(UNPINNED, ["experiment=docs_style"], id="a search naming no groups"),
    ],
)
def test_a_search_whose_groups_stand_is_not_refused(
    tmp_path: Path, search: str, overrides: list[str]
) -> None:
    assert refusal(tmp_path, search, *overrides) is None
