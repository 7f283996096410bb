"""Bad input: one paragraph saying what was wrong and what to do, a non-zero exit, no traceback,
and nothing written over an existing run.

Most cases call `train()` in this process (the same code path as the CLI after Hydra, without
paying for a new Python with torch each time); one goes through the real command line.
An unknown config option is Hydra's own message, tested in test_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from my_project.machinery.errors import UserError, report_user_errors
from my_project.machinery.preflight.values import check_config_types
from my_project.machinery.run.train import train

from .helpers import DOCS_STYLE, FAST, compose_config, run_entry


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("data.batch_size=abc", "`data.batch_size='abc'` must be an integer, not str"),
        ("model.lr=fast", "`model.lr='fast'` must be a number, not str"),
        ("model.hidden=[5]", "`model.hidden=[5]` must be an integer, not list"),
        ("data.num_features=1.5", "`data.num_features=1.5` must be an integer, not float"),
        (  # the key typed, not the settings that take it as ${oc.select:seed,...}
            "seed=abc",
            "`seed='abc'` must be an integer or null, not str (callbacks.resumable_loader.seed",
        ),
    ],
)
def test_wrong_types_name_the_key_and_the_expected_type(
    tmp_path: Path, override: str, expected: str
) -> None:
    """For any class a config builds: here a team's own module and data module."""
    cfg = compose_config([*DOCS_STYLE, override], tmp_path)
    with pytest.raises(UserError, match="Wrong type in the config") as info:
        check_config_types(cfg)
    assert expected in str(info.value)


@pytest.fixture
def different_model_checkpoint(tmp_path: Path) -> Path:
    """A checkpoint of a wider network than the config builds (hidden 48 instead of 32)."""
    cfg = compose_config([*DOCS_STYLE, "model.hidden=48"], tmp_path)
    model = instantiate(cfg.model)
    path = tmp_path / "wide.ckpt"
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams)}, path)
    return path


def train_in_process(overrides: list[str], output_dir: Path, capsys) -> tuple[int, str]:
    """`python train.py <overrides>` minus the new process: exit status and stderr."""
    cfg = compose_config(overrides, output_dir)
    with pytest.raises(SystemExit) as info:
        report_user_errors(train)(cfg)
    return int(info.value.code), capsys.readouterr().err


def test_checkpoint_of_a_different_model_is_named_as_such(
    different_model_checkpoint: Path, tmp_path: Path, capsys
) -> None:
    code, err = train_in_process(
        [*DOCS_STYLE, *FAST, f"ckpt_path={different_model_checkpoint}"], tmp_path, capsys
    )
    assert code == 2
    assert "is a checkpoint of a different model" in err
    assert "net.0.weight has shape (48, 16), the model needs (32, 16)" in err
    assert "resume=" in err


def test_truncated_checkpoint_is_reported_as_unreadable(
    different_model_checkpoint: Path, tmp_path: Path, capsys
) -> None:
    data = different_model_checkpoint.read_bytes()
    different_model_checkpoint.write_bytes(data[: len(data) // 2])
    code, err = train_in_process(
        [*DOCS_STYLE, *FAST, f"ckpt_path={different_model_checkpoint}"], tmp_path, capsys
    )
    assert code == 2 and "cannot be read as a checkpoint" in err and "truncated" in err


def test_error_raised_inside_a_constructor_hydra_builds_is_shown_plainly(
    tmp_path: Path, capsys
) -> None:
    """Hydra's `instantiate` wraps what a data module's constructor raises; the user still
    gets the one-paragraph message, not "Error in call to target ..." and a repr."""
    overrides = [*DOCS_STYLE, *FAST, "data=toy_in_memory", "data.num_samples=0"]
    code, err = train_in_process(overrides, tmp_path, capsys)
    assert code == 2
    assert "data.num_samples=0: expected a count" in err
    assert "Error in call to target" not in err and "UserError(" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_gpu_accelerator_on_a_machine_without_one(tmp_path: Path, capsys) -> None:
    # (The devices/strategies checks word this one too; either message names both points.)
    code, err = train_in_process([*DOCS_STYLE, "trainer.accelerator=gpu"], tmp_path, capsys)
    assert code == 2
    assert "trainer.accelerator" in err and "GPU" in err and "`trainer=cpu`" in err


@pytest.mark.slow
def test_batch_larger_than_the_data_set_leaves_an_existing_run_untouched(tmp_path: Path) -> None:
    run_dir = tmp_path / "existing_run"
    (run_dir / "checkpoints").mkdir(parents=True)
    kept = {"config.yaml": "earlier run\n", "checkpoints/last.ckpt": "earlier weights"}
    for name, text in kept.items():
        (run_dir / name).write_text(text)
    result = run_entry(
        "train", *DOCS_STYLE, *FAST, "data.batch_size=5000", f"hydra.run.dir={run_dir}"
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    # A new run into a directory that holds one is refused first (test_run_dirs.py); the batch
    # size is refused in the table of bad input (tests/project/test_bad_input_table.py).
    assert f"{run_dir} holds a run already (checkpoints)" in result.stderr
    for name, text in kept.items():
        assert (run_dir / name).read_text() == text
    assert not (run_dir / "metrics.json").exists()


def test_an_interpolation_the_data_config_cannot_answer_is_one_paragraph_and_no_run_dir(
    tmp_path: Path,
) -> None:
    """The model config takes `num_features: ${data.num_features}`; data without that key."""
    run_dir = tmp_path / "run"
    result = run_entry(
        "train", *DOCS_STYLE, *FAST, "~data.num_features", f"hydra.run.dir={run_dir}"
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert (
        "Error: model.num_features cannot be resolved: Interpolation key 'data.num_features' "
        "not found."
    ) in " ".join(result.stderr.split())
    assert not run_dir.exists()


@pytest.mark.parametrize("devices", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_monitor_the_validation_does_not_log_stops_before_training(
    tmp_path: Path, devices: int
) -> None:
    """The default `monitor=val/acc` with a module that logs `val_acc`: the likeliest slip of
    a team's first run. Lightning would train a whole epoch first, then raise; here the sanity
    check's validation shows it, before one training step, and the run leaves no directory."""
    run_dir = tmp_path / "run"
    result = run_entry(
        "train",
        *DOCS_STYLE,
        *FAST,
        "monitor=val/acc",
        f"trainer.devices={devices}",
        f"hydra.run.dir={run_dir}",
        timeout=300,
    )
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    message = " ".join(result.stderr.split())
    assert "`monitor=val/acc` (ModelCheckpoint) names a validation metric the module" in message
    assert "its validation logs val_acc, val_loss." in message
    assert "`monitor=val_acc` on the command line" in message
    assert not run_dir.exists()  # nothing trained, nothing kept: what the run wrote is gone


def _teams_hydra_callback_with_a_bug() -> None:
    raise RuntimeError("a bug in the team's own Hydra callback")


def test_a_bug_in_the_teams_code_before_the_job_keeps_its_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before the job (a Hydra callback, a resolver of the team's) a bad value is one paragraph,
    exit 2, but the team's own bug is Hydra's report with its file and line, exit 1."""
    import hydra._internal.utils as hydra_utils

    from my_project.machinery.run.hydra_errors import hydra_errors_as_user_errors

    with hydra_errors_as_user_errors(), pytest.raises(SystemExit) as exited:
        hydra_utils.run_and_report(_teams_hydra_callback_with_a_bug)
    assert exited.value.code == 1
    stderr = capsys.readouterr().err
    assert "test_bad_input.py" in stderr and "RuntimeError: a bug in the team's" in stderr
