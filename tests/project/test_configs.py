"""Every option of the team's config groups (data, model, experiment, hparams_search)
composes, resolves and matches the annotations of the classes it builds. An example's option is
composed with the example it belongs to; a team's own model or data option is checked by its
own values (in the project's defaults: which model goes with which data is for its experiments
to say, and they are checked whole)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from my_project.machinery.preflight.values import check_config_types

from ..machinery.helpers import CONFIG_DIR, compose_config
from .example import CLASSIFIER

TEAM_GROUPS = ("data", "model", "experiment", "hparams_search")
GROUPS = sorted(
    str(path.parent.relative_to(CONFIG_DIR)) + "=" + path.stem
    for path in CONFIG_DIR.rglob("*.yaml")
    if path.parent != CONFIG_DIR and path.relative_to(CONFIG_DIR).parts[0] in TEAM_GROUPS
)
# What an example's data or network is composed with (its experiments and search name theirs).
WITH_ITS_EXAMPLE = {
    "data=diabetes": ["model=regressor"],
    "model=regressor": ["data=diabetes"],
    "data=digits": ["model=classifier"],
    "data=mnist": ["model=classifier"],
    "data=synthetic": ["model=classifier"],
    "model=classifier": ["data=digits"],
    "model/net=cnn": CLASSIFIER,
    "model/net=mlp": CLASSIFIER,
}


@pytest.mark.parametrize("override", GROUPS)
def test_group_option_composes_and_resolves(override: str, tmp_path: Path) -> None:
    cfg = compose_config([*WITH_ITS_EXAMPLE.get(override, []), override], tmp_path)
    group = override.split("/", 1)[0].split("=", 1)[0]
    if group in ("data", "model") and override not in WITH_ITS_EXAMPLE:  # a team's own
        own = OmegaConf.to_container(cfg[group], resolve=True)
        assert isinstance(own, dict) and "_target_" in own
        cfg = OmegaConf.create({group: own})
    else:
        container = OmegaConf.to_container(cfg, resolve=True)
        assert "_target_" in container["data"] and "_target_" in container["model"]
    check_config_types(cfg)  # every value matches its target's annotation
