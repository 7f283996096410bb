"""Build: the objects of a run (data, model, callbacks, loggers, Trainer) from the config.

Nothing here trains or writes a file of the run. Each object is built inside
`boundary.built_from` its config node, which tells a refused value from the team's bug.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..config import print_config_tree
from ..distributed import is_rank_zero
from ..errors import UserError
from ..reliability.secrets import MASK, mask_secrets
from .boundary import built_from

__all__ = ["Job", "built_from", "evaluation_job", "load_model", "training_job"]


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
    """The resolved config with every secret masked: what the run prints, logs and saves."""
    return mask_secrets(OmegaConf.to_container(cfg, resolve=True))


def build_group(cfg: DictConfig, key: str) -> list[Any]:
    """Every entry of the group ``cfg.<key>`` (callbacks, loggers), each `built_from` its node.
    An entry with settings but no ``_target_`` (``+logger.wandb.project=x`` with ``logger=csv``)
    would build nothing, silently: refused."""
    built = []
    for name, entry in (cfg.get(key) or {}).items():
        if entry and "_target_" not in entry:
            chosen = ", ".join(str(k) for k, v in cfg[key].items() if v and "_target_" in v)
            raise UserError(
                f"`{key}.{name}` has settings ({', '.join(f'{key}.{name}.{k}' for k in entry)}) "
                f"but nothing to build: the {key} chosen ({chosen or 'none'}) does not include "
                f"`{name}`. Choose it first, e.g. `{key}=[{'csv' if key == 'logger' else 'default'},"
                f"{name}]`."
            )
        with built_from(cfg, f"{key}.{name}"):
            built += instantiate_group({name: entry})
    return built


def instantiate_group(cfg: Mapping[str, Any] | None) -> list[Any]:
    """Every entry of a group built; nulls, and a factory's None (a disabled progress bar), not."""
    from hydra.utils import instantiate

    built = (instantiate(e) for e in (cfg or {}).values() if e and "_target_" in e)
    return [obj for obj in built if obj is not None]


def trainer(cfg: DictConfig, callbacks: list[Any], loggers: list[Any], **overrides: Any) -> Any:
    """`lightning.Trainer(**cfg.trainer)` with these callbacks and loggers."""
    from hydra.utils import instantiate

    return instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, **overrides)


def build_trainer(
    cfg: DictConfig, callbacks: list[Any], loggers: list[Any], **overrides: Any
) -> Any:
    """:func:`trainer` inside `built_from` ``trainer``, and the port its processes meet at."""
    from ..preflight.devices import check_launch_environment, check_precision_kept

    with built_from(cfg, "trainer"):
        built = trainer(cfg, callbacks, loggers, **overrides)
    check_launch_environment(built)
    check_precision_kept(cfg.trainer.get("precision"), built)
    return built


def seed_and_precision(cfg: DictConfig) -> None:
    """Seed every generator (`seed`), and set the float32 matmul precision."""
    from ..devices.precision import set_float32_matmul_precision

    if cfg.get("seed") is not None:
        import lightning as L

        with built_from(cfg, "seed", by="lightning.seed_everything"):
            L.seed_everything(cfg.seed, workers=True)
    with built_from(cfg, "float32_matmul_precision"):
        set_float32_matmul_precision(cfg.get("float32_matmul_precision"))


def model_for_data(cfg: DictConfig, datamodule: Any) -> Any:
    """The LightningModule of ``cfg.model``, given what the data module's ``model_kwargs()``
    offers that it takes and its config leaves unset (`contract`)."""
    from ..preflight import contract

    cls = contract.model_class(cfg.model._target_)
    given = {str(k) for k in cfg.model if not OmegaConf.is_missing(cfg.model, k)}
    extra = contract.arguments_from_data(cls, given, contract.offered_model_kwargs(datamodule))
    return contract.instantiate_model(cfg.model, cls, extra)


def data_name(cfg: DictConfig) -> str:
    """The `data=` option as typed (e.g. `mnist`), else the data module's class name."""
    from hydra.core.hydra_config import HydraConfig

    choice = HydraConfig.get().runtime.choices.get("data") if HydraConfig.initialized() else None
    return str(choice or str(cfg.data._target_).rsplit(".", 1)[-1])


def instantiate_data(cfg: DictConfig, **values: Any) -> Any:
    """``instantiate(cfg.data)``, with ``values`` for the keys its config has."""
    from hydra.utils import instantiate

    return instantiate(cfg.data, **{k: v for k, v in values.items() if k in cfg.data})


def datamodule(cfg: DictConfig, fit: bool, test: bool) -> Any:
    """The LightningDataModule of ``cfg.data``, checked against what this run asks of it."""
    from ..preflight import contract

    with built_from(cfg, "data"):
        data = instantiate_data(cfg)
    contract.check_datamodule(data, str(cfg.data.get("_target_")), fit=fit, test=test)
    return data


def load_model(
    target: str,
    ckpt_path: str,
    stage: str = "predict",
    datamodule: Any = None,
    trainer: Any = None,
) -> Any:
    """Load ``ckpt_path`` into the LightningModule class named by ``target`` (on the CPU), with
    the checkpoint's hyperparameters; those it has no value of (ignored, or the record of an
    object: `atomic_io.plain`) built from the run's own config, else their defaults. Layers the
    module builds in ``setup(stage)`` or ``configure_model`` are built first, with ``trainer``
    (else a one-CPU one) and ``datamodule`` (else the run's) attached (`deferred`)."""
    from hydra.utils import instantiate

    from ..preflight.checkpoint import check_finite, read_checkpoint
    from ..preflight.contract import model_class
    from . import deferred
    from .record import run_config

    cls = model_class(target)
    checkpoint = read_checkpoint(ckpt_path)
    saved = checkpoint.get("hyper_parameters") or {}
    run = run_config(ckpt_path)
    model_cfg = run.get("model") if run is not None else None
    arguments: dict[str, Any] = {}
    for name, parameter in inspect.signature(cls).parameters.items():
        value = saved.get(name)
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD) or (
            name in saved and not (isinstance(value, dict) and "_object_" in value)
        ):
            continue
        if isinstance(model_cfg, DictConfig) and name in model_cfg:
            node = model_cfg[name]
            built = OmegaConf.is_config(node) and model_cfg.get("_recursive_", True)
            arguments[name] = instantiate(node) if built else node
        elif name in saved and parameter.default is not parameter.empty:
            arguments[name] = parameter.default
    late = deferred.builds_late(cls)
    data_cfg = run.get("data") if run is not None else None
    saved_data = isinstance(data_cfg, DictConfig) and "_target_" in data_cfg
    if late and datamodule is None and saved_data and MASK not in OmegaConf.to_yaml(data_cfg):
        datamodule = instantiate(data_cfg)  # the data of the run: the shapes it trained with
    if late and datamodule is not None:
        if is_rank_zero():  # as Lightning prepares data: once (other processes come after)
            datamodule.prepare_data()
        datamodule.setup(stage)
    try:
        model = deferred.from_hyperparameters(cls, checkpoint, arguments)
        if late:
            deferred.build_layers(model, stage, trainer or deferred.quiet_trainer(), datamodule)
            deferred.keep_built(model)
        model.on_load_checkpoint(checkpoint)
        weights = deferred.weights_for(model, checkpoint["state_dict"])
        model.load_state_dict(weights, strict=model.strict_loading)
    except Exception as error:
        from ..fault import teams_bug

        if (bug := teams_bug(error, [saved, arguments], saved)) is not None:
            raise bug from None  # the team's own code fails as it rebuilds the model
        raise UserError(
            f"ckpt_path={ckpt_path} is not a checkpoint of {cls.__name__} ({type(error).__name__}: "
            f"{' '.join(str(error).split())[:300]}). Pass a checkpoint written by this project's "
            "train.py with the same `model=`."
        ) from error
    check_finite(ckpt_path, dict(model.named_parameters()))
    return model


def training_job(cfg: DictConfig, ckpt_path: str | None) -> Job:
    """A fit's objects built, the model checked against the checkpoint, the training data and
    the config's schedules tried: before anything is written."""
    from ..callbacks.movable_checkpoint import check_moved_run
    from ..preflight import contract, data, schedules
    from ..preflight.checkpoint import (
        check_checkpoint_matches,
        check_resumed_batch_size,
        check_resumed_processes,
        print_notes,
        read_checkpoint,
    )
    from . import deferred, entry

    config = masked_config(cfg)
    seed_and_precision(cfg)
    fit = bool(cfg.get("train", True))
    data_module = datamodule(cfg, fit=fit, test=bool(cfg.get("test", True)))
    with built_from(cfg, "model"):
        model = model_for_data(cfg, data_module)
        contract.check_parameters(model)
    job = _job(cfg, config, data_module, model, ckpt_path)
    if fit and is_rank_zero():
        with built_from(cfg, "data"):
            typed = OmegaConf.select(cfg, "data.batch_size", default=None)
            batches, batch_size = data.check_training_data(data_module, job.trainer, typed)
            if ckpt_path:
                check_resumed_batch_size(ckpt_path, batch_size)
        with built_from(cfg, "trainer"):
            data.check_validation_interval(job.trainer, batches)
    elif deferred.builds_late(model):  # the data as Lightning sets it up before the model
        with built_from(cfg, "data"):
            data_module.setup("fit" if fit else "test")
    with built_from(cfg, "model"):  # layers built in setup or configure_model, tried on another
        built = deferred.tried(  # instance: the config's values reach them too
            lambda: model_for_data(cfg, data_module),
            model,
            "fit" if fit else "test",
            job.trainer,
            data_module,
        )
        contract.check_parameters(built)
    job.resumed = check_checkpoint_matches(ckpt_path, built) if ckpt_path else {}
    if ckpt_path and fit:
        check_resumed_processes(ckpt_path, job.trainer)
        check_moved_run(ckpt_path, read_checkpoint(ckpt_path), job.output_dir, job.callbacks)
    if fit and is_rank_zero():
        for key, node in schedules.schedule_nodes(config.get("model"), "model"):
            with built_from(cfg, key):
                schedules.try_schedule(node, config["trainer"])
    entry.announce_run_dir()  # every check passed
    print_notes()  # what the resume will do
    if is_rank_zero():
        print_config_tree(config)
    return job


def _job(cfg: DictConfig, config: dict[str, Any], data: Any, model: Any, ckpt: str | None) -> Job:
    """The job of this data and model, its callbacks, loggers and Trainer built."""
    callbacks, loggers = build_group(cfg, "callbacks"), build_group(cfg, "logger")
    built = build_trainer(cfg, callbacks, loggers)
    return Job(
        cfg, Path(cfg.paths.output_dir), config, data, model, built, callbacks, loggers, ckpt
    )


def evaluation_job(cfg: DictConfig, ckpt_path: str) -> Job:
    """The checkpoint's model (rebuilt from its own hyperparameters), the data, a Trainer."""
    from ..preflight import contract
    from . import entry

    config = masked_config(cfg)
    seed_and_precision(cfg)
    data = datamodule(cfg, fit=False, test=True)
    job = _job(cfg, config, data, None, ckpt_path)
    job.model = load_model(cfg.model._target_, ckpt_path, "test", data, job.trainer)
    contract.check_model_fits_data(job.model, data, data_name(cfg))
    entry.announce_run_dir()  # every check passed
    if is_rank_zero():
        print_config_tree(config)
    return job
