"""The Optuna sweeper's search space: Hydra's sweep syntax in, overrides Hydra reads back out."""

from __future__ import annotations

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from hydra_plugins.my_project_optuna.sweeper import search_space


def parsed_values(overrides: list[str]) -> dict[str, object]:
    """What Hydra makes of overrides: key -> value."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    return {o.get_key_element(): o.value() for o in parsed}


def test_sweep_syntax_becomes_optuna_distributions_and_plain_values_stay_fixed() -> None:
    space = search_space(
        {
            "model.lr": "tag(log, interval(0.0003, 0.03))",
            "model.optimizer.weight_decay": "interval(0, 0.1)",
            "data.batch_size": "choice(32, 64, 128)",
            "model/net": "mlp,cnn",
            "width": "range(32, 257, 32)",  # Hydra's range: 32, 64, ..., 256
            "layers": "tag(log, int(interval(1, 8)))",
            "trainer.max_epochs": 3,
        },
        [],
    )
    assert space.distributions == {
        "model.lr": FloatDistribution(0.0003, 0.03, log=True),
        "model.optimizer.weight_decay": FloatDistribution(0.0, 0.1),
        "data.batch_size": CategoricalDistribution([32, 64, 128]),
        "model/net": CategoricalDistribution(["mlp", "cnn"]),
        "width": CategoricalDistribution(list(range(32, 257, 32))),
        "layers": IntDistribution(1, 8, log=True),
    }
    assert space.fixed == ["trainer.max_epochs=3"]


def test_command_line_overrides_replace_the_search_configs_params() -> None:
    space = search_space(
        {"model.lr": "interval(0.001, 0.1)", "width": "choice(32, 64)"},
        ["model.lr=0.01", "width=choice(8,16)", "logger=csv", "hparams_search=mlp"],
    )
    assert set(space.distributions) == {"width"}
    assert space.distributions["width"] == CategoricalDistribution([8, 16])
    assert space.fixed == ["model.lr=0.01", "logger=csv", "hparams_search=mlp"]


def test_sampled_values_are_written_as_overrides_hydra_reads_back_unchanged() -> None:
    space = search_space(
        {
            "name": "choice('two words', adam, true, [1, 2])",
            "lr": "tag(log, interval(1e-7, 1.0))",
            "depth": "int(interval(1, 5))",
        },
        ["+extra=choice(a, b)"],
    )
    choices = space.distributions["name"]
    assert isinstance(choices, CategoricalDistribution)
    for choice, expected in zip(choices.choices, ["two words", "adam", True, [1, 2]], strict=True):
        sampled = {"name": choice, "lr": 1e-07, "depth": 3, "+extra": "b"}
        assert parsed_values(space.overrides(sampled)) == {
            "name": expected,
            "lr": 1e-07,
            "depth": 3,
            "+extra": "b",
        }


@pytest.mark.parametrize("bad", ["range(5, 1)", "range(0.5, 0.1, 0.1)"])
def test_a_sweep_that_offers_no_value_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="no value"):
        search_space({"width": bad}, [])
