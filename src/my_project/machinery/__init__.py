"""The template's machinery: everything a run needs besides the team's model and data.

Updated by `cruft update`; the team's rooms are `my_project.models` and `my_project.data`,
which the machinery never imports (it gets the team's classes from `_target_`; `make lint`).

- `run/`: the entry points' flow, check → build → run → record (`train`, `evaluate`, `predict`);
- `preflight/`: every check of a run, before anything is written;
- `strategies/`: `dp`, DDP under Hydra, exact DDP evaluation;
- `callbacks/`: checkpoints, plots, progress bar, device guard, NaN stop, RNG state, wandb;
- `reliability/`: atomic checkpoints, resume, requeued jobs, signals, secrets, run directories;
- `devices/`, `data/`, `loggers/` and the modules here: what those use (`lightning_compat.py`
  and `hydra_compat.py`: every private name of Lightning and Hydra they use; `fault.py`: whose
  fault an exception is, the team's bug or a value refused);
- `bench.py`, `doctor.py`: the benchmark and the device report.
"""
