"""Secrets are masked by their key's name whatever their length, in every file Hydra and
wandb write and in every message; an unsupported key under `logger.wandb` never echoes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from my_project.machinery.reliability.secrets import MASK, MaskedStream, mask_text

from .helpers import DOCS_STYLE, clean_env, run_entry, run_main_in_process

SEVEN = "Zq9Xy7Q"  # 7 characters: too short to count as a secret by its length alone


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("- +hf_token=Zq9", "- +hf_token=***"),
        ("hf_token: Zq9", "hf_token: '***'"),
        ("{'api_key': 'abc', 'lr': 0.1}", "{'api_key': '***', 'lr': 0.1}"),
        (
            "override_dirname: +hf_token=Zq9,logger=default",
            "override_dirname: +hf_token=***,logger=default",
        ),
        (
            "Error executing job with overrides: ['+db.password=pw1']",
            "Error executing job with overrides: ['+db.password=***']",
        ),
        ("hf_token: ${oc.env:HF_TOKEN}", "hf_token: ${oc.env:HF_TOKEN}"),
        ("max_tokens: 5 tokenizer=bert", "max_tokens: 5 tokenizer=bert"),
    ],
)
def test_values_are_masked_where_a_secret_key_names_them(text: str, masked: str) -> None:
    assert mask_text(text, set()) == masked


def test_masked_yaml_stays_yaml() -> None:
    assert yaml.safe_load(mask_text("hf_token: Zq9\nlr: 0.1\n", set())) == {
        "hf_token": MASK,
        "lr": 0.1,
    }


def test_stderr_is_masked_whoever_writes() -> None:
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


def test_a_short_secret_is_masked_in_hydras_record_by_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 3-character value is masked where its key names it (not elsewhere: it could be any
    word); the run stops at a check, in a directory that existed, which keeps the record."""
    run_dir = tmp_path / "existing"
    run_dir.mkdir()
    args = [*DOCS_STYLE, "+db.password=pw1", "data.batch_size=0", f"hydra.run.dir={run_dir}"]
    code, err = run_main_in_process("train", args, tmp_path / "logs", monkeypatch)
    assert code == 2 and "data.batch_size=0" in err
    assert "pw1" not in err
    for name in ("overrides.yaml", "hydra.yaml", "config.yaml"):
        assert "pw1" not in (run_dir / ".hydra" / name).read_text(), name
