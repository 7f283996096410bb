"""Secrets never reach the screen or the run directory; no network never hangs a run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from my_project.machinery.reliability.secrets import looks_secret, mask_secrets

from .helpers import DOCS_STYLE, clean_env, run_entry

FAKE_KEY = "fakekey" + "0123456789abcdef" * 2 + "0123"  # 40 characters, like a real one
FAKE_TOKEN = "tok_only_in_this_test_31415926"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("WANDB_API_KEY", True),
        ("HF_TOKEN", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("dbPassword", True),
        ("credentials", True),
        ("api_key", True),
        ("max_tokens", False),
        ("key_dim", False),
        ("tokenizer", False),
        ("PWD", False),
        ("monitor", False),
    ],
)
def test_secret_looking_names(name: str, secret: bool) -> None:
    assert looks_secret(name) is secret


def test_masking_by_key_name_and_by_value() -> None:
    data = {"logger": {"api_key": "abc", "name": "run"}, "note": f"x{FAKE_KEY}y", "n": [1, None]}
    assert mask_secrets(data, {FAKE_KEY}) == {
        "logger": {"api_key": "***", "name": "run"},
        "note": "x***y",
        "n": [1, None],
    }


@pytest.mark.slow
def test_api_key_without_network_goes_offline_fast_and_secrets_appear_nowhere(
    tmp_path: Path,
) -> None:
    """A key is set but the wandb server cannot be reached (port 9 on loopback refuses at once,
    as an offline machine does): wandb alone retries ~100 s then fails the run."""
    home = tmp_path / "home"
    home.mkdir()
    run_dir = tmp_path / "run"
    started = time.monotonic()
    result = run_entry(
        "train",
        *DOCS_STYLE,
        "trainer.max_epochs=1",
        "logger=default",
        f"+extra.api_token={FAKE_TOKEN}",
        f"hydra.run.dir={run_dir}",
        env=clean_env(HOME=str(home), WANDB_API_KEY=FAKE_KEY, WANDB_BASE_URL="http://127.0.0.1:9"),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert time.monotonic() - started < 90
    output = result.stdout + result.stderr
    assert "http://127.0.0.1:9 cannot be reached" in output and "wandb sync" in output
    assert any((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    for secret in (FAKE_KEY, FAKE_TOKEN):
        assert secret not in output
        leaks = [p for p in run_dir.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
        assert leaks == [], f"{secret} found in {leaks}"
    assert "api_token: '***'" in (run_dir / "config.yaml").read_text()
    assert "+extra.api_token=***" in (run_dir / ".hydra" / "overrides.yaml").read_text()
