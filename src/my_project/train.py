"""Training entry point: `python train.py [overrides]` or the `my-project-train` script.

Heavy imports (torch, Lightning) happen inside :func:`train`, so `--help` stays instant.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from .utils.config import config_dir, print_config_tree
from .utils.errors import report_user_errors
from .utils.run_files import save_resolved_config, write_metrics
from .utils.validation import check_checkpoint_path, check_trainer_config


def is_rank_zero() -> bool:
    """True in the launching process; Lightning/torchrun set these in the others."""
    return all(os.environ.get(var, "0") == "0" for var in ("RANK", "LOCAL_RANK", "NODE_RANK"))


def train(cfg: DictConfig) -> dict[str, float]:
    """Fit, then test the best checkpoint; return (and write) the final metrics."""
    check_trainer_config(cfg.trainer)
    ckpt_path = check_checkpoint_path(cfg.get("ckpt_path"))
    output_dir = Path(cfg.paths.output_dir)
    if is_rank_zero():
        print_config_tree(cfg, save_to=output_dir / "config_tree.log")
        save_resolved_config(cfg, output_dir / "config.yaml")

    import lightning as L
    from hydra.utils import instantiate
    from lightning.pytorch.callbacks import ModelCheckpoint
    from omegaconf import OmegaConf

    from .utils.instantiate import instantiate_group
    from .utils.precision import set_float32_matmul_precision

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
    callbacks = instantiate_group(cfg.get("callbacks"))
    loggers = instantiate_group(cfg.get("logger"))
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

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

    if trainer.is_global_zero:
        write_metrics(metrics, output_dir / "metrics.json")
    return {key: float(value) for key, value in metrics.items()}


def main() -> None:
    """Console-script entry point: compose the config with Hydra and train."""
    import hydra

    @hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="train")
    @report_user_errors
    def _main(cfg: DictConfig) -> float | None:
        metrics = train(cfg)
        # Returned for Hydra sweepers (Optuna) that optimise a metric.
        objective = cfg.get("optimized_metric")
        return metrics.get(objective) if objective else None

    _main()


if __name__ == "__main__":
    main()
