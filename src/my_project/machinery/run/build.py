"""Build: the objects of a run (data, model, callbacks, loggers, Trainer) from the config.

Nothing here trains or writes a file of the run; the checks on the built objects
(`preflight.check_built`) run before the Trainer, the callbacks and the loggers exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from .. import preflight
from ..config import print_config_tree
from ..distributed import is_rank_zero
from ..errors import UserError
from ..reliability.secrets import mask_secrets, protect_run_secrets


@dataclass
class Job:
    """Everything one run of an entry point works with."""

    cfg: DictConfig
    output_dir: Path
    config: dict[str, Any]  # the resolved config, secrets masked: what is printed, logged, saved
    datamodule: Any
    model: Any
    trainer: Any
    callbacks: list[Any] = field(default_factory=list)
    loggers: list[Any] = field(default_factory=list)
    ckpt_path: str | None = None
    resumed: dict[str, Any] = field(default_factory=dict)  # the checkpoint's epoch and step


def masked_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config with every secret masked: the one point where secrets are found.

    Values under secret-looking keys (and command-line overrides) are registered, so they are
    masked from here on wherever the run prints or saves (logs, checkpoints, Hydra's
    `.hydra/` files, which are rewritten now).
    """
    if is_rank_zero():
        protect_run_secrets(cfg)
    return mask_secrets(OmegaConf.to_container(cfg, resolve=True))


def instantiate_group(cfg: DictConfig | None) -> list[Any]:
    """Instantiate every entry of a dict-of-configs group (callbacks, loggers); skip nulls.

    An entry whose factory returns None (e.g. the progress bar when disabled) is skipped too.
    """
    from hydra.utils import instantiate

    if not cfg:
        return []
    built = (instantiate(entry) for entry in cfg.values() if entry and "_target_" in entry)
    return [obj for obj in built if obj is not None]


def trainer(cfg: DictConfig, callbacks: list[Any], loggers: list[Any], **overrides: Any) -> Any:
    """`lightning.Trainer(**cfg.trainer)` with these callbacks and loggers."""
    from hydra.utils import instantiate

    return instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, **overrides)


def seed_and_precision(cfg: DictConfig) -> None:
    """Seed every generator (`seed`), and set the float32 matmul precision."""
    from ..devices.precision import set_float32_matmul_precision

    if cfg.get("seed") is not None:
        import lightning as L

        L.seed_everything(cfg.seed, workers=True)
    set_float32_matmul_precision(cfg.get("float32_matmul_precision"))


def model_for_data(cfg: DictConfig, datamodule: Any) -> Any:
    """The LightningModule of ``cfg.model``, given what it asks of the data.

    Its config's values come first; of what the data module's ``model_kwargs()`` hook offers,
    the model gets the arguments its ``__init__`` names (or passes on to its parent's through
    ``**kwargs``) and its config leaves unset (`preflight/contract.py`).
    """
    from omegaconf import OmegaConf

    from ..preflight import contract

    cls = contract.model_class(cfg.model._target_)
    given = {
        str(key)
        for key in cfg.model
        if not str(key).startswith("_") and not OmegaConf.is_missing(cfg.model, key)
    }
    offered = contract.offered_model_kwargs(datamodule)
    extra = contract.arguments_from_data(cls, given, offered)
    data_name = type(datamodule).__name__
    contract.check_model_arguments(cls, given, offered, data_name)
    return contract.instantiate_model(cfg.model, cls, extra, data_name)


def data_name(cfg: DictConfig) -> str:
    """The `data=` option as typed (e.g. `mnist`), else the data module's class name."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        choice = HydraConfig.get().runtime.choices.get("data")
        if choice:
            return str(choice)
    return str(cfg.data._target_).rsplit(".", 1)[-1]


def instantiate_data(cfg: DictConfig, **values: Any) -> Any:
    """``instantiate(cfg.data)``, with ``values`` for the keys its config has (e.g. predict.py
    asks for ``on_device=False`` where the data module has that switch)."""
    from hydra.utils import instantiate

    return instantiate(cfg.data, **{k: v for k, v in values.items() if k in cfg.data})


def datamodule(cfg: DictConfig, fit: bool, test: bool) -> Any:
    """The LightningDataModule of ``cfg.data``, checked against what this run asks of it."""
    from ..preflight import contract

    data = instantiate_data(cfg)
    contract.check_datamodule(data, str(cfg.data.get("_target_")), fit=fit, test=test)
    return data


def load_model(target: str, ckpt_path: str) -> Any:
    """Load ``ckpt_path`` into the LightningModule class named by ``target`` (on the CPU),
    from the checkpoint's own hyperparameters.

    A file that is not such a checkpoint becomes a :class:`UserError` naming what to pass.
    """
    from ..preflight.contract import model_class

    cls = model_class(target)
    try:
        return cls.load_from_checkpoint(ckpt_path, map_location="cpu")
    except (KeyError, RuntimeError, TypeError) as error:
        raise UserError(
            f"{ckpt_path} is not a checkpoint of {cls.__name__} ({type(error).__name__}: "
            f"{error}). Pass a checkpoint written by this project's train.py with the same "
            "`model=`."
        ) from error


def training_job(cfg: DictConfig, ckpt_path: str | None) -> Job:
    """Data, model (checked against the checkpoint), callbacks, loggers and Trainer of a fit."""

    config = masked_config(cfg)
    seed_and_precision(cfg)
    fit, test = bool(cfg.get("train", True)), bool(cfg.get("test", True))
    data = datamodule(cfg, fit=fit, test=test)
    model = model_for_data(cfg, data)
    resumed = preflight.check_built(model, data, ckpt_path, training=fit and is_rank_zero())
    if is_rank_zero():
        print_config_tree(config)
    callbacks = instantiate_group(cfg.get("callbacks"))
    loggers = instantiate_group(cfg.get("logger"))
    if resumed.get("global_step"):
        from ..reliability.resume import keep_csv_history

        keep_csv_history(loggers, resumed["logger_step"])
    return Job(
        cfg=cfg,
        output_dir=Path(cfg.paths.output_dir),
        config=config,
        datamodule=data,
        model=model,
        trainer=trainer(cfg, callbacks, loggers),
        callbacks=callbacks,
        loggers=loggers,
        ckpt_path=ckpt_path,
        resumed=resumed,
    )


def evaluation_job(cfg: DictConfig, ckpt_path: str) -> Job:
    """The checkpoint's model (rebuilt from its own hyperparameters), the data, a Trainer."""

    from ..preflight import contract

    config = masked_config(cfg)
    seed_and_precision(cfg)
    model = load_model(cfg.model._target_, ckpt_path)
    data = datamodule(cfg, fit=False, test=True)
    contract.check_model_fits_data(model, data, data_name(cfg))
    if is_rank_zero():
        print_config_tree(config)
    callbacks = instantiate_group(cfg.get("callbacks"))
    loggers = instantiate_group(cfg.get("logger"))
    return Job(
        cfg=cfg,
        output_dir=Path(cfg.paths.output_dir),
        config=config,
        datamodule=data,
        model=model,
        trainer=trainer(cfg, callbacks, loggers),
        callbacks=callbacks,
        loggers=loggers,
        ckpt_path=ckpt_path,
    )
