"""What the template asks of a team's LightningModule and LightningDataModule, checked.

``model._target_`` is a ``LightningModule``; ``data._target_`` a ``LightningDataModule`` with the
loaders the run uses. What a model needs from its data (classes, input shape) comes from its
config (``${data.num_classes}``) or from the data module's optional hook ``model_kwargs()``: a
dict passed on as far as the model's ``__init__`` (or its parents', through ``**kwargs``) takes
them and its config leaves them unset.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import UserError


def model_class(target: str) -> Any:
    """The class ``model._target_`` names, which must be a LightningModule."""
    from hydra.utils import get_class
    from lightning.pytorch import LightningModule

    from ..fault import teams_bug

    try:
        cls = get_class(target)
    except Exception as error:  # ImportError, AttributeError, ValueError from Hydra's lookup
        if (bug := teams_bug(error)) is not None:  # the team's module fails as it is imported
            raise bug from None
        raise UserError(
            f"model._target_={target} cannot be imported ({' '.join(str(error).split())}). Give "
            "the full dotted path of your LightningModule class."
        ) from error
    if not (inspect.isclass(cls) and issubclass(cls, LightningModule)):
        raise UserError(
            f"model._target_={target} is not a LightningModule subclass; point it at one."
        )
    return cls


def check_datamodule(datamodule: Any, target: str, fit: bool, test: bool) -> None:
    """The data module is a LightningDataModule with the loaders this run will ask for."""
    from lightning.pytorch import LightningDataModule
    from lightning.pytorch.utilities.model_helpers import is_overridden

    if not isinstance(datamodule, LightningDataModule):
        raise UserError(
            f"data._target_={target} builds a {type(datamodule).__name__}, not a "
            "LightningDataModule; point it at a `lightning.LightningDataModule` subclass."
        )
    needed = (["train_dataloader"] if fit else []) + (["test_dataloader"] if test else [])
    missing = [hook for hook in needed if not is_overridden(hook, datamodule)]
    if missing:
        raise UserError(
            f"{type(datamodule).__name__} (data._target_={target}) has no "
            f"{' and no '.join(missing)}, which this run needs: add it, or run with "
            "`train=false` or `test=false`."
        )


def offered_model_kwargs(datamodule: Any) -> dict[str, Any]:
    """What the data module's ``model_kwargs()`` hook offers the model ({} without the hook)."""
    hook = getattr(datamodule, "model_kwargs", None)
    offered = (hook() if callable(hook) else hook) if hook is not None else {}
    if not isinstance(offered, Mapping):
        raise UserError(
            f"{type(datamodule).__name__}.model_kwargs() returned a {type(offered).__name__}; it "
            "must return a dict of keyword arguments for the model, e.g. `{'num_classes': 10}`."
        )
    return dict(offered)


def accepted_parameters(cls: type) -> set[str]:
    """The keyword arguments ``cls(...)`` takes: its ``__init__``'s, and its parents' that it
    passes its ``**kwargs`` on to (up to Lightning's)."""
    accepted: set[str] = set()
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is None:
            continue
        if klass.__module__.split(".")[0] in ("lightning", "pytorch_lightning", "torch"):
            break
        parameters = list(inspect.signature(init).parameters.values())[1:]  # not `self`
        accepted |= {
            p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return accepted


def arguments_from_data(cls: type, given: Iterable[str], offered: Mapping[str, Any]) -> dict:
    """What of the data's offer the model gets: what it takes and its config leaves unset."""
    accepted = accepted_parameters(cls) - set(given)
    return {key: value for key, value in offered.items() if key in accepted}


def instantiate_model(model_cfg: Any, cls: type, extra: Mapping[str, Any]) -> Any:
    """``instantiate(model_cfg, **extra)``, without what a subclass passes its parent itself
    (``super().__init__(num_classes=2, **kwargs)``)."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    extra = dict(extra)
    while True:
        try:
            return instantiate(model_cfg, **extra, _convert_="all")
        except InstantiationException as error:
            twice = re.search(r"multiple values for (?:keyword )?argument '(\w+)'", str(error))
            if twice is None or twice[1] not in extra:
                raise
            del extra[twice[1]]


def check_parameters(model: Any) -> None:
    """No parameter of the built model is empty (a layer of size 0: torch only warns)."""
    from torch.nn.parameter import UninitializedParameter

    for name, parameter in model.named_parameters():
        if not isinstance(parameter, UninitializedParameter) and parameter.numel() == 0:
            raise ValueError(
                f"the model has a layer of size 0: its parameter {name} has shape "
                f"{tuple(parameter.shape)}; a layer needs at least one unit"
            )


def check_model_fits_data(model: Any, datamodule: Any, data_name: str) -> None:
    """Every value the data module offers that a model rebuilt from a checkpoint also records
    agrees (eval.py, predict.py)."""

    def plain(value: Any) -> Any:  # lists and tuples compare alike (a shape may be either)
        return [plain(v) for v in value] if isinstance(value, (list, tuple)) else value

    recorded = dict(getattr(model, "hparams", {}) or {})
    conflicts = [
        f"`{key}`: the model has {plain(recorded[key])}, the data {plain(value)}"
        for key, value in offered_model_kwargs(datamodule).items()
        if key in recorded and plain(recorded[key]) != plain(value)
    ]
    if conflicts:
        raise UserError(
            f"The checkpoint's model does not fit data={data_name}: {'; '.join(conflicts)}. Pass "
            "the data of its run, or a checkpoint trained on this data."
        )
