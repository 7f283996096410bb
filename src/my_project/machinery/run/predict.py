"""Prediction: `python predict.py ckpt_path=PATH` writes what a checkpoint's model predicts,
for a split of `data` (`split=test`) or the inputs of a numpy file (`input_path=x.npy`), as
``predictions.csv`` in the run directory. The model and data are the run's that wrote it.

A module with its own ``predict_step`` gets batches shaped as its data module's (a file's
inputs in place of their first element); any other, each batch's inputs through ``forward``,
a classifier's outputs (scores against class indices, or one value against 0/1 targets, as
the split's first batch shows) as its class, ``prediction``, and ``prob``, its probabilities
(of class 1 for one value). A tensor or a dict of tensors a batch becomes columns: one for one
value a sample (``prediction``, or the key), ``<name>_<k>`` for several; a split adds its
``target``, and ``dataloader`` when the data module gives it several loaders.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from ..errors import UserError
from . import entry
from .checkpoint_config import use_checkpoint_run

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

SPLITS = ("train", "val", "test")


def predict(cfg: DictConfig) -> Path:
    """Load the checkpoint's model, predict the inputs, write and return the CSV's path."""
    import torch

    from .. import preflight
    from ..config import print_config_tree
    from . import build

    entry.register()
    ckpt_path = preflight.check_config(cfg, checkpoint_required=True)  # check
    assert ckpt_path is not None
    use_checkpoint_run(cfg, ckpt_path)  # its model and data, unless the command names them
    if not cfg.get("input_path") and cfg.split not in SPLITS:
        raise UserError(f"split={cfg.split} is not a split; use one of {', '.join(SPLITS)}.")
    output_path = output_file(Path(cfg.paths.output_dir), cfg.get("output_file"))
    config = build.masked_config(cfg)  # build
    model = build.load_model(cfg.model._target_, ckpt_path)
    own = own_predict_step(model)
    loaders = split_loaders(cfg, model)
    example = first_batch(loaders, cfg)
    task = None if own else classifier_of(model, example)
    batches, source = Batches(loaders, own), f"the {cfg.split} split"
    if cfg.get("input_path"):
        inputs = torch.from_numpy(load_inputs(cfg.input_path, model.hparams.get("in_shape")))
        chunks = [like_data(example, x) if own else x for x in inputs.split(int(cfg.batch_size))]
        batches, source = Batches([chunks], whole=True), str(cfg.input_path)
    trainer = build.build_trainer(cfg, callbacks=[], loggers=[], enable_checkpointing=False)
    if trainer.world_size > 1:
        raise UserError(
            f"predict runs in one process, but the trainer config asks for {trainer.world_size} "
            "processes; pass `trainer.devices=1`."
        )
    Path(cfg.paths.output_dir).mkdir(parents=True, exist_ok=True)  # record what runs
    print_config_tree(config)
    print_config_tree(config, save_to=Path(cfg.paths.output_dir) / "config_tree.log")
    try:  # run
        outputs = trainer.predict(model, dataloaders=batches)
    except (RuntimeError, TypeError, ValueError, IndexError, KeyError) as error:
        raise cannot_take(model, cfg, error, own, cfg.get("input_path") and inputs.shape) from error
    if task is not None and outputs:  # record what came out
        outputs = [as_classes(torch.cat([_rows(batch) for batch in outputs]), task)]
    columns = prediction_columns(outputs or [])
    if len(loaders) > 1 and not cfg.get("input_path"):
        columns = {"dataloader": torch.tensor(batches.loader_of_rows), **columns}
    target = batches.targets() if not cfg.get("input_path") else None
    target = target.long() if target is not None and task is not None else target
    path = write_predictions(columns, output_path, target)
    count = len(next(iter(columns.values())))
    print(f"Wrote {count} predictions for {source} to {path}{score(columns, target)}")
    return path


def output_file(output_dir: Path, name: Any) -> Path:
    """Where the CSV goes: ``output_file`` in the run directory (or the path it names); an
    empty name or a directory is refused (the CSV would be written over it)."""
    text = "" if name is None else str(name)
    if not text.strip() or text.endswith(("/", "\\")) or (output_dir / text).is_dir():
        what = "is empty" if not text.strip() else "names a directory"
        raise UserError(
            f"output_file={text} {what}; it is the CSV file the predictions are written to. "
            "Give a file name, e.g. `output_file=predictions.csv` (inside the run directory) "
            "or a path such as `output_file=/tmp/predictions.csv`."
        )
    return output_dir / text


def cannot_take(model: Any, cfg: DictConfig, error: Exception, own: bool, shape: Any) -> Any:
    """The UserError for inputs the model cannot take: a file's (torch's own complaint, for a
    model without ``in_shape``), or a split's that ``forward`` cannot take (a GAN's generator
    takes noise: it needs a ``predict_step``); a module's own ``predict_step``'s error as is."""
    what = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    name = type(model).__name__
    if shape:
        return UserError(
            f"{name} cannot take the inputs of input_path={cfg.input_path}, shaped "
            f"{tuple(shape)} ({what}). Save inputs shaped like one batch of its training data, "
            "(N, ...) with N inputs."
        )
    if own:
        return error
    return UserError(
        f"{name} has no predict_step, and its forward cannot take the inputs of the "
        f"{cfg.split} split's batches ({what}): predict.py calls `forward(inputs)` on each "
        "batch's inputs (its first element) for such a module. Give the module a "
        "`predict_step(self, batch, batch_idx)` returning what to predict for a batch, a tensor "
        "or a dict of tensors."
    )


def own_predict_step(model: Any) -> bool:
    from lightning.pytorch import LightningModule
    from lightning.pytorch.utilities.model_helpers import is_overridden

    return is_overridden("predict_step", model, LightningModule)


def split_loaders(cfg: DictConfig, model: Any) -> list[Any]:
    """The loaders of ``cfg.split`` of ``cfg.data`` (one, or the several a data module gives),
    in a fixed order: DataLoaders again, unshuffled, of ``batch_size``."""
    from torch.utils.data import DataLoader

    from ..preflight import contract
    from . import build

    with build.built_from(cfg, "data"):  # a DataLoader, not batches sliced on the device
        datamodule = build.instantiate_data(cfg, on_device=False)
    contract.check_model_fits_data(model, datamodule, build.data_name(cfg))
    datamodule.prepare_data()
    datamodule.setup("test" if cfg.split == "test" else "fit")
    try:
        loaders = getattr(datamodule, f"{cfg.split}_dataloader")()
    except Exception as error:  # Lightning's default hook raises: the module has no such split
        raise UserError(
            f"{type(datamodule).__name__} gives no {cfg.split} split ({error}). Use another "
            f"`split=` ({', '.join(SPLITS)}) or `input_path=inputs.npy`."
        ) from error
    if isinstance(loaders, Mapping):
        loaders = list(loaders.values())
    size = int(cfg.batch_size)
    return [
        DataLoader(lo.dataset, size, shuffle=False, collate_fn=lo.collate_fn)
        if isinstance(lo, DataLoader)
        else lo
        for lo in (loaders if isinstance(loaders, (list, tuple)) else [loaders])
    ]


def first_batch(loaders: list[Any], cfg: DictConfig) -> Any:
    for batch in loaders[0]:
        return batch
    raise UserError(f"The {cfg.split} split of {cfg.data._target_} is empty; pick another split.")


def inputs_of(batch: Any) -> Any:
    """A batch's inputs: its first element (``(x, y)``), or the batch itself."""
    return batch[0] if isinstance(batch, (list, tuple)) else batch


def like_data(example: Any, inputs: Tensor) -> Any:
    """``inputs`` as a batch shaped as the data's ``example``, for a ``predict_step`` that
    unpacks ``x, y = batch``: its other tensors as zeros, a row per input."""
    if not isinstance(example, (list, tuple)):
        return inputs
    rest = [zeros_like_rows(part, len(inputs)) for part in example[1:]]
    return (inputs, *rest) if isinstance(example, tuple) else [inputs, *rest]


def zeros_like_rows(part: Any, rows: int) -> Any:
    return part.new_zeros((rows, *part.shape[1:])) if hasattr(part, "new_zeros") else part


class Batches:
    """The loaders' batches, one after the other, as the model takes them: whole (its own
    ``predict_step``) or their inputs; their targets (second elements) kept on the side."""

    def __init__(self, loaders: list[Any], whole: bool) -> None:
        self.loaders, self.whole = loaders, whole
        self._targets: list[Any] = []
        self.loader_of_rows: list[int] = []

    def __iter__(self) -> Iterator[Any]:
        self._targets, self.loader_of_rows = [], []
        for index, loader in enumerate(self.loaders):
            for batch in loader:
                if isinstance(batch, (list, tuple)) and len(batch) > 1:
                    self._targets.append(batch[1])
                self.loader_of_rows += [index] * len(inputs_of(batch))
                yield batch if self.whole else inputs_of(batch)

    def __len__(self) -> int:
        return sum(len(loader) for loader in self.loaders)

    def targets(self) -> Tensor | None:
        """One row (or value) per input, if every batch had a tensor of targets."""
        import torch

        if not self._targets or not all(isinstance(t, torch.Tensor) for t in self._targets):
            return None
        target = torch.cat([_rows(t) for t in self._targets])
        return target[:, 0] if target.shape[1] == 1 else target


def classifier_of(model: Any, batch: Any) -> str | None:
    """``"logits"`` or ``"probabilities"`` when ``forward`` of the batch's inputs against its
    targets is a classifier's (see the module docstring), else None."""
    import torch

    from ..tasks import is_binary_labels

    try:
        with torch.no_grad():
            targets, scores = batch[1], model.eval()(batch[0]).float().reshape(len(batch[1]), -1)
    except Exception:  # not (inputs, targets), or a forward that takes no inputs
        return None
    if not isinstance(targets, torch.Tensor) or targets.dim() != 1:
        return None
    within = bool(((scores >= 0) & (scores <= 1)).all())
    if scores.shape[1] == 1:  # one logit, or a probability, against 0/1 labels
        return ("probabilities" if within else "logits") if is_binary_labels(targets) else None
    if targets.is_floating_point() or not bool(
        ((targets >= 0) & (targets < scores.shape[1])).all()
    ):
        return None
    sums_to_one = torch.allclose(scores.sum(1), torch.ones(len(scores)), atol=1e-4)
    return "probabilities" if sums_to_one and bool((scores >= 0).all()) else "logits"


def as_classes(outputs: Tensor, how: str) -> dict[str, Tensor]:
    """A classifier's outputs as its class and probabilities (of class 1 for one value)."""
    scores = outputs.reshape(len(outputs), -1).float()
    if scores.shape[1] == 1:
        prob = scores[:, 0].sigmoid() if how == "logits" else scores[:, 0]
        return {"prediction": (prob > 0.5).long(), "prob": prob}
    prob = scores.softmax(1) if how == "logits" else scores
    return {"prediction": prob.argmax(1), "prob": prob}


def prediction_columns(outputs: Sequence[Any]) -> dict[str, Tensor]:
    """The CSV's columns from what ``predict`` returned for each batch (see the docstring)."""
    import torch

    if not outputs:
        raise UserError("There is nothing to predict: the inputs are empty.")
    if isinstance(outputs[0], Mapping):
        named = {key: torch.cat([_rows(out[key]) for out in outputs]) for key in outputs[0]}
    elif isinstance(outputs[0], torch.Tensor):
        named = {"": torch.cat([_rows(out) for out in outputs])}
    else:
        raise UserError(
            f"The model's predictions are {type(outputs[0]).__name__}s; predict.py writes a "
            "tensor or a dict of tensors per batch. Return one of those from `predict_step`."
        )
    columns: dict[str, Tensor] = {}
    for key, values in named.items():
        if values.shape[1] == 1:
            columns[key or "prediction"] = values[:, 0]
        else:
            columns.update({f"{key or 'output'}_{k}": values[:, k] for k in range(values.shape[1])})
    return columns


def _rows(tensor: Any) -> Tensor:
    """One row per sample, on the CPU."""
    tensor = tensor.detach().cpu()
    return tensor.reshape(len(tensor), -1) if tensor.dim() else tensor.reshape(1, 1)


def load_inputs(path: str | Path, in_shape: Sequence[int] | None = None) -> np.ndarray:
    """Read a .npy file of inputs shaped ``(N, *in_shape)`` (see :func:`input_batch`)."""
    import numpy as np

    path, expected = Path(path), _expected(in_shape)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise UserError(
            f"input_path={path} {what}. Pass a .npy file of inputs shaped {expected}, "
            "written with numpy.save."
        )
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise UserError(
            f"input_path={path} is not a readable .npy file ({error}). Write the inputs with "
            f"`numpy.save(path, inputs)`, an array of numbers shaped {expected}."
        ) from error
    return input_batch(array, in_shape, f"input_path={path}")


def _expected(in_shape: Sequence[int] | None) -> str:
    return "(N, ...)" if in_shape is None else f"(N, {', '.join(str(int(n)) for n in in_shape)})"


def input_batch(array: Any, in_shape: Sequence[int] | None, source: str) -> np.ndarray:
    """``array`` as float32 inputs shaped ``(N, *in_shape)`` (``in_shape``: the model's
    hyperparameter; without it the first dimension is N): also one input alone, and (N, H, W)
    for one-channel images (1, H, W). Else a :class:`UserError` naming ``source``."""
    import numpy as np

    shape, expected = tuple(int(n) for n in in_shape or ()) or None, _expected(in_shape)
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
        raise UserError(
            f"{source} holds {getattr(array, 'dtype', type(array))} data, not numbers; "
            f"save the inputs as an array of numbers shaped {expected}."
        )
    if shape is not None:
        one_channel = len(shape) == 3 and shape[0] == 1
        if array.shape in (shape, shape[1:] if one_channel else None):
            array = array[None]  # a single input
        if one_channel and array.shape[1:] == shape[1:]:
            array = array[:, None]
        if array.shape[1:] != shape:
            hint = f" or (N, {', '.join(map(str, shape[1:]))})" if one_channel else ""
            raise UserError(
                f"{source} holds an array of shape {tuple(array.shape)}, but the model in "
                f"this checkpoint takes inputs of shape {shape}: pass a non-empty array shaped "
                f"{expected}{hint}, preprocessed as in training."
            )
    if array.ndim == 0 or len(array) == 0:
        raise UserError(f"{source} holds no inputs; pass an array shaped {expected}.")
    array = array.astype(np.float32)
    rows = np.flatnonzero(~np.isfinite(array.reshape(len(array), -1)).all(axis=1))
    if len(rows):
        listed = ", ".join(str(i) for i in rows[:10]) + (" ..." if len(rows) > 10 else "")
        raise UserError(
            f"{source} has NaN or infinite values in {len(rows)} of its {len(array)} "
            f"inputs (rows {listed}, counting from 0); a model's outputs for them mean nothing. "
            "Replace or drop those rows (e.g. `inputs[numpy.isfinite(inputs).reshape(len("
            "inputs), -1).all(1)]`) and save the file again."
        )
    return array


def write_predictions(columns: Mapping[str, Tensor], path: Path, targets: Tensor | None) -> Path:
    """CSV with one row per input: index, (target,) then the columns; written to a temporary
    file first, so an interrupted run leaves no half-written CSV."""
    table = dict(columns)
    if targets is not None and len(targets) == len(next(iter(table.values()))):
        if targets.dim() == 1:
            table = {"target": targets, **table}
        else:
            table = {**{f"target_{k}": targets[:, k] for k in range(targets.shape[1])}, **table}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    values = [column.tolist() for column in table.values()]
    try:
        with open(partial, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["index", *table])
            for i, row in enumerate(zip(*values, strict=True)):
                writer.writerow([i, *(f"{v:.6f}" if isinstance(v, float) else v for v in row)])
        os.replace(partial, path)
    except BaseException:  # a full disk, a signal: no half-written file is left
        partial.unlink(missing_ok=True)
        raise
    return path


def score(columns: Mapping[str, Tensor], targets: Tensor | None) -> str:
    """`` (accuracy ...)`` or `` (RMSE ...)`` against the split's targets, when they compare."""
    predicted = columns.get("prediction")
    if targets is None or predicted is None or targets.dim() != 1 or len(targets) != len(predicted):
        return ""
    if not targets.is_floating_point() and not predicted.is_floating_point():
        return f" (accuracy {(predicted == targets).float().mean().item():.4f} against its labels)"
    rmse = (predicted.double() - targets.double()).pow(2).mean().sqrt().item()
    return f" (RMSE {rmse:.4g} against its targets)"


def main() -> None:
    """Console-script entry point (`my-project-predict`)."""
    entry.main("predict", predict)


if __name__ == "__main__":
    main()
