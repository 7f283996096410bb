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
            "package_name='1st_project' (derived from the project name unless given) is not a "
            "valid Python package name: it must start with a lowercase letter",
        ),
        ({"package_name": "class"}, "package_name='class' is a Python keyword"),
        ({"package_name": "torch"}, "package_name='torch' is already a top-level module"),
        ({"package_name": "json"}, "package_name='json' is already a top-level module"),
        ({"package_name": "train"}, "package_name='train' is already a top-level module"),
        ({"package_name": "Acme-Vision"}, "e.g. 'acme_vision'"),
        ({"project_slug": "Acme Vision"}, "project_slug='Acme Vision'"),
        ({"project_name": "!!!"}, "project_name='!!!' has no letters or digits"),
        ({"devices": "two"}, "devices='two' is not a device count: use a positive whole number"),
        ({"devices": "0"}, "-1 for all devices, or auto"),
        ({"author_email": "nobody"}, "author_email='nobody' is not an email address"),
        ({"description": "two\nlines"}, "description='two\\nlines' must be one line"),
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
    assert message in capfd.readouterr().err
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
    err = capfd.readouterr().err
    assert "package_name='import' is a Python keyword" in err and "devices='many'" in err


def test_bad_package_name_on_the_command_line_exits_nonzero_and_leaves_out_empty(
    tmp_path: Path, cc_config: Path
) -> None:
    out = tmp_path / "OUT"
    out.mkdir()
    result = run_cookiecutter_cli(str(ROOT), out, cc_config, "package_name=lambda")
    assert result.returncode != 0
    assert "package_name='lambda' is a Python keyword" in result.stderr
    assert list(out.iterdir()) == []


def test_unknown_option_value_names_the_choices(tmp_path: Path, cc_config: Path) -> None:
    """Cookiecutter itself rejects a value outside a choice list, before anything is made."""
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
    assert "ci_workflow='maybe' is not a yes/no answer" in str(err.value)


def test_dependencies_named_in_pyproject_are_reserved(gen) -> None:
    pyproject = (
        '[project]\nname = "x"\ndependencies = [\n    "torch>=2.3",\n    "scikit-learn>=1.3",\n]\n'
        '[project.optional-dependencies]\nextra = ["optuna-dashboard[x]>=0.1"]\n'
        '[tool.pytest.ini_options]\nmarkers = [\n    "slow: long",\n]\n'
    )
    assert gen._dependency_names(pyproject) == {"torch", "sklearn", "optuna_dashboard"}
