"""A callback's own `monitor` typed without its `mode` (LHT's
`callbacks.model_checkpoint.monitor=val/loss`): its mode still follows the project's
`monitor_mode`, the direction of another metric, so the "best" checkpoint could be the worst.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from ..errors import UserError

_FOLLOWS_THE_PROJECT = "${monitor_mode}"


def check_callback_monitors(cfg: DictConfig) -> None:
    """Refuse a callback whose `monitor` was set on its own while its `mode` still follows
    `monitor_mode`: the project's `monitor` and `monitor_mode` keys set both directions."""
    callbacks = cfg.get("callbacks")
    if not OmegaConf.is_dict(callbacks):
        return
    project_monitor = OmegaConf.select(cfg, "monitor", default=None)
    project_mode = OmegaConf.select(cfg, "monitor_mode", default=None)
    for name, node in callbacks.items():
        if not OmegaConf.is_dict(node) or "monitor" not in node or "mode" not in node:
            continue
        raw = OmegaConf.to_container(node, resolve=False)
        assert isinstance(raw, dict)
        if raw["mode"] != _FOLLOWS_THE_PROJECT or OmegaConf.is_interpolation(node, "monitor"):
            continue
        monitor = node.monitor
        if monitor == project_monitor:
            continue
        raise UserError(
            f"callbacks.{name}.monitor={monitor} is set without callbacks.{name}.mode, which "
            f"follows `monitor_mode={project_mode}` (the direction of `monitor={project_monitor}`"
            f"), so the callback would count {_better(project_mode)} {monitor} as better. Set the "
            f"project's keys, which every callback reads: `monitor={monitor} "
            f"monitor_mode=min` (or `max`), in place of callbacks.{name}.monitor; or set "
            f"callbacks.{name}.mode too."
        )


def _better(mode: object) -> str:
    return "a higher" if mode == "max" else "a lower" if mode == "min" else f"({mode})"
