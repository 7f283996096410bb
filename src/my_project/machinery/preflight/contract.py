"""What the template asks of a team's LightningModule and LightningDataModule, checked.

The contract (README, "Bring your own model and data"):

- ``model._target_`` is a ``LightningModule``; ``data._target_`` a ``LightningDataModule`` with
  a ``train_dataloader`` (and a ``test_dataloader`` when the run tests).
- What a model needs from its data (classes, input shape, features, outputs) comes from its
  config (values or interpolations such as ``${data.num_classes}``) or from the data module's
  optional hook ``model_kwargs()``: a dict of keyword arguments it offers the model. The
  template passes those the model's ``__init__`` names and its config leaves unset; a model
  that asks for nothing gets nothing.

A module that does not fit gets one message naming what is missing, before anything runs.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    from lightning.pytorch import LightningModule

# The data module's optional hook: keyword arguments it offers the model's constructor.
MODEL_KWARGS_HOOK = "model_kwargs"
# Parameters that take a keyword argument (not `*args`, `**kwargs`).
_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def model_class(target: str) -> type[LightningModule]:
    """The class ``model._target_`` names, which must be a LightningModule."""
    from hydra.utils import get_class
    from lightning.pytorch import LightningModule

    try:
        cls = get_class(target)
    except Exception as error:  # ImportError, AttributeError, ValueError from Hydra's lookup
        raise UserError(
            f"model._target_={target} cannot be imported ({error}). Give the full dotted path of "
            "your LightningModule class, e.g. `my_project.models.classifier.ImageClassifier`, "
            "in configs/model/<name>.yaml."
        ) from error
    if not (inspect.isclass(cls) and issubclass(cls, LightningModule)):
        raise UserError(
            f"model._target_={target} is not a LightningModule subclass. The template trains, "
            "tests and predicts with a `lightning.LightningModule`; point `model._target_` at one."
        )
    return cls


def check_datamodule(datamodule: Any, target: str, fit: bool, test: bool) -> None:
    """The data module is a LightningDataModule with the loaders this run will ask for."""
    from lightning.pytorch import LightningDataModule
    from lightning.pytorch.utilities.model_helpers import is_overridden

    if not isinstance(datamodule, LightningDataModule):
        raise UserError(
            f"data._target_={target} builds a {type(datamodule).__name__}, not a "
            "LightningDataModule. Point `data._target_` at a `lightning.LightningDataModule` "
            "subclass (its train_dataloader, val_dataloader and test_dataloader give the data)."
        )
    needed = (["train_dataloader"] if fit else []) + (["test_dataloader"] if test else [])
    missing = [hook for hook in needed if not is_overridden(hook, datamodule)]
    if missing:
        switch = " (or run with `test=false`)" if missing == ["test_dataloader"] else ""
        raise UserError(
            f"{type(datamodule).__name__} (data._target_={target}) has no "
            f"{' and no '.join(missing)}, which this run needs. Add "
            f"{' and '.join(f'`def {hook}(self)`' for hook in missing)} returning a DataLoader"
            f"{switch}."
        )


def offered_model_kwargs(datamodule: Any) -> dict[str, Any]:
    """What the data module's ``model_kwargs()`` hook offers the model ({} without the hook)."""
    hook = getattr(datamodule, MODEL_KWARGS_HOOK, None)
    if hook is None:
        return {}
    offered = hook() if callable(hook) else hook
    if not isinstance(offered, Mapping):
        raise UserError(
            f"{type(datamodule).__name__}.{MODEL_KWARGS_HOOK}() returned a "
            f"{type(offered).__name__}; it must return a dict of keyword arguments for the "
            "model, e.g. `{'num_classes': 10, 'in_shape': (1, 28, 28)}`."
        )
    return dict(offered)


def constructor_parameters(cls: type) -> dict[str, inspect.Parameter]:
    """The named parameters of ``cls.__init__`` (not ``self``, ``*args`` or ``**kwargs``)."""
    parameters = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    return {n: p for n, p in list(parameters.items())[1:] if p.kind in _NAMED}


def forwarded_parameters(cls: type) -> dict[str, inspect.Parameter]:
    """The named parameters of the parents' ``__init__`` that ``cls.__init__`` passes its
    ``**kwargs`` on to: a subclass written ``def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)`` names none itself, yet its parent's arguments reach
    the parent through it. Followed up the MRO while each ``__init__`` takes ``**kwargs``,
    up to Lightning's and torch's own classes."""
    found: dict[str, inspect.Parameter] = {}
    forwards = False
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is None:
            continue
        if klass.__module__.split(".")[0] in ("lightning", "pytorch_lightning", "torch"):
            break
        parameters = list(inspect.signature(init).parameters.values())[1:]
        if forwards:
            found.update(
                {p.name: p for p in parameters if p.kind in _NAMED and p.name not in found}
            )
        forwards = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
        if not forwards:
            break
    return {n: p for n, p in found.items() if n not in constructor_parameters(cls)}


def arguments_from_data(cls: type, given: Iterable[str], offered: Mapping[str, Any]) -> dict:
    """What of the data's offer the model gets: the arguments its ``__init__`` names, or
    passes on to a parent through ``**kwargs``, that its config leaves unset."""
    wanted = {**constructor_parameters(cls), **forwarded_parameters(cls)}
    return {k: v for k, v in offered.items() if k in wanted and k not in set(given)}


def instantiate_model(model_cfg: Any, cls: type, extra: Mapping[str, Any], data_name: str) -> Any:
    """``instantiate(model_cfg, **extra)``, where a parent's argument the subclass sets itself
    (``super().__init__(num_classes=2, **kwargs)``) is not passed twice, and a parent's
    required argument nobody gave is one paragraph (the check before sees only the
    subclass's own parameters)."""
    import re

    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    extra = dict(extra)
    while True:
        try:
            return instantiate(model_cfg, **extra, _convert_="all")
        except InstantiationException as error:
            cause = error.__cause__
            message = str(cause) if isinstance(cause, TypeError) else ""
            twice = re.search(r"got multiple values for (?:keyword )?argument '(\w+)'", message)
            if twice and twice[1] in extra and twice[1] in forwarded_parameters(cls):
                del extra[twice[1]]  # the subclass sets it: the data's offer is not for it
                continue
            missing = re.findall(r"'(\w+)'", message) if "required" in message else []
            if not missing:
                raise
            raise UserError(
                f"{cls.__name__} needs {', '.join(f'`{n}`' for n in missing)} (an argument of "
                f"a parent class it passes its **kwargs to), which neither its config nor the "
                f"data ({data_name}) give. Set it in configs/model (e.g. `model.{missing[0]}=...`"
                f" on the command line), or return it from the data module's "
                f"`{MODEL_KWARGS_HOOK}()`."
            ) from error


def check_model_arguments(
    cls: type, given: Iterable[str], offered: Mapping[str, Any], data_name: str
) -> None:
    """Every required constructor argument of the model is set by the config or the data."""
    parameters = constructor_parameters(cls)
    known = set(given) | set(offered)
    missing = [name for name, p in parameters.items() if p.default is p.empty and name not in known]
    if not missing:
        return
    hook = (
        f"{data_name}.{MODEL_KWARGS_HOOK}() offers {', '.join(sorted(offered))}"
        if offered
        else f"{data_name} offers none (it has no {MODEL_KWARGS_HOOK}() hook)"
    )
    interpolation = "${data." + missing[0] + "}"
    raise UserError(
        f"{cls.__name__} needs {', '.join(f'`{name}`' for name in missing)}, which neither its "
        f"config nor the data give: {hook}. Set it in configs/model (e.g. "
        f"`{missing[0]}: {interpolation}` when the data config has that key, or "
        f"`model.{missing[0]}=...` on the command line), or return it from the data module's "
        f"`{MODEL_KWARGS_HOOK}()`."
    )


def check_model_fits_data(model: Any, datamodule: Any, data_name: str) -> None:
    """A model rebuilt from a checkpoint takes the data it is given (eval.py, predict.py):
    every value the data module offers that the model's hyperparameters also record agrees."""
    offered = offered_model_kwargs(datamodule)
    recorded = dict(getattr(model, "hparams", {}) or {})
    conflicts = [
        f"`{key}`: the model has {_plain(recorded[key])}, the data {_plain(value)}"
        for key, value in offered.items()
        if key in recorded and _plain(recorded[key]) != _plain(value)
    ]
    if conflicts:
        raise UserError(
            f"The checkpoint's model does not fit data={data_name}: {'; '.join(conflicts)}. Pass "
            "the data the model was trained on (the `data=` of its run), or a checkpoint trained "
            "on this data."
        )


def _plain(value: Any) -> Any:
    """Lists and tuples compare alike (a shape may be either)."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value
