"""Every option of the team's config groups (data, model, experiment, hparams_search)
composes, resolves and matches the annotations of the classes it builds. An example's option is
composed with the example it belongs to; a team's own model or data option is checked by its
own values, composed with the option of the other group that goes with it (`its_partner`: the
one of the same name, as `model=mine data=mine`, else the one an experiment names beside it,
else the project's defaults); experiments are checked whole."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from my_project.machinery.preflight.values import check_config_types

from ..machinery.helpers import CONFIG_DIR, ROOT, compose_config
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


def its_partner(override: str, config_dir: Path = CONFIG_DIR) -> list[str]:
    """The data option a team's own model option goes with (`${data.num_features}`), or the
    model option its data goes with: the one of the same name, else the one of the first
    experiment that names it (`- override /model: mine`), else none (the defaults')."""
    group, name = override.split("=", 1)
    if group not in ("data", "model"):
        return []
    other = "model" if group == "data" else "data"
    if (config_dir / other / f"{name}.yaml").is_file():
        return [f"{other}={name}"]
    for path in sorted((config_dir / "experiment").glob("*.yaml")):
        chosen: dict[str, str] = {}
        for entry in OmegaConf.load(path).get("defaults") or []:
            if OmegaConf.is_dict(entry):
                chosen.update({str(k).removeprefix("override /"): str(v) for k, v in entry.items()})
        if chosen.get(group) == name and other in chosen:
            return [f"{other}={chosen[other]}"]
    return []


def test_the_readmes_own_model_and_data_compose_with_each_other(tmp_path: Path) -> None:
    """The README's `configs/model/mine.yaml` reads `${data.num_features}`, which the default
    data (the example's) lacks: it is composed with `data=mine`, as the README's commands name
    it; named by an experiment instead, with the experiment's data."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Bring your own model and data")[1].split("\n## ")[0]
    configs = tmp_path / "configs"
    for block in re.findall(r"```yaml\n(# configs/(\w+)/mine.yaml\n.*?)```", section, re.S):
        (configs / block[1]).mkdir(parents=True, exist_ok=True)
        (configs / block[1] / "mine.yaml").write_text(block[0])
    assert its_partner("model=mine", configs) == ["data=mine"]
    searched = f"hydra.searchpath=['file://{configs}']"
    cfg = compose_config([searched, *its_partner("model=mine", configs), "model=mine"], tmp_path)
    assert OmegaConf.to_container(cfg.model, resolve=True)["num_features"] == 16
    (configs / "data" / "mine.yaml").rename(configs / "data" / "theirs.yaml")
    (configs / "experiment").mkdir()
    (configs / "experiment" / "mine.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /model: mine\n  - override /data: theirs\n"
    )
    assert its_partner("model=mine", configs) == ["data=theirs"]
    assert its_partner("data=theirs", configs) == ["model=mine"]


@pytest.mark.parametrize("override", GROUPS)
def test_group_option_composes_and_resolves(override: str, tmp_path: Path) -> None:
    partner = WITH_ITS_EXAMPLE.get(override) or its_partner(override)
    cfg = compose_config([*partner, override], tmp_path)
    group = override.split("/", 1)[0].split("=", 1)[0]
    if group in ("data", "model") and override not in WITH_ITS_EXAMPLE:  # a team's own
        own = OmegaConf.to_container(cfg[group], resolve=True)
        assert isinstance(own, dict) and "_target_" in own
        cfg = OmegaConf.create({group: own})
    else:
        container = OmegaConf.to_container(cfg, resolve=True)
        assert "_target_" in container["data"] and "_target_" in container["model"]
    check_config_types(cfg)  # every value matches its target's annotation
