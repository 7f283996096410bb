"""A task called directly, ``train(cfg)``, from a notebook or a test, as Hydra would run it.

A config from Hydra's compose API has no run directory (``${hydra:runtime.output_dir}``), and a
``hydra`` node (with ``return_hydra_config=True``, as lightning-hydra-template composes it) that
a job never sees.
"""

from __future__ import annotations

from typing import Any, cast

from omegaconf import DictConfig, OmegaConf, open_dict

from ..config import config_dir


def job_config(cfg: DictConfig) -> DictConfig:
    """``cfg`` as a Hydra job gets it: no ``hydra`` node, and a run directory (its
    ``paths.output_dir``, else a new one made as ``hydra.run.dir`` makes it)."""
    from hydra.core.hydra_config import HydraConfig

    if "hydra" not in cfg and HydraConfig.initialized():
        return cfg
    hydra_node = cfg.get("hydra") or OmegaConf.load(config_dir() / "hydra" / "default.yaml")
    job = cfg.copy()
    with open_dict(job):
        job.pop("hydra", None)
    try:
        if OmegaConf.select(job, "paths.output_dir", throw_on_missing=True) is not None:
            return job
    except Exception:  # `${hydra:...}` outside a Hydra run, or Hydra's unset `???`
        pass
    holder = job.copy()
    OmegaConf.set_struct(holder, False)
    # Resolved against this config's paths and task_name, e.g. `${unique_dir:...}`, which makes it.
    run = cast(dict[str, Any], OmegaConf.to_container(hydra_node.run, resolve=False))
    holder.hydra = {"run": {"dir": run["dir"]}}
    with open_dict(job):
        job.paths.output_dir = str(holder.hydra.run.dir)
    return job
