"""Layers a module builds late, in ``setup(stage)`` (shapes from the data) or ``configure_model``
(Lightning's deferred-init hook, which may read ``self.trainer``), made when the machinery needs
them: tried before anything of a run is written, as Lightning will build them (the values of the
config reach them, and a resume's checkpoint is checked against them), and built before a
checkpoint's weights load (eval, predict, serve, export), as Lightning's own
``trainer.test(ckpt_path=...)`` builds them.

Lightning calls both hooks again when a Trainer runs the loaded model; a ``setup`` that builds
layers (the Lightning docs' example does) would replace the loaded weights by new ones, so a
loaded model keeps the layers it was given (`keep_built`).
"""

from __future__ import annotations

import inspect
import logging
import random
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from lightning.pytorch import LightningModule

HOOKS = ("setup", "configure_model")
# `torch.compile(module)` keeps the module as `_orig_mod`: a compiled network's weights are
# saved under `net._orig_mod.*`, the same network's uncompiled under `net.*`.
_COMPILED = re.compile(r"(^|\.)_orig_mod(?=\.|$)")


def builds_late(model: Any) -> bool:
    """Whether the module (or its class) has a ``setup`` or ``configure_model`` of its own."""
    cls = model if isinstance(model, type) else type(model)
    return any(getattr(cls, hook) is not getattr(LightningModule, hook) for hook in HOOKS)


def build_layers(model: Any, stage: str, trainer: Any, datamodule: Any = None) -> None:
    """``model.setup(stage)``, then ``model.configure_model()``, as Lightning calls them when a
    stage starts: with ``trainer`` attached (``self.trainer``, ``self.trainer.datamodule``)."""
    model.trainer = trainer
    if datamodule is not None:
        trainer.datamodule, datamodule.trainer = datamodule, trainer
    try:
        model.setup(stage)
        model.configure_model()
    finally:
        model.trainer = None


def tried(make: Callable[[], Any], model: Any, stage: str, trainer: Any, datamodule: Any) -> Any:
    """``model`` where it builds nothing late; else another instance (``make()``) with its late
    layers built, the random number generators left as they were (the run's own layers draw
    the numbers they would have drawn)."""
    if not builds_late(model):
        return model
    with same_random_numbers():
        trial = make()
        build_layers(trial, stage, trainer, datamodule)
    return trial


@contextmanager
def same_random_numbers() -> Iterator[None]:
    """torch's CPU generator, Python's and NumPy's global ones as they were, after the block."""
    import numpy as np
    import torch

    python, numpy = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(python)
            np.random.set_state(numpy)


def quiet_trainer() -> Any:
    """A one-CPU Trainer to attach while a loaded model builds its layers (Lightning's lines
    about the devices it found left out)."""
    from lightning.pytorch import Trainer

    lines = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    level = lines.level
    lines.setLevel(logging.WARNING)
    try:
        return Trainer(
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
    finally:
        lines.setLevel(level)


def from_hyperparameters(cls: type, checkpoint: Mapping[str, Any], given: Mapping[str, Any]) -> Any:
    """``cls`` built as Lightning's ``load_from_checkpoint`` builds it, from the checkpoint's
    hyperparameters and ``given`` (which win), without its weights nor ``configure_model``."""
    from lightning.pytorch.utilities.parsing import AttributeDict

    hparams = {**(checkpoint.get("hyper_parameters") or {}), **given}
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]  # type: ignore[misc]
    named = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    name = checkpoint.get("hparams_name")  # `save_hyperparameters(hparams)` of one object
    if name and name in named:
        hparams = {name: AttributeDict(hparams)}
    if not any(p.kind is p.VAR_KEYWORD for p in parameters):
        hparams = {k: v for k, v in hparams.items() if k in named}
    return cls(**hparams)


def _built(*args: Any, **kwargs: Any) -> None:
    """In place of a loaded model's ``setup`` and ``configure_model``: its layers are built."""


def keep_built(model: Any) -> None:
    """The hooks that built ``model``'s layers do nothing when a Trainer calls them again (a
    function of this module, so the model still pickles)."""
    for hook in HOOKS:
        setattr(model, hook, _built)


def uncompiled(key: str) -> str:
    return _COMPILED.sub("", key)


def weights_for(model: Any, weights: Mapping[str, Any]) -> dict[str, Any]:
    """The checkpoint's weights under ``model``'s names where they differ only by
    ``torch.compile``'s ``_orig_mod`` (a compiled network's checkpoint, an uncompiled model)."""
    own = set(model.state_dict())
    names = {uncompiled(k): k for k in own}
    return {k if k in own else names.get(uncompiled(k), k): v for k, v in weights.items()}
