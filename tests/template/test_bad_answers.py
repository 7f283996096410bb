"""Bad answers stop generation with a message saying what is accepted, and leave nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter

from .conftest import ROOT, run_cookiecutter_cli


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (
            {"project_name": "1st Project!"},
            "package_name='1st_project' is no Python package name (from the project name unless "
            "given): start with a lowercase letter",
        ),
        ({"package_name": "class"}, "package_name='class' is a Python keyword"),
        ({"package_name": "torch"}, "package_name='torch' is already a top-level module"),
        ({"package_name": "json"}, "package_name='json' is already a top-level module"),
        ({"package_name": "train"}, "package_name='train' is already a top-level module"),
        ({"package_name": "sklearn"}, "package_name='sklearn' is already a top-level module"),
        (
            {"project_name": "Scikit-learn"},
            "project_slug='scikit-learn' is the name of a package the project installs",
        ),
        ({"project_slug": "hydra-core"}, "project_slug='hydra-core' is the name of a package"),
        ({"package_name": "Acme-Vision"}, "e.g. 'acme_vision'"),
        (
            {"project_slug": "Acme Vision", "package_name": "acme_vision"},
            "project_slug='Acme Vision' is no folder name",
        ),
        ({"project_name": "!!!"}, "project_name='!!!' has no letters or digits"),
        (
            {"project_name": "Acme " * 16 + "X"},  # 81 characters; its folder and package too
            "project_name and project_slug and package_name are 81 and 81 and 81 characters "
            "long: at most 80 fit the project's lines",
        ),
        ({"devices": "two"}, "devices='two' is no device count: give 1, 2, ..."),
        ({"devices": "0"}, "-1 (every GPU) or auto"),
        ({"author_email": "nobody"}, "author_email='nobody' is no email address"),
        ({"description": "two\nlines"}, "description='two\\nlines' must be one line"),
        (
            {"accelerator": "mps", "devices": "2"},
            "accelerator=mps with devices=2: MPS is one device; choose devices=1.",
        ),
        (
            {"accelerator": "mps", "strategy": "ddp"},
            "accelerator=mps with strategy=ddp: Lightning has no DDP on MPS; choose auto.",
        ),
        (
            {"accelerator": "cpu", "devices": "-1"},
            "accelerator=cpu with devices=-1: -1 means every GPU; choose a number, e.g. 1.",
        ),
    ],
)
def test_bad_answer_stops_with_a_message_and_leaves_no_directory(
    tmp_path: Path, cc_config: Path, capfd: pytest.CaptureFixture[str], answers: dict, message: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(FailedHookException):
        cookiecutter(
            str(ROOT),
            no_input=True,
            extra_context=answers,
            output_dir=str(out),
            config_file=str(cc_config),
        )
    (line,) = capfd.readouterr().err.strip().splitlines()  # one line for one bad answer
    assert line.startswith("ERROR: ") and message in line
    assert list(out.iterdir()) == []


def test_several_bad_answers_are_reported_together(
    tmp_path: Path, cc_config: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(FailedHookException):
        cookiecutter(
            str(ROOT),
            no_input=True,
            extra_context={"package_name": "import", "devices": "many"},
            output_dir=str(tmp_path),
            config_file=str(cc_config),
        )
    first, second = capfd.readouterr().err.strip().splitlines()
    assert "package_name='import' is a Python keyword" in first and "devices='many'" in second


def test_an_answer_that_never_runs_is_one_line_on_the_command_line(
    tmp_path: Path, cc_config: Path
) -> None:
    """The hook's line is all of stderr. Cookiecutter (2.7) then logs its own traceback of
    the failed hook on stdout (`hooks.run_hook_from_repo_dir`: `logger.exception`), which no
    hook can silence: only code in cookiecutter's process could, and cruft cannot import a
    template's own Jinja extension."""
    out = tmp_path / "OUT"
    out.mkdir()
    result = run_cookiecutter_cli(str(ROOT), out, cc_config, "accelerator=mps", "devices=2")
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        "ERROR: accelerator=mps with devices=2: MPS is one device; choose devices=1."
    ]
    assert list(out.iterdir()) == []


def test_unknown_option_value_names_the_choices(tmp_path: Path, cc_config: Path) -> None:
    """Cookiecutter itself rejects a value outside a choice list, before anything is made and
    before any hook runs (`generate_context`, a ValueError and its traceback): the questions
    keep their choice lists, which interactive use shows as a menu that cannot be missed."""
    out = tmp_path / "OUT"
    result = run_cookiecutter_cli(str(ROOT), out, cc_config, "license=GPL-3.0")
    assert result.returncode != 0
    assert (
        "GPL-3.0 provided for choice variable license, but the choices are "
        "['MIT', 'Apache-2.0', 'BSD-3-Clause', 'proprietary']"
    ) in result.stderr
    assert not out.exists() or list(out.iterdir()) == []


def test_unknown_value_in_replayed_answers_is_caught_by_the_hook(gen, template) -> None:
    """Replays and hand-edited .cruft.json files skip cookiecutter's choice check."""
    from .expected import DEFAULTS

    with pytest.raises(gen.GenerationError) as err:
        gen.render(template, {**DEFAULTS, "strategy": "fsdp", "ci_workflow": "maybe"})
    assert "strategy='fsdp' is not an option: choose one of auto, ddp, dp." in str(err.value)
    assert "ci_workflow='maybe' is not yes or no: answer yes or no." in str(err.value)
