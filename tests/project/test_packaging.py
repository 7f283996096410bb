"""The project as a package: a wheel that carries its configs and trains anywhere."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ..machinery.helpers import CONFIG_DIR, ON_CPU, ROOT, clean_env


@pytest.mark.slow
def test_wheel_carries_the_configs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    """A plain (non-editable) install finds its configs without the repository, and trains the
    project's defaults (the example's, or the team's own module made the default)."""
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    if build.returncode != 0 and "hatchling" in build.stderr:
        pytest.skip("hatchling is not installed in this environment")
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(tmp_path.glob("*.whl"))
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(site)
    package = next(n.split("/")[0] for n in names if n.endswith("/configs/train.yaml"))
    # every config of the project, whichever model and data it makes the defaults
    configs = {f"{package}/configs/{p.relative_to(CONFIG_DIR)}" for p in CONFIG_DIR.rglob("*.yaml")}
    assert len(configs) > 10 and configs <= set(names), sorted(configs - set(names))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            f"{package}.machinery.run.train",
            *ON_CPU,
            "debug=fdr",
            f"hydra.run.dir={elsewhere / 'run'}",
        ],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env=clean_env(PYTHONPATH=str(site)),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        f"{site}" in result.stdout + result.stderr or (elsewhere / "run" / "metrics.json").is_file()
    )
