"""Whose fault: the rule of `run/boundary.py`, on exceptions raised by code that is the team's
(this file: not the machinery, not an installed library). Each case is an exception as a build
would meet it, and the values of the run it was built with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from my_project.machinery.fault import is_teams_file, teams_bug


def raised(func: Any, *args: Any, **kwargs: Any) -> BaseException:
    """What ``func(*args, **kwargs)`` raises, its traceback from ``func`` down: as the machinery,
    calling the team's ``func`` (Hydra's ``instantiate``), would catch it."""
    with pytest.raises(Exception) as info:
        func(*args, **kwargs)
    error = info.value
    assert error.__traceback__ is not None
    return error.with_traceback(error.__traceback__.tb_next)  # without this test's own frame


def index_a_short_network(hidden: int) -> None:
    net = nn.Sequential(nn.Linear(4, hidden), nn.ReLU())
    net[5]  # a literal index: the team's bug, whatever the run's values)


def build_layer(num_features: int, hidden: int) -> nn.Module:
    return nn.Linear(num_features, hidden)


def own_check(hidden: int) -> None:
    if hidden > 64:
        raise ValueError(f"hidden={hidden} is more than this model can take")


def not_written_yet(hidden: int) -> None:
    raise NotImplementedError


def a_size_of_the_teams_own(hidden: int) -> nn.Module:
    layers: list[nn.Module] = []
    return nn.Linear(4, len(layers) - 1)  # nothing of the run makes it negative


def make_folder(data_dir: str) -> None:
    root = Path(data_dir) / "digits"
    root.mkdir(parents=True, exist_ok=True)


def misspelt_keyword(hidden: int) -> nn.Module:
    return nn.Linear(4, hidden, bais=False)  # type: ignore[call-arg]


def passes_its_settings_on(**settings: Any) -> nn.Module:
    return nn.Linear(4, 8, **settings)


def leaves_an_argument_out(hidden: int) -> nn.Module:
    return nn.Linear(hidden)  # type: ignore[call-arg]


def test_a_library_that_refuses_what_it_was_handed_is_a_value_refused() -> None:
    """No frame of the team's code: the machinery handed torch the config's value."""
    error = raised(eval, "torch.nn.Linear(4, -5)", {"torch": torch})
    assert not is_teams_file(torch.__file__) and teams_bug(error, [-5]) is None


def test_the_teams_code_handing_a_value_of_the_run_to_torch_is_a_value_refused() -> None:
    assert teams_bug(raised(build_layer, 16, -5), [16, -5]) is None


def test_a_literal_index_torch_refuses_is_the_teams_bug_even_when_a_value_is_alike() -> None:
    error = raised(index_a_short_network, 5)
    assert isinstance(error, IndexError)
    assert teams_bug(error, [5]) is error


def test_the_teams_own_raise_about_its_arguments_is_a_value_refused() -> None:
    assert teams_bug(raised(own_check, 65), [65]) is None
    error = raised(not_written_yet, 65)
    assert teams_bug(error, [65]) is error


def test_a_value_the_teams_code_makes_of_nothing_the_run_gave_is_its_bug() -> None:
    """What torch refuses is a size the team's code counted, from nothing the run gave."""
    error = raised(a_size_of_the_teams_own, 32)
    assert teams_bug(error, [32]) is error


def test_a_folder_under_the_runs_path_that_cannot_be_made_is_a_value_refused(
    tmp_path: Path,
) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder\n")
    error = raised(make_folder, str(a_file))
    assert isinstance(error, NotADirectoryError)
    assert teams_bug(error, [str(a_file)]) is None


def test_a_misspelt_keyword_is_the_teams_bug_unless_the_config_passed_it_on() -> None:
    error = raised(misspelt_keyword, 8)
    assert teams_bug(error, [8], keys={"hidden"}) is error
    passed_on = raised(passes_its_settings_on, bais=False)
    assert teams_bug(passed_on, [False], keys={"bais"}) is None
    left_out = raised(leaves_an_argument_out, 8)
    assert teams_bug(left_out, [8], keys={"hidden"}) is left_out


def test_the_teams_error_behind_a_librarys_wrapper_is_what_is_shown(tmp_path: Path) -> None:
    """Hydra's lookup wraps what the team's module raises as it is imported (an ImportError
    `from` it): the team's own exception comes out, with its line."""
    from hydra.utils import get_class

    (tmp_path / "team_typo.py").write_text("import torch\nLAYER = torch.nn.Lineer(2, 2)\n")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.syspath_prepend(str(tmp_path))
        error = raised(get_class, "team_typo.Model")
    bug = teams_bug(error)
    assert isinstance(error, ImportError) and isinstance(bug, AttributeError)
    assert bug.__traceback__ is not None
    frames = [f.filename for f in __import__("traceback").extract_tb(bug.__traceback__)]
    assert str(tmp_path / "team_typo.py") in frames
