"""Training entry point: `python train.py [overrides]` or the `my-project-train` script.

Heavy imports (torch, Lightning) happen inside :func:`train`, so `--help` stays instant.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from .reliability.resume import expand_resume_argument, resolve_checkpoint_path
from .reliability.run_dir import register_resolvers
from .reliability.secrets import mask_secrets, masked_argv, protect_run_secrets
from .utils.config import config_dir, print_config_tree
from .utils.errors import report_user_errors
from .utils.ranks import is_rank_zero
from .utils.run_files import save_resolved_config, to_floats, write_json
from .utils.validation import check_checkpoint_path, check_trainer_config

# `${unique_dir:...}` in configs/hydra: registered on import, also in processes that only
# unpickle a job (Hydra launchers such as submitit).
register_resolvers()


def train(cfg: DictConfig) -> dict[str, float]:
    """Fit, then test the best checkpoint; return (and write) the final metrics."""
    check_trainer_config(cfg.trainer)
    # Registers `dp` and the Hydra-aware `ddp` before any Trainer exists; bad devices or
    # strategies fail here, before anything is written.
    from .strategies import check_strategy_and_devices, run_record

    check_strategy_and_devices(cfg.trainer)
    output_dir = Path(cfg.paths.output_dir)
    ckpt_path = check_checkpoint_path(resolve_checkpoint_path(cfg.get("ckpt_path"), output_dir))
    if is_rank_zero():
        protect_run_secrets(cfg)

    import lightning as L
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from .reliability import checks
    from .reliability.resume import keep_csv_history
    from .reliability.signals import stop_cleanly_on_signals
    from .utils.instantiate import instantiate_group
    from .utils.precision import set_float32_matmul_precision

    checks.check_config_types(cfg)
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)
    set_float32_matmul_precision(cfg.get("float32_matmul_precision"))

    datamodule = instantiate(cfg.data)
    model = instantiate(
        cfg.model,
        num_classes=datamodule.num_classes,
        image_shape=list(datamodule.image_shape),
        _convert_="all",
    )
    resumed = checks.check_checkpoint_matches(ckpt_path, model) if ckpt_path else {}
    if is_rank_zero():
        if cfg.get("train", True):
            checks.check_training_data(datamodule)
        # Written only once every check passed: bad input leaves an existing run untouched.
        print_config_tree(cfg, save_to=output_dir / "config_tree.log")
        save_resolved_config(cfg, output_dir / "config.yaml")

    callbacks = instantiate_group(cfg.get("callbacks"))
    loggers = instantiate_group(cfg.get("logger"))
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    if resumed.get("global_step"):
        keep_csv_history(loggers, resumed["global_step"])
    with masked_argv():  # the first log_hyperparams starts wandb, which records the command
        for logger in loggers:
            logger.log_hyperparams(mask_secrets(OmegaConf.to_container(cfg, resolve=True)))

    with stop_cleanly_on_signals(output_dir, announce=is_rank_zero()):
        metrics = to_floats(fit_and_test(cfg, trainer, model, datamodule, callbacks, ckpt_path))
    if trainer.is_global_zero:
        write_json(metrics, output_dir / "metrics.json")
        # What the Trainer really ran on; the device report (doctor.py) predicts the same fields.
        write_json(run_record(trainer), output_dir / "run_info.json")
    return metrics


def fit_and_test(
    cfg: DictConfig,
    trainer: Any,
    model: Any,
    datamodule: Any,
    callbacks: list,
    ckpt_path: str | None,
) -> dict[str, Any]:
    from lightning.pytorch.callbacks import ModelCheckpoint

    metrics: dict[str, Any] = {}
    if cfg.get("train", True):
        trainer.fit(model, datamodule=datamodule, ckpt_path=ckpt_path)
        metrics.update(trainer.callback_metrics)

    if cfg.get("test", True):
        # The monitored checkpoint callback holds the best model (`last_checkpoint` has no monitor).
        checkpoint = next(
            (cb for cb in callbacks if isinstance(cb, ModelCheckpoint) and cb.monitor), None
        )
        best = checkpoint.best_model_path if checkpoint is not None else ""
        if cfg.get("train", True) and not best:
            print(
                "No best checkpoint was saved; testing the weights as they are at the end of training."
            )
        trainer.test(model, datamodule=datamodule, ckpt_path=best or None)
        metrics.update(trainer.callback_metrics)
    return metrics


def main() -> None:
    """Console-script entry point: compose the config with Hydra and train."""
    import hydra

    sys.argv[1:] = report_user_errors(expand_resume_argument)(sys.argv[1:])

    @hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="train")
    @report_user_errors
    def _main(cfg: DictConfig) -> float | None:
        from .utils.wandb import finish_wandb_run

        try:
            metrics = train(cfg)
        except BaseException:
            finish_wandb_run(failed=True)
            raise
        finish_wandb_run()
        # Returned for Hydra sweepers (Optuna) that optimise a metric.
        objective = cfg.get("optimized_metric")
        return metrics.get(objective) if objective else None

    _main()


if __name__ == "__main__":
    main()
