"""The one place every entry point passes through: registrations, Hydra, clear errors.

`python train.py`, `eval.py`, `predict.py` (and their console scripts) call :func:`main`:
it composes the config with Hydra and runs the task (train, evaluate, predict), turning a
:class:`~..errors.UserError` into one paragraph and exit status 2. Each task begins with
:func:`register`, so the names the configs and the Trainer look up resolve however the task
is called (from the command line, a test, a notebook).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from omegaconf import DictConfig

from ..config import config_dir
from ..errors import report_user_errors
from ..reliability.run_dir import register_resolvers


def register() -> None:
    """Make the names the configs and the Trainer use resolvable (idempotent).

    - ``${unique_dir:...}`` in configs/hydra (the run directory);
    - ``trainer.strategy=dp`` and the Hydra-aware ``ddp`` in Lightning's StrategyRegistry.
    """
    register_resolvers()
    from ..strategies.registry import register_strategies

    register_strategies()


def main(
    config_name: str,
    task: Callable[[DictConfig], Any],
    argv: Callable[[Sequence[str]], list[str]] | None = None,
) -> None:
    """Compose ``configs/<config_name>.yaml`` with the command line's overrides; run ``task``.

    ``argv`` rewrites the command line first (train.py's ``resume=RUN_DIR``).
    """
    import hydra

    register_resolvers()  # before Hydra resolves the run directory
    if argv is not None:
        sys.argv[1:] = report_user_errors(argv)(sys.argv[1:])

    hydra.main(version_base="1.3", config_path=str(config_dir()), config_name=config_name)(
        report_user_errors(task)
    )()


# Hydra launchers that run jobs in other processes (submitit) unpickle the task function,
# which imports this module there: the resolvers must exist before they resolve the job's
# run directory.
register_resolvers()
