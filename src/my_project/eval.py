"""Evaluation entry point: `python eval.py ckpt_path=PATH` tests a checkpoint on the test split."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from .reliability.run_dir import register_resolvers
from .utils.config import config_dir, print_config_tree
from .utils.errors import UserError, report_user_errors
from .utils.ranks import is_rank_zero
from .utils.run_files import to_floats, write_json
from .utils.validation import check_checkpoint_path, check_trainer_config

register_resolvers()  # `${unique_dir:...}` in configs/hydra


def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Load the model from its checkpoint (its own hyperparameters), test it, write metrics.json."""
    check_trainer_config(cfg.trainer)
    ckpt_path = check_checkpoint_path(cfg.get("ckpt_path"))
    if ckpt_path is None:
        raise UserError("eval needs a checkpoint: `python eval.py ckpt_path=PATH/TO/best.ckpt`.")
    from .strategies import check_strategy_and_devices  # registers dp and the Hydra-aware ddp

    check_strategy_and_devices(cfg.trainer)
    output_dir = Path(cfg.paths.output_dir)
    if is_rank_zero():
        print_config_tree(cfg, save_to=output_dir / "config_tree.log")

    from hydra.utils import instantiate

    from .utils.checkpoint import load_model
    from .utils.instantiate import instantiate_group
    from .utils.precision import set_float32_matmul_precision

    set_float32_matmul_precision(cfg.get("float32_matmul_precision"))
    model = load_model(cfg.model._target_, ckpt_path)
    datamodule = instantiate(cfg.data)
    callbacks = instantiate_group(cfg.get("callbacks"))
    loggers = instantiate_group(cfg.get("logger"))
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    trainer.test(model, datamodule=datamodule)
    metrics = to_floats(trainer.callback_metrics)
    if trainer.is_global_zero:
        write_json(metrics, output_dir / "metrics.json")
    return metrics


def main() -> None:
    import hydra

    @hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="eval")
    @report_user_errors
    def _main(cfg: DictConfig) -> None:
        evaluate(cfg)

    _main()


if __name__ == "__main__":
    main()
