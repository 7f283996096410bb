"""A search config that names its own model or data (configs/hparams_search/mlp.yaml names the
example's) run with an experiment that names others: Hydra lets the search's `override` win (it
comes later in configs/train.yaml's defaults), so the search would tune the example instead of
the experiment asked for, and exit 0. Found before any trial, from the chosen configs' defaults
as written (Hydra keeps only the override that won)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    from hydra.core.config_loader import ConfigLoader

SEARCH_GROUP = "hparams_search"


def written_defaults(loader: ConfigLoader, searchpath: list[str], path: str) -> Any:
    """The ``defaults`` of config ``path`` (``group/option``) as written, looked up as Hydra
    does: the loader's sources, then ``hydra.searchpath``'s folders (which those lack)."""
    for source in loader.get_sources():
        if source.scheme() != "structured" and source.is_config(path):
            return listed_defaults(source.load_config(path).config)
    for entry in searchpath:
        scheme, _, where = entry.partition("://")
        if scheme == "file":
            file: Any = Path(where) / f"{path}.yaml"
        elif scheme == "pkg":
            file = resources.files(where.replace("/", ".")).joinpath(f"{path}.yaml")
        else:
            continue
        if file.is_file():
            return listed_defaults(OmegaConf.create(file.read_text()))
    return None


def listed_defaults(config: Any) -> Any:
    """A loaded config's ``defaults`` as plain Python (``None`` where it has none)."""
    found = OmegaConf.select(config, "defaults") if isinstance(config, DictConfig) else None
    return OmegaConf.to_container(found) if OmegaConf.is_config(found) else found


def group_overrides(
    loader: ConfigLoader, searchpath: list[str], group: str, option: str
) -> dict[str, str]:
    """The ``override /<group>: <option>`` lines of ``<group>/<option>.yaml``'s defaults as
    ``{group: option}``; a relative one (no leading ``/``) is under the config's own group."""
    defaults = written_defaults(loader, searchpath, f"{group}/{option}")
    overrides: dict[str, str] = {}
    for entry in defaults if isinstance(defaults, list) else []:
        for key, value in entry.items() if isinstance(entry, dict) else []:
            words = str(key).split()
            if len(words) != 2 or words[0] != "override" or not isinstance(value, str):
                continue
            name = words[1].split("@", 1)[0]
            parent = group.rsplit("/", 1)[0] if "/" in group else ""
            absolute = name[1:] if name.startswith("/") else "/".join(filter(None, (parent, name)))
            overrides[absolute] = value
    return overrides


def overridden_choices(config: DictConfig, loader: ConfigLoader) -> str | None:
    """One paragraph where the search config overrides a group (not Hydra's own) that another
    chosen config (an experiment) picks otherwise; ``None`` where they agree, or where the
    command line names the group itself (its choice wins over both)."""
    choices: dict[str, Any] = dict(OmegaConf.select(config, "hydra.runtime.choices") or {})
    search = choices.get(SEARCH_GROUP)
    if not isinstance(search, str):
        return None
    searchpath = [str(p) for p in OmegaConf.select(config, "hydra.searchpath") or []]
    typed = OmegaConf.select(config, "hydra.overrides.task") or []
    named = {str(o).split("=", 1)[0].lstrip("+~").split("@", 1)[0] for o in typed}
    pins = {
        group: option
        for group, option in group_overrides(loader, searchpath, SEARCH_GROUP, search).items()
        if not group.startswith("hydra")
    }
    for group, option in choices.items():
        if group == SEARCH_GROUP or group.startswith("hydra") or not isinstance(option, str):
            continue
        theirs = group_overrides(loader, searchpath, group, option)
        lost = {g: o for g, o in theirs.items() if g in pins and pins[g] != o and g not in named}
        if not lost:
            continue
        asked = ", ".join(f"{g}={o}" for g, o in lost.items())
        pinned = ", ".join(f"`override /{g}: {o}`" for g, o in pins.items())
        searched = ", ".join(f"{g}={choices.get(g, o)}" for g, o in pins.items())
        where = f"configs/{SEARCH_GROUP}/{search}.yaml"
        return (
            f"{SEARCH_GROUP}={search} names its own model and data ({where}: {pinned}), and "
            f"they win over {group}={option}'s ({asked}): this search would tune {searched}, "
            f"not {group}={option}. To search yours, copy {where} to "
            f"configs/{SEARCH_GROUP}/<name>.yaml, delete those `override` lines there (then "
            f"{group}={option} picks the model and data), set its `optimized_metric`, "
            "`hydra.sweeper.direction` and `hydra.sweeper.params` for your module, and run "
            f"`python train.py -m {SEARCH_GROUP}=<name> {group}={option}`."
        )
    return None
