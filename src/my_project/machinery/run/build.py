"""Build: the objects of a run (data, model, callbacks, loggers, Trainer) from the config.

Nothing here trains or writes a file of the run: every object the config names is built, and
what would fail only once training runs is tried (`preflight.dry_run`), before `record.start`
writes the first file. Each object is built inside `refusals.built_from` its config key, so
whatever its class refuses is one paragraph naming the key and the value (exit status 2), and
the run directory Hydra made is removed again (`entry.as_job`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from .. import preflight
from ..config import print_config_tree
from ..distributed import is_rank_zero
from ..errors import UserError
from ..reliability.secrets import mask_secrets, protect_run_secrets
from .refusals import built_from, require


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


def build_group(cfg: DictConfig, key: str) -> list[Any]:
    """Every entry of the dict-of-configs group ``cfg.<key>`` (callbacks, loggers), each
    inside `built_from` its own key (``callbacks.model_checkpoint``); nulls skipped.

    An entry whose factory returns None (e.g. the progress bar when disabled) is skipped too.
    """
    from hydra.utils import instantiate

    group = cfg.get(key)
    built = []
    for name, entry in (group or {}).items():
        if entry and "_target_" in entry:
            with built_from(cfg, f"{key}.{name}"):
                built.append(instantiate(entry))
    return [obj for obj in built if obj is not None]


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

        with built_from(cfg, "seed", by="lightning.seed_everything"):
            L.seed_everything(cfg.seed, workers=True)
    with built_from(cfg, "float32_matmul_precision"):
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

    require(cfg, "data")
    with built_from(cfg, "data"):
        data = instantiate_data(cfg)
    contract.check_datamodule(data, str(cfg.data.get("_target_")), fit=fit, test=test)
    return data


def load_model(target: str, ckpt_path: str, allow_non_finite: bool = False) -> Any:
    """Load ``ckpt_path`` into the LightningModule class named by ``target`` (on the CPU).

    Its arguments are the checkpoint's hyperparameters (plain data, `atomic_io.plain`), except
    those it holds no value of: left out (``save_hyperparameters(ignore=["net"])``) or saved as
    the record of an object (a ``_partial_`` optimizer, an enum). Those are built from the run's
    own config (`record.run_config`), never from the checkpoint; else their defaults apply.
    A file that is not such a checkpoint (empty, damaged, with non-finite weights, another
    model's) is a :class:`UserError` naming what to pass.
    """
    from ..preflight.checkpoint import check_finite, read_checkpoint
    from ..preflight.contract import model_class
    from .record import run_config

    cls = model_class(target)
    checkpoint = read_checkpoint(ckpt_path)
    config = run_config(ckpt_path)
    model_cfg = config.get("model") if config is not None else None
    arguments = rebuilt_arguments(cls, checkpoint.get("hyper_parameters") or {}, model_cfg)
    try:
        model = cls.load_from_checkpoint(ckpt_path, map_location="cpu", **arguments)
    except Exception as error:
        raise UserError(
            f"ckpt_path={ckpt_path} is not a checkpoint of {cls.__name__} ({type(error).__name__}: "
            f"{' '.join(str(error).split())[:300]}). Pass a checkpoint written by this project's "
            "train.py with the same `model=`."
        ) from error
    check_finite(ckpt_path, dict(model.named_parameters()), allow=allow_non_finite)
    return model


def rebuilt_arguments(cls: type, saved: dict[str, Any], model_cfg: Any) -> dict[str, Any]:
    """The arguments of ``cls`` that ``saved`` (its checkpoint's hyperparameters) holds no
    value of, built as the run built them from ``model_cfg`` (its config's `model`), or their
    defaults where that has none."""
    import inspect

    from hydra.utils import instantiate

    rebuilt: dict[str, Any] = {}
    for name, parameter in inspect.signature(cls).parameters.items():
        value = saved.get(name)
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD) or (
            name in saved and not (isinstance(value, dict) and "_object_" in value)
        ):
            continue
        if isinstance(model_cfg, DictConfig) and name in model_cfg:
            node = model_cfg[name]
            built = OmegaConf.is_config(node) and model_cfg.get("_recursive_", True)
            rebuilt[name] = instantiate(node) if built else node
        elif name in saved and parameter.default is not parameter.empty:
            rebuilt[name] = parameter.default
    return rebuilt


def dry_run(cfg: DictConfig, model: Any, trainer: Any, datamodule: Any) -> None:
    """What would fail only once training runs, tried now (`preflight.dry_run`): a layer of
    size 0, the learning-rate schedules, a validation interval longer than an epoch."""
    from ..preflight import dry_run as dry

    trainer_cfg = cast(dict[str, Any], OmegaConf.to_container(cfg.trainer, resolve=True))
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    batches = dry.training_batches(datamodule.train_dataloader(), trainer_cfg, trainer.world_size)
    accumulate = int(trainer_cfg.get("accumulate_grad_batches") or 1)
    with built_from(cfg, "model"):
        dry.check_parameters(model, dry.zero_sizes(model_cfg, ""))
        dry.try_schedules(
            model,
            epochs=trainer_cfg.get("max_epochs"),
            steps_per_epoch=None if batches is None else batches // max(accumulate, 1),
            max_steps=trainer_cfg.get("max_steps"),
        )
    with built_from(cfg, "trainer"):
        dry.check_validation_interval(trainer_cfg, batches)


def training_job(cfg: DictConfig, ckpt_path: str | None) -> Job:
    """Data, model (checked against the checkpoint), callbacks, loggers and Trainer of a fit,
    every one built (and the fit tried, `dry_run`) before anything is written."""

    config = masked_config(cfg)
    seed_and_precision(cfg)
    fit, test = bool(cfg.get("train", True)), bool(cfg.get("test", True))
    data = datamodule(cfg, fit=fit, test=test)
    require(cfg, "model")
    with built_from(cfg, "model"):
        model = model_for_data(cfg, data)
    checking = fit and is_rank_zero()
    resumed = preflight.check_built(model, data, ckpt_path, training=checking)
    callbacks = build_group(cfg, "callbacks")
    loggers = build_group(cfg, "logger")
    built_trainer = build_trainer(cfg, callbacks, loggers)
    if checking:
        dry_run(cfg, model, built_trainer, data)
    if is_rank_zero():
        print_config_tree(config)
    return Job(
        cfg=cfg,
        output_dir=Path(cfg.paths.output_dir),
        config=config,
        datamodule=data,
        model=model,
        trainer=built_trainer,
        callbacks=callbacks,
        loggers=loggers,
        ckpt_path=ckpt_path,
        resumed=resumed,
    )


def build_trainer(
    cfg: DictConfig, callbacks: list[Any], loggers: list[Any], **overrides: Any
) -> Any:
    """:func:`trainer` inside `built_from` ``trainer``, then the launcher's checks (the
    environment variables a run of several processes reads)."""
    from ..preflight.devices import check_launch_environment

    require(cfg, "trainer")
    with built_from(cfg, "trainer"):
        built = trainer(cfg, callbacks, loggers, **overrides)
    check_launch_environment(built)
    return built


def evaluation_job(cfg: DictConfig, ckpt_path: str) -> Job:
    """The checkpoint's model (rebuilt from its own hyperparameters), the data, a Trainer."""

    from ..preflight import contract

    config = masked_config(cfg)
    seed_and_precision(cfg)
    model = load_model(cfg.model._target_, ckpt_path, bool(cfg.get("allow_non_finite")))
    data = datamodule(cfg, fit=False, test=True)
    contract.check_model_fits_data(model, data, data_name(cfg))
    callbacks = build_group(cfg, "callbacks")
    loggers = build_group(cfg, "logger")
    built_trainer = build_trainer(cfg, callbacks, loggers)
    if is_rank_zero():
        print_config_tree(config)
    return Job(
        cfg=cfg,
        output_dir=Path(cfg.paths.output_dir),
        config=config,
        datamodule=data,
        model=model,
        trainer=built_trainer,
        callbacks=callbacks,
        loggers=loggers,
        ckpt_path=ckpt_path,
    )
