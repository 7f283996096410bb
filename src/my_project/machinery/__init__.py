"""The template's machinery: everything a run needs besides the team's model and data.

Updated by `cruft update` (or `make update`); the team's rooms are `my_project.models` and
`my_project.data` (and configs/model, configs/data, configs/experiment). The machinery never
imports them: it gets the team's classes from the config (`_target_`), which
`import-linter` (pyproject.toml, `make lint`) enforces.

- `run/`: the entry points' flow, check → build → run → record (`train`, `evaluate`, `predict`);
- `preflight/`: every check of a run, before anything is written;
- `strategies/`: `dp`, DDP under Hydra, exact DDP evaluation;
- `callbacks/`: checkpoints, plots, progress bar, device guard, NaN stop, RNG state, wandb;
- `reliability/`: atomic checkpoints, resume, signals, secrets, run directories;
- `devices/`, `data/`, `loggers/`, `metrics.py`, `plotting.py`, `distributed.py`,
  `config.py`, `errors.py`: what those use; `lightning_compat.py`: every private name of
  Lightning they use (and its one patch);
- `bench.py`, `doctor.py`: the benchmark and the device report.
"""
