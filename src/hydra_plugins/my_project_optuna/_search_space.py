"""Hydra's sweep syntax as an Optuna search space, and sampled values back as overrides.

The syntax is the one `hydra.sweeper.params` and the command line share (Hydra's override
grammar): ``interval(low, high)`` (float; ``int(interval(...))`` for integers) and
``tag(log, interval(...))`` (log scale); any other sweep (``choice(a, b)``, ``a,b``,
``range(...)``) is categorical. Anything else is a value every trial gets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import IntervalSweep, Transformer

if TYPE_CHECKING:
    from hydra.core.config_loader import ConfigLoader
    from optuna.distributions import BaseDistribution

# The values Optuna can hold in a categorical distribution; other choices (lists, dicts)
# are kept as their override text.
_PLAIN = (str, int, float, bool)


@dataclass
class SearchSpace:
    """What each trial samples, what every trial gets as is, and how to write both back."""

    distributions: dict[str, BaseDistribution] = field(default_factory=dict)
    fixed: list[str] = field(default_factory=list)  # overrides every trial gets unchanged
    # For categorical parameters: each value Optuna holds -> the override text of the choice.
    choice_texts: dict[str, dict[Any, str]] = field(default_factory=dict)

    def overrides(self, params: Mapping[str, Any]) -> list[str]:
        """The job's overrides: the fixed ones, then ``key=value`` for each sampled value (a
        choice's text; an int or a float as its repr, which round-trips: 1e-05, 0.0123)."""
        texts = self.choice_texts
        sampled = [f"{k}={texts[k][v] if k in texts else repr(v)}" for k, v in params.items()]
        return [*self.fixed, *sampled]


def search_space(
    params: Mapping[str, Any] | None,
    arguments: Iterable[str],
    config_loader: ConfigLoader | None = None,
) -> SearchSpace:
    """The space of ``hydra.sweeper.params`` and the command line's overrides: one of the
    command line replaces a parameter of the same key (``model.lr=0.01`` fixes the learning
    rate a search config samples; ``model.lr=interval(0.001,0.1)`` changes its range)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    parser = OverridesParser.create(config_loader=config_loader)
    lines = {key: f"{key}={value}" for key, value in (params or {}).items()}
    for override in parser.parse_overrides(list(arguments)):
        lines.pop(override.get_key_element(), None)  # last, in the command line's order
        lines[override.get_key_element()] = override.input_line or ""
    space = SearchSpace()
    for override in parser.parse_overrides(list(lines.values())):
        key, value = override.get_key_element(), override.value()
        if not override.is_sweep_override():
            space.fixed.append(override.input_line or "")
        elif isinstance(value, IntervalSweep):
            assert value.start is not None and value.end is not None
            log = "log" in value.tags
            if isinstance(value.start, int) and isinstance(value.end, int):
                space.distributions[key] = IntDistribution(value.start, value.end, log=log)
            else:
                space.distributions[key] = FloatDistribution(value.start, value.end, log=log)
        else:  # choice(...), a,b,c, range(...), glob(...)
            texts: dict[Any, str] = {}
            for element in override.sweep_iterator():
                held = element if isinstance(element, _PLAIN) else Transformer.str(element)
                texts[held] = Transformer.str(element)
            if not texts:
                raise ValueError(f"{override.input_line} offers no value to choose from")
            space.distributions[key] = CategoricalDistribution(list(texts))
            space.choice_texts[key] = texts
    return space
