"""Secrets are masked in every file Hydra and wandb write and in every message: by their key's
name in structured data, and by value (from 3 characters) wherever else they occur."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from my_project.machinery.reliability import secrets
from my_project.machinery.reliability.secrets import MASK, MaskedStream, mask_secrets, mask_text

from .helpers import DOCS_STYLE, clean_env, run_entry, run_main_in_process

SEVEN = "Zq9Xy7Q"  # 7 characters: too short to count as a secret by its length alone


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("- +hf_token=Zq9", "- +hf_token=***"),
        ("{'api_key': 'Zq9', 'lr': 0.1}", "{'api_key': '***', 'lr': 0.1}"),
        (
            "Error executing job with overrides: ['+db.password=Zq9']",
            "Error executing job with overrides: ['+db.password=***']",
        ),
        ("hf_token: ${oc.env:HF_TOKEN}", "hf_token: ${oc.env:HF_TOKEN}"),
    ],
)
def test_a_secret_value_is_masked_wherever_it_occurs_in_text(text: str, masked: str) -> None:
    assert mask_text(text, {"Zq9"}) == masked


def test_structured_data_is_masked_by_key_and_stays_yaml() -> None:
    masked = mask_secrets(yaml.safe_load("hf_token: Zq9\nlr: 0.1\n"), set())
    assert yaml.safe_load(yaml.safe_dump(masked)) == {"hf_token": MASK, "lr": 0.1}


def test_stderr_is_masked_whoever_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_registered", {"Zq9"})
    sink = io.StringIO()
    MaskedStream(sink).write("overrides: ['+hf_token=Zq9', 'model.lr=0.1']\n")
    assert "Zq9" not in sink.getvalue() and "model.lr=0.1" in sink.getvalue()


@pytest.mark.slow
def test_a_seven_character_secret_appears_nowhere_in_clear(tmp_path: Path) -> None:
    """Hydra's record (`.hydra/*`), the config, the logs and wandb's offline run files."""
    run_dir = tmp_path / "run"
    result = run_entry(
        "train",
        *DOCS_STYLE,
        "trainer.max_epochs=1",
        "logger=default",
        f"+hf_token={SEVEN}",
        f"hydra.run.dir={run_dir}",
        env=clean_env(HOME=str(tmp_path / "home")),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert SEVEN not in result.stdout + result.stderr
    files = [path for path in run_dir.rglob("*") if path.is_file()]
    assert any(path.suffix == ".wandb" for path in files)
    leaks = [path for path in files if SEVEN.encode() in path.read_bytes()]
    assert leaks == []
    assert "+hf_token=***" in (run_dir / ".hydra" / "overrides.yaml").read_text()
    assert yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())["hf_token"] == MASK


def test_a_short_secret_is_masked_in_hydras_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 3-character value is masked too; the run stops at a check, in a directory that
    existed, which keeps Hydra's record of it."""
    run_dir = tmp_path / "existing"
    run_dir.mkdir()
    args = [*DOCS_STYLE, "+db.password=pw1", "data.batch_size=0", f"hydra.run.dir={run_dir}"]
    code, err = run_main_in_process("train", args, tmp_path / "logs", monkeypatch)
    assert code == 2 and "data.batch_size=0" in err
    assert "pw1" not in err
    for name in ("overrides.yaml", "hydra.yaml", "config.yaml"):
        assert "pw1" not in (run_dir / ".hydra" / name).read_text(), name
