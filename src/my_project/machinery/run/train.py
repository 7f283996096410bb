"""Training: `python train.py [overrides]` (torch is imported inside :func:`train`)."""

from __future__ import annotations

from omegaconf import DictConfig

from ..reliability.resume import expand_resume_argument
from . import entry


def train(cfg: DictConfig) -> dict[str, float]:
    """Fit, then test the best checkpoint; return (and write) the final metrics. Callable on a
    config composed by code (a notebook, a test)."""
    from .. import preflight
    from . import build, execute, record
    from .direct_call import job_config

    entry.register()
    cfg = job_config(cfg)
    ckpt_path = preflight.check_config(cfg)  # check: nothing is written before this passes
    job = build.training_job(cfg, ckpt_path)  # build: data, model, callbacks, loggers, Trainer
    record.start(job)  # record what runs
    metrics = execute.fit_and_test(job, fit=cfg.get("train", True), test=cfg.get("test", True))
    values = record.finish(job, metrics)  # record what came out
    record.next_steps(job)  # and say what to do with it
    return values


def train_job(cfg: DictConfig) -> float | None:
    """One Hydra job: train, end its wandb run, return the metric a sweeper optimises."""
    from ..loggers.wandb import finish_wandb_run

    try:
        metrics = train(cfg)
    except BaseException:
        finish_wandb_run(failed=True)
        raise
    finish_wandb_run()
    objective = cfg.get("optimized_metric")  # for Hydra sweepers (Optuna)
    return metrics.get(objective) if objective else None


def main() -> None:
    """Console-script entry point: compose the config with Hydra and train."""
    entry.main("train", train_job, argv=expand_resume_argument)


if __name__ == "__main__":
    main()
