"""What to type instead of a key the config lacks, where the closest spelling is not the answer:
keys lightning-hydra-template names otherwise (`extras.print_config`, `model.lr` of a module
whose optimizer is a `_partial_` factory: `model.optimizer.lr`) and a callback the run has not
chosen (`callbacks.early_stopping.patience`: early stopping is off by default)."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from ..config import config_dir

# lightning-hydra-template's keys with no counterpart here, and what does their work.
_LHT_ONLY = {
    "extras": "`extras` is lightning-hydra-template's: here every run prints its config tree "
    "and saves it (`config_tree.log`), with nothing to turn on or off.",
}


def key_hint(key: str, parent_node: Any = None) -> str | None:
    """A sentence for ``key`` (dotted, as typed), which its config lacks; ``parent_node`` is the
    node that lacks its last part, where there is one."""
    parts = key.split(".")
    if parts[0] in _LHT_ONLY:
        return _LHT_ONLY[parts[0]]
    callback = parts[1] if len(parts) >= 2 and parts[0] == "callbacks" else None
    if callback and (config_dir() / "callbacks" / f"{callback}.yaml").is_file():
        return (
            f"`{callback}` is a callback the run has not chosen (not among the defaults): "
            f"choose it first, `callbacks=[default,{callback}]`."
        )
    deeper = same_name_below(parent_node, parts[-1], ".".join(parts[:-1]))
    if deeper:
        return f"Did you mean {' or '.join(f'`{d}`' for d in deeper)}?"
    return None


def same_name_below(node: Any, name: str, prefix: str) -> list[str]:
    """The keys under ``node`` (at ``prefix``) whose last part is ``name``: `model.lr` typed
    where the module's optimizer takes it, `model.optimizer.lr`."""
    if not OmegaConf.is_dict(node):
        return []
    found: list[str] = []

    def walk(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            return
        for key, child in value.items():
            where = f"{path}.{key}" if path else str(key)
            if key == name and where.count(".") > prefix.count(".") + (1 if prefix else 0):
                found.append(where)
            walk(child, where)

    walk(OmegaConf.to_container(node, resolve=False), prefix)
    return found[:2]
