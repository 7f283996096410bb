"""Prediction: `python predict.py ckpt_path=PATH` writes what a checkpoint's model predicts.

For a split of `data` (`split=test`, the default; `train` or `val`) or for the inputs in a
numpy file (`input_path=x.npy`), in a fixed order, into ``predictions.csv`` in the run
directory. The model is rebuilt from the checkpoint alone, as in eval.py, for any module:

- a module with its own ``predict_step`` gets each batch as the data module's loader gives it
  (a ``.npy`` file's batches are ``(inputs,)``);
- any other module gets each batch's inputs (its first element) through ``forward``.

What comes back, a tensor or a dict of tensors a batch, becomes columns: one column for one
value a sample (``prediction``, or the dict's key), ``<name>_<k>`` for several (``output_k``
for a bare tensor). A split also writes its ``target``. One value a sample against 0/1
targets is a binary classifier's: its class and ``prob``, the probability of class 1.
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
    import torch

SPLITS = ("train", "val", "test")


def predict(cfg: DictConfig) -> Path:
    """Load the checkpoint's model, predict the inputs, write and return the CSV's path."""
    from .. import preflight
    from ..config import print_config_tree
    from . import build

    entry.register()
    ckpt_path = preflight.check_config(cfg, checkpoint_required=True)  # check
    assert ckpt_path is not None
    use_checkpoint_run(cfg, ckpt_path)  # its model and data, unless the command names them
    if not cfg.get("input_path") and cfg.split not in SPLITS:
        raise UserError(f"split={cfg.split} is not a split; use one of {', '.join(SPLITS)}.")
    output_dir = Path(cfg.paths.output_dir)
    output_path = output_file(output_dir, cfg.get("output_file"))
    config = build.masked_config(cfg)  # build
    model = build.load_model(cfg.model._target_, ckpt_path)
    batches: SplitBatches | NpyBatches
    if cfg.get("input_path"):
        batches = NpyBatches(cfg.input_path, model, int(cfg.batch_size))
        source = str(cfg.input_path)
    else:
        batches = SplitBatches(split_loader(cfg, model), model, str(cfg.split))
        source = f"the {cfg.split} split"
    trainer = build.build_trainer(cfg, callbacks=[], loggers=[], enable_checkpointing=False)
    if trainer.world_size > 1:
        raise UserError(
            f"predict runs in one process, but the trainer config asks for {trainer.world_size} "
            "processes; pass `trainer.devices=1`."
        )
    output_dir.mkdir(parents=True, exist_ok=True)  # record what runs
    print_config_tree(config)
    print_config_tree(config, save_to=output_dir / "config_tree.log")
    outputs = run_on(trainer, model, batches)  # run
    columns = prediction_columns(outputs or [])  # record what came out
    targets = batches.targets()
    columns, targets = as_binary_classes(columns, targets)
    path = write_predictions(columns, output_path, targets)
    count = len(next(iter(columns.values())))
    print(f"Wrote {count} predictions for {source} to {path}{score(columns, targets)}")
    return path


def output_file(output_dir: Path, name: Any) -> Path:
    """Where the CSV goes: ``output_file`` inside the run directory (or the path it names); an
    empty name or a directory is a UserError (the CSV would be written over the run directory,
    its temporary file beside it)."""
    text = "" if name is None else str(name)
    path = output_dir / text
    if not text.strip() or text.endswith(("/", "\\")) or path.is_dir():
        what = "is empty" if not text.strip() else "names a directory"
        raise UserError(
            f"output_file={text} {what}; it is the CSV file the predictions are written to. "
            "Give a file name, e.g. `output_file=predictions.csv` (inside the run directory) "
            "or a path such as `output_file=/tmp/predictions.csv`."
        )
    return path


def run_on(trainer: Any, model: Any, batches: SplitBatches | NpyBatches) -> Any:
    """``trainer.predict``; inputs the model cannot take are a UserError.

    A model without an ``in_shape`` hyperparameter cannot have its file checked beforehand;
    torch's error (``mat1 and mat2 shapes cannot be multiplied``) then says what was wrong.
    A module without ``predict_step`` gets each batch's inputs through ``forward``, which not
    every module's ``forward`` takes (a GAN's generator takes noise): it needs a
    ``predict_step`` of its own.
    """
    try:
        return trainer.predict(model, dataloaders=batches)
    except (RuntimeError, TypeError, ValueError, IndexError, KeyError) as error:
        what = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
        name = type(model).__name__
        if isinstance(batches, NpyBatches):
            shape = tuple(batches.inputs.shape)
            raise UserError(
                f"{name} cannot take the inputs of input_path={batches.path}, shaped {shape} "
                f"({what}). Save inputs shaped like one batch of its training data, (N, ...) "
                "with N inputs."
            ) from error
        if batches.whole_batches:
            raise
        raise UserError(
            f"{name} has no predict_step, and its forward cannot take the inputs of the "
            f"{batches.split} split's batches ({what}): predict.py calls `forward(inputs)` on "
            "each batch's inputs (its first element) for such a module. Give the module a "
            "`predict_step(self, batch, batch_idx)` returning what to predict for a batch, a "
            "tensor or a dict of tensors."
        ) from error


def split_loader(cfg: DictConfig, model: Any) -> Any:
    """The loader of ``cfg.split`` of ``cfg.data``, in a fixed order (no shuffling)."""
    from torch.utils.data import DataLoader

    from ..preflight import contract
    from . import build

    # A loader that slices batches on the device (`data.on_device`) has no data set to re-read
    # in a fixed order below: ask for a DataLoader.
    with build.built_from(cfg, "data"):
        datamodule = build.instantiate_data(cfg, on_device=False)
    contract.check_model_fits_data(model, datamodule, build.data_name(cfg))
    datamodule.prepare_data()
    datamodule.setup("test" if cfg.split == "test" else "fit")
    hook = getattr(datamodule, f"{cfg.split}_dataloader", None)
    try:
        loader = hook() if callable(hook) else None
    except Exception as error:  # Lightning's default hook raises: the module has no such split
        raise UserError(
            f"{type(datamodule).__name__} gives no {cfg.split} split ({error}). Use another "
            f"`split=` ({', '.join(SPLITS)}) or `input_path=inputs.npy`."
        ) from error
    if isinstance(loader, DataLoader):  # same data and collate function, in a fixed order
        return DataLoader(
            loader.dataset,
            batch_size=int(cfg.batch_size),
            shuffle=False,
            collate_fn=loader.collate_fn,
        )
    return loader


def _own_predict_step(model: Any) -> bool:
    from lightning.pytorch import LightningModule
    from lightning.pytorch.utilities.model_helpers import is_overridden

    return is_overridden("predict_step", model, LightningModule)


class SplitBatches:
    """A split's batches as the model takes them, keeping each batch's targets on the side."""

    def __init__(self, loader: Any, model: Any, split: str = "test") -> None:
        self.loader, self.split = loader, split
        self.whole_batches = _own_predict_step(model)
        self._targets: list[Any] = []

    def __iter__(self) -> Iterator[Any]:
        self._targets = []
        for batch in self.loader:
            if isinstance(batch, (list, tuple)):
                if len(batch) >= 2:
                    self._targets.append(batch[1])
                yield batch if self.whole_batches else batch[0]
            else:
                yield batch

    def __len__(self) -> int:
        return len(self.loader)

    def targets(self) -> torch.Tensor | None:
        import torch

        if not self._targets or not all(isinstance(t, torch.Tensor) for t in self._targets):
            return None
        return torch.cat([t.reshape(len(t), -1) if t.dim() > 1 else t for t in self._targets])


class NpyBatches:
    """Batches of the inputs in a ``.npy`` file, checked against the model's input shape."""

    def __init__(self, path: str | Path, model: Any, batch_size: int) -> None:
        import torch

        shape = getattr(model, "hparams", {}).get("in_shape")
        self.path = path
        self.inputs = torch.from_numpy(load_inputs(path, shape))
        self.batch_size = batch_size
        self.whole_batches = _own_predict_step(model)

    def __iter__(self) -> Iterator[Any]:
        for start in range(0, len(self.inputs), self.batch_size):
            inputs = self.inputs[start : start + self.batch_size]
            yield (inputs,) if self.whole_batches else inputs

    def __len__(self) -> int:
        return -(-len(self.inputs) // self.batch_size)

    def targets(self) -> torch.Tensor | None:
        return None  # a file of inputs has no targets


def load_inputs(path: str | Path, in_shape: Sequence[int] | None = None) -> np.ndarray:
    """Read a .npy file of inputs shaped ``(N, *in_shape)``; one input alone (``in_shape``),
    and (N, H, W) for one-channel images shaped (1, H, W), also do.

    ``in_shape`` is the shape the model takes (its ``in_shape`` hyperparameter); without it
    the file's first dimension is taken as N. Anything else is a :class:`UserError` that names
    the shape the model takes.
    """
    import numpy as np

    path = Path(path)
    shape = tuple(int(n) for n in in_shape) if in_shape is not None else None
    expected = f"(N, {', '.join(map(str, shape))})" if shape is not None else "(N, ...)"
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


def input_batch(array: Any, in_shape: Sequence[int] | None, source: str) -> np.ndarray:
    """``array`` as float32 inputs shaped ``(N, *in_shape)`` (see :func:`load_inputs`), or a
    :class:`UserError` naming ``source`` (``input_path=x.npy``; serve.py: the request)."""
    import numpy as np

    shape = tuple(int(n) for n in in_shape) if in_shape is not None else None
    expected = f"(N, {', '.join(map(str, shape))})" if shape is not None else "(N, ...)"
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
    finite = np.isfinite(array.reshape(len(array), -1)).all(axis=1)
    if not finite.all():
        rows = np.flatnonzero(~finite)
        listed = ", ".join(str(i) for i in rows[:10]) + (" ..." if len(rows) > 10 else "")
        raise UserError(
            f"{source} has NaN or infinite values in {len(rows)} of its {len(array)} "
            f"inputs (rows {listed}, counting from 0); a model's outputs for them mean nothing. "
            "Replace or drop those rows (e.g. `inputs[numpy.isfinite(inputs).reshape(len("
            "inputs), -1).all(1)]`) and save the file again."
        )
    return array


def prediction_columns(outputs: Sequence[Any]) -> dict[str, torch.Tensor]:
    """The CSV's columns from what ``predict`` returned for each batch (see the docstring)."""
    import torch

    if not outputs:
        raise UserError("There is nothing to predict: the inputs are empty.")
    first = outputs[0]
    if isinstance(first, Mapping):
        named = {key: torch.cat([_rows(batch[key]) for batch in outputs]) for key in first}
    elif isinstance(first, torch.Tensor):
        named = {"": torch.cat([_rows(batch) for batch in outputs])}
    else:
        raise UserError(
            f"The model's predictions are {type(first).__name__}s; predict.py writes a tensor or "
            "a dict of tensors per batch. Return one of those from `predict_step`."
        )
    columns: dict[str, torch.Tensor] = {}
    for key, values in named.items():
        if values.shape[1] == 1:
            columns[key or "prediction"] = values[:, 0]
        else:
            for k in range(values.shape[1]):
                columns[f"{key or 'output'}_{k}"] = values[:, k]
    return columns


def as_binary_classes(
    columns: dict[str, torch.Tensor], targets: torch.Tensor | None
) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
    """A binary classifier's one output a sample (a logit, or a probability) against 0/1
    labels, as its class and the probability of class 1 (`tasks.py`); anything else as it
    is. A file of inputs has no labels: its outputs stay as the model returned them."""
    from ..tasks import binary_probabilities

    if list(columns) != ["prediction"] or targets is None:
        return columns, targets
    probabilities = binary_probabilities(columns["prediction"], targets)
    if probabilities is None:
        return columns, targets
    classes = (probabilities > 0.5).long()
    return {"prediction": classes, "prob": probabilities}, targets.long()


def _rows(tensor: Any) -> torch.Tensor:
    """One row per sample, on the CPU."""
    tensor = tensor.detach().cpu()
    return tensor.reshape(len(tensor), -1) if tensor.dim() else tensor.reshape(1, 1)


def write_predictions(
    columns: Mapping[str, torch.Tensor], path: Path, targets: torch.Tensor | None = None
) -> Path:
    """CSV with one row per input: index, (target,) then the columns.

    Written to a temporary file first, so an interrupted run leaves no half-written CSV.
    """
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


def score(columns: Mapping[str, torch.Tensor], targets: torch.Tensor | None) -> str:
    """`` (accuracy ...)`` or `` (RMSE ...)`` against the split's targets, when they compare."""
    predicted = columns.get("prediction")
    if targets is None or predicted is None or targets.dim() != 1 or len(targets) != len(predicted):
        return ""
    if not targets.is_floating_point() and not predicted.is_floating_point():
        accuracy = (predicted == targets).float().mean().item()
        return f" (accuracy {accuracy:.4f} against its labels)"
    rmse = (predicted.double() - targets.double()).pow(2).mean().sqrt().item()
    return f" (RMSE {rmse:.4g} against its targets)"


def main() -> None:
    """Console-script entry point (`my-project-predict`)."""
    entry.main("predict", predict)


if __name__ == "__main__":
    main()
