"""Evaluation entry point: `python eval.py ckpt_path=PATH` tests a checkpoint on the test split."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from .utils.config import config_dir, print_config_tree
from .utils.errors import UserError, report_user_errors
from .utils.run_files import write_metrics
from .utils.validation import check_checkpoint_path, check_trainer_config


def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Load the model from its checkpoint (its own hyperparameters), test it, write metrics.json."""
    check_trainer_config(cfg.trainer)
    ckpt_path = check_checkpoint_path(cfg.get("ckpt_path"))
    if ckpt_path is None:
        raise UserError("eval needs a checkpoint: `python eval.py ckpt_path=PATH/TO/best.ckpt`.")
    output_dir = Path(cfg.paths.output_dir)
    print_config_tree(cfg, save_to=output_dir / "config_tree.log")

    from hydra.utils import get_class, instantiate

    from .utils.instantiate import instantiate_group
    from .utils.precision import set_float32_matmul_precision

    set_float32_matmul_precision(cfg.get("float32_matmul_precision"))
    model_class = get_class(cfg.model._target_)
    try:
        model = model_class.load_from_checkpoint(ckpt_path, map_location="cpu")
    except (KeyError, RuntimeError, TypeError) as error:
        raise UserError(
            f"{ckpt_path} is not a checkpoint of {model_class.__name__} ({type(error).__name__}: "
            f"{error}). Pass a checkpoint written by this project's train.py."
        ) from error
    datamodule = instantiate(cfg.data)
    callbacks = instantiate_group(cfg.get("callbacks"))
    loggers = instantiate_group(cfg.get("logger"))
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    trainer.test(model, datamodule=datamodule)
    metrics = dict(trainer.callback_metrics)
    if trainer.is_global_zero:
        write_metrics(metrics, output_dir / "metrics.json")
    return {key: float(value) for key, value in metrics.items()}


def main() -> None:
    import hydra

    @hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="eval")
    @report_user_errors
    def _main(cfg: DictConfig) -> None:
        evaluate(cfg)

    _main()


if __name__ == "__main__":
    main()
