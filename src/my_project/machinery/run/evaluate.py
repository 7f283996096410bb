"""Evaluation: `python eval.py ckpt_path=PATH` tests a checkpoint on the test split."""

from __future__ import annotations

from omegaconf import DictConfig

from . import entry
from .checkpoint_config import use_checkpoint_run


def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Load the model from its checkpoint (its own hyperparameters), test it, write metrics.json."""
    from .. import preflight
    from . import build, execute, record

    entry.register()
    ckpt_path = preflight.check_config(cfg, checkpoint_required=True)  # check
    assert ckpt_path is not None
    use_checkpoint_run(cfg, ckpt_path)  # its model and data, unless the command names them
    job = build.evaluation_job(cfg, ckpt_path)  # build
    record.start(job, save_config=False)  # record what runs
    metrics = execute.test(job)  # run
    return record.finish(job, metrics, run_info=False)  # record what came out


def main() -> None:
    """Console-script entry point: compose the config with Hydra and evaluate."""
    entry.main("eval", evaluate)


if __name__ == "__main__":
    main()
