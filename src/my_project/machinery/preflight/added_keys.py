"""A key the command line adds (``+key=value``) that nothing of the run reads, refused.

Hydra's advice for a key its config lacks is to add it with ``+``; it then sits in the config,
and a run that reads no such key ignores it without a word (``python predict.py
+input_path=x.npy`` would predict the test split). A key added is read when an object built
from a config node above it takes it (a ``_target_``'s settings: the object refuses what it
does not take), when a ``${...}`` of the config names it, or when it is Hydra's own, or a
callback's or logger's (`run/build.py` refuses settings of one that is not chosen). A key
whose name looks secret (``+hf_token=...``) is let through: it is masked everywhere by its name,
and is there for a ``${...}`` elsewhere (a launcher's, a plugin's) to take.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ..errors import UserError
from ..reliability.resume import override_key
from ..reliability.secrets import looks_secret
from .key_hints import key_hint

_READ_ELSEWHERE = ("hydra", "callbacks", "logger")


def check_added_keys_are_read(cfg: DictConfig) -> None:
    """Every ``+key=value`` of the command line reaches something that reads it."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return  # a config composed by code: what it holds is the caller's
    hydra_cfg = HydraConfig.get()
    groups = set(hydra_cfg.runtime.choices)
    text = OmegaConf.to_yaml(cfg)  # `${...}` as written
    named = {
        n.strip() for found in re.findall(r"\$\{([^}]*)\}", text) for n in re.split(r"[:,]", found)
    }
    for override in hydra_cfg.overrides.task:
        if not override.startswith("+") or override.startswith("++") or "=" not in override:
            continue
        key = override_key(override)
        if "/" in key or key in groups or key.split(".")[0] in _READ_ELSEWHERE:
            continue  # a config group added (`+experiment=x`), or read elsewhere
        if looks_secret(key.rsplit(".", 1)[-1]):
            continue
        if _read_by_an_object(cfg, key) or any(n == key or n.startswith(key + ".") for n in named):
            continue
        if _declared_by_the_entry(hydra_cfg.job.config_name, key):
            continue  # `+input_path=x` where predict.yaml has `input_path`: Hydra sets it
        raise UserError(_unread(cfg, override, key))


def _read_by_an_object(cfg: DictConfig, key: str) -> bool:
    """Whether a node at or above ``key`` is built by its ``_target_``, which takes it or not."""
    parts = key.split(".")
    for end in range(1, len(parts)):
        node = OmegaConf.select(cfg, ".".join(parts[:end]), default=None)
        if isinstance(node, DictConfig) and "_target_" in node:
            return True
    return False


def _declared_by_the_entry(config_name: str | None, key: str) -> bool:
    """Whether the entry's own config file (`configs/predict.yaml`) has ``key``, which it reads."""
    from ..config import config_dir

    path = config_dir() / f"{config_name}.yaml"
    try:
        declared = OmegaConf.load(path) if config_name and path.is_file() else None
    except Exception:  # unreadable YAML: Hydra has said so already, composing it
        return False
    if not isinstance(declared, DictConfig):
        return False
    parent, _, name = key.rpartition(".")
    node = OmegaConf.select(declared, parent, default=None) if parent else declared
    return isinstance(node, DictConfig) and name in node


def _unread(cfg: DictConfig, override: str, key: str) -> str:
    script = f"{Path(sys.argv[0]).stem}.py" if sys.argv and sys.argv[0] else "this script"
    parent, _, name = key.rpartition(".")
    node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
    siblings = [str(k) for k in node if str(k) != name] if isinstance(node, DictConfig) else []
    close = difflib.get_close_matches(name, siblings, n=2, cutoff=0.75)
    where = f"`{parent}`" if parent else f"{script}'s config"
    prefix = f"{parent}." if parent else ""
    suggested = " or ".join(f"`{prefix}{c}=`" for c in close)
    hint = f" Did you mean {suggested}?" if close else f" `python {script} --help` lists its keys."
    if not close and (named := key_hint(key, node)) is not None:
        hint = f" {named}"
    return (
        f"`{override}` adds `{key}`, which nothing of {script} reads (not a key of {where}, nor a "
        f"setting of an object the run builds): the run would ignore it. Remove it.{hint}"
    )
