"""`python readme_check.py <script>.py <overrides>`: the entry point as written, up to its checks.

The README's commands would each train for minutes; everything a command can get wrong on its
own (an option or key that does not exist, a value of the wrong type, devices this machine
lacks, a checkpoint path) is found before the run writes or trains anything, by
`preflight.check_config`. This wrapper runs the script as `__main__` (Hydra's command line,
`resume=`, the refusals) and exits 0 once those checks pass, printing `CHECKS PASSED`.
"""

from __future__ import annotations

import runpy
import sys
from typing import Any

from my_project.machinery import preflight

PASSED = "CHECKS PASSED"
_check_config = preflight.check_config


def _checks_only(cfg: Any, **kwargs: Any) -> None:
    _check_config(cfg, **kwargs)
    print(PASSED, flush=True)
    raise SystemExit(0)


if __name__ == "__main__":
    preflight.check_config = _checks_only  # type: ignore[assignment]
    del sys.argv[0]
    runpy.run_path(sys.argv[0], run_name="__main__")
