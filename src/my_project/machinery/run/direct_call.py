"""A task called directly, ``train(cfg)``, from a notebook or a test, as Hydra would run it.

Hydra hands a job its config without the ``hydra`` node and with ``hydra:runtime.output_dir``
(the run directory, `paths.output_dir`) set. A config composed with Hydra's compose API has
neither: with ``return_hydra_config=True`` it holds a ``hydra`` node whose runtime values are
unset (``hydra.job.num``, ``hydra.runtime.output_dir``), as lightning-hydra-template's tests
and notebooks compose it; without it, ``${hydra:runtime.output_dir}`` has nothing to resolve
from. :func:`job_config` makes either what a Hydra run would have given the job.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from ..config import config_dir


def job_config(cfg: DictConfig) -> DictConfig:
    """``cfg`` without a ``hydra`` node, with a run directory: the one set in
    ``paths.output_dir``, else a new one made as ``hydra.run.dir`` makes it (the node's own
    pattern, or configs/hydra/default.yaml's: ``logs/<task>/runs/<time>``).

    A config Hydra gave a job is returned as it is.
    """
    from hydra.core.hydra_config import HydraConfig

    if "hydra" not in cfg and HydraConfig.initialized():
        return cfg
    hydra_node = cfg.get("hydra") if "hydra" in cfg else None
    job = cfg.copy()
    with open_dict(job):
        job.pop("hydra", None)
    if _resolves(job, "paths.output_dir"):
        return job
    if hydra_node is None:
        hydra_node = OmegaConf.load(config_dir() / "hydra" / "default.yaml")
    run = OmegaConf.to_container(hydra_node.run, resolve=False)
    pattern = run["dir"] if isinstance(run, dict) else None  # e.g. ${unique_dir:...}
    holder = job.copy()
    OmegaConf.set_struct(holder, False)
    holder.hydra = {"run": {"dir": pattern}}  # resolved against this config's paths, task_name
    with open_dict(job):
        job.paths.output_dir = str(holder.hydra.run.dir)  # makes it (`unique_dir`)
    return job


def _resolves(cfg: DictConfig, key: str) -> bool:
    try:
        value: Any = OmegaConf.select(cfg, key, throw_on_missing=True)
    except Exception:  # `${hydra:...}` outside a Hydra run, or Hydra's unset `???`
        return False
    return value is not None
