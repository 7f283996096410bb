"""Prediction: `python predict.py ckpt_path=PATH` writes what a checkpoint's model (and the
run's data) predicts for a split of `data` as ``predictions.csv``, with Lightning's
``trainer.predict``. A module's own ``predict_step`` gets whole batches; any other gets their
inputs through ``forward``, a classifier's outputs (scores against class indices, or one value
against 0/1 targets) as its class, ``prediction``, and ``prob``, its probabilities. A tensor or
a dict of tensors a batch becomes columns (``<name>_<k>`` for several values), after ``target``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from ..errors import UserError
from . import entry
from .boundary import describe
from .checkpoint_config import checkpoint_run

if TYPE_CHECKING:
    from torch import Tensor


def predict(cfg: DictConfig) -> Path:
    """Load the checkpoint's model, predict the split, write and return the CSV's path."""
    import torch
    from lightning.pytorch.utilities.model_helpers import is_overridden

    from ..config import print_config_tree
    from . import build

    _, config, model = checkpoint_run(cfg)  # check, build
    path = Path(cfg.paths.output_dir) / str(cfg.get("output_file") or "")
    if not cfg.get("output_file") or path.is_dir():
        raise UserError(
            f"output_file={cfg.get('output_file') or ''} names no file to write the predictions "
            "to; pass a file name, e.g. `output_file=predictions.csv` (in the run directory)."
        )
    own = is_overridden("predict_step", model)
    loaders, first = split_loaders(cfg, model)
    task = None if own else classifier_of(model, first)
    batches = Batches(loaders, whole=own)
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
        if own:
            raise  # the module's own predict_step: its traceback
        raise UserError(
            f"{type(model).__name__} cannot take the inputs of the {cfg.split} split "
            f"({describe(error)}) Without a predict_step of its own, predict.py calls "
            "`forward(inputs)` on each batch's inputs (its first element): give the module a "
            "`predict_step(self, batch, batch_idx)` returning a tensor or a dict of tensors."
        ) from error
    predicted = prediction_columns(outputs or [], task)  # record what came out
    count = len(next(iter(predicted.values())))
    table: dict[str, Any] = {}
    if batches.targets and all(isinstance(t, torch.Tensor) for t in batches.targets):
        target = torch.cat([_rows(t) for t in batches.targets])
        table["target"] = target.long() if task is not None else target
    table = {k: v for k, v in columns(table).items() if len(v) == count}
    write_predictions({**table, **predicted}, path)
    print(f"Wrote {count} predictions for the {cfg.split} split to {path}{score(predicted, table)}")
    return path


def score(predicted: Mapping[str, Tensor], table: Mapping[str, Tensor]) -> str:
    """`` (accuracy ...)`` or `` (RMSE ...)`` against the split's targets, where they compare."""
    guess, target = predicted.get("prediction"), table.get("target")
    if guess is None or target is None or target.dim() != 1 or guess.dim() != 1:
        return ""
    if not target.is_floating_point() and not guess.is_floating_point():
        return f" (accuracy {(guess == target).double().mean().item():.4f} against its labels)"
    rmse = (guess.double() - target.double()).pow(2).mean().sqrt().item()
    return f" (RMSE {rmse:.4g} against its targets)"


def split_loaders(cfg: DictConfig, model: Any) -> tuple[list[Any], Any]:
    """The loaders of ``cfg.split`` of ``cfg.data`` (one, or the several a data module gives),
    in a fixed order: DataLoaders again, unshuffled, of ``batch_size``; and their first batch."""
    from lightning.pytorch.utilities.model_helpers import is_overridden
    from torch.utils.data import DataLoader

    from ..preflight import contract
    from . import build

    with build.built_from(cfg, "data"):  # a DataLoader, not batches sliced on the device
        datamodule = build.instantiate_data(cfg, on_device=False)
    contract.check_model_fits_data(model, datamodule, build.data_name(cfg))
    with build.built_from(cfg, "data"):
        datamodule.prepare_data()
        datamodule.setup("test" if cfg.split == "test" else "fit")
    if not is_overridden(f"{cfg.split}_dataloader", datamodule):
        raise UserError(
            f"{type(datamodule).__name__} gives no {cfg.split} split (it has no "
            f"`{cfg.split}_dataloader`). Use another `split=` (train, val or test)."
        )
    with build.built_from(cfg, "data"):  # the team's bug in its loader: its traceback
        loaders = getattr(datamodule, f"{cfg.split}_dataloader")()
    loaders = list(loaders.values()) if isinstance(loaders, Mapping) else loaders
    loaders = [
        DataLoader(lo.dataset, int(cfg.batch_size), shuffle=False, collate_fn=lo.collate_fn)
        if isinstance(lo, DataLoader)
        else lo
        for lo in (loaders if isinstance(loaders, (list, tuple)) else [loaders])
    ]
    for batch in loaders[0]:
        return loaders, batch
    raise UserError(f"The {cfg.split} split of {cfg.data._target_} is empty; pick another split.")


def inputs_of(batch: Any) -> Any:
    """A batch's inputs: its first element (``(x, y)``), or the batch itself."""
    return batch[0] if isinstance(batch, (list, tuple)) else batch


def like_data(example: Any, inputs: Tensor) -> Any:
    """``inputs`` as a batch shaped as the data's ``example``, for a ``predict_step`` that
    unpacks ``x, y = batch``: its other tensors as zeros, a row per input."""
    if not isinstance(example, (list, tuple)):
        return inputs
    rest = [
        p.new_zeros(len(inputs), *p.shape[1:]) if hasattr(p, "new_zeros") else p
        for p in example[1:]
    ]
    return (inputs, *rest) if isinstance(example, tuple) else [inputs, *rest]


class Batches:
    """The loaders' batches, one after another, as the model takes them: whole (its own
    ``predict_step``) or their inputs (Lightning's default ``predict_step`` calls ``forward``
    on the batch); the targets (second elements) kept aside."""

    def __init__(self, loaders: list[Any], whole: bool) -> None:
        self.loaders, self.whole = loaders, whole
        self.targets: list[Any] = []

    def __iter__(self) -> Iterator[Any]:
        self.targets = []
        for batch in (batch for loader in self.loaders for batch in loader):
            if isinstance(batch, (list, tuple)) and len(batch) > 1:
                self.targets.append(batch[1])
            yield batch if self.whole else inputs_of(batch)

    def __len__(self) -> int:  # for the progress bar
        return sum(len(loader) for loader in self.loaders)


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
    if scores.shape[1] == 1:  # one logit, or a probability, against 0/1 labels
        if not is_binary_labels(targets):
            return None
    elif targets.is_floating_point() or not ((targets >= 0) & (targets < scores.shape[1])).all():
        return None
    within = bool(((scores >= 0) & (scores <= 1)).all())
    sums_to_one = torch.allclose(scores.sum(1), torch.ones(len(scores)), atol=1e-4)
    return "probabilities" if within and (sums_to_one or scores.shape[1] == 1) else "logits"


def as_classes(outputs: Tensor, how: str) -> dict[str, Tensor]:
    """A classifier's outputs as its class and probabilities (of class 1 for one value)."""
    scores = outputs.reshape(len(outputs), -1).float()
    if scores.shape[1] == 1:
        prob = scores[:, 0].sigmoid() if how == "logits" else scores[:, 0]
        return {"prediction": (prob > 0.5).long(), "prob": prob}
    prob = scores.softmax(1) if how == "logits" else scores
    return {"prediction": prob.argmax(1), "prob": prob}


def named_outputs(output: Any, task: str | None = None) -> dict[str, Tensor]:
    """What the model predicted for a batch, by name (see the module docstring)."""
    import torch

    if task is not None and isinstance(output, torch.Tensor):
        output = as_classes(output, task)
    if isinstance(output, torch.Tensor):
        return {"prediction" if output.dim() < 2 or output[0].numel() == 1 else "output": output}
    if isinstance(output, Mapping) and all(isinstance(v, torch.Tensor) for v in output.values()):
        return {str(key): value for key, value in output.items()}
    raise UserError(
        f"The model's predictions are {type(output).__name__}s; predict.py and serve.py take a "
        "tensor or a dict of tensors per batch. Return one of those from `predict_step`."
    )


def prediction_columns(outputs: Sequence[Any], task: str | None = None) -> dict[str, Tensor]:
    """The CSV's columns from what the model returned for each batch (see the docstring)."""
    import torch

    if not outputs:
        raise UserError("There is nothing to predict: the inputs are empty.")
    named = [named_outputs(output, task) for output in outputs]
    return columns({key: torch.cat([_rows(out[key]) for out in named]) for key in named[0]})


def columns(named: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Each tensor (a row per sample) as a column, or as ``<name>_<k>`` for several values."""
    table = {}
    for key, values in named.items():
        values = _rows(values)
        if values.shape[1] == 1:
            table[key] = values[:, 0]
        else:
            table.update({f"{key}_{k}": values[:, k] for k in range(values.shape[1])})
    return table


def _rows(tensor: Any) -> Tensor:
    """One row per sample, on the CPU."""
    tensor = tensor.detach().cpu()
    return tensor.reshape(len(tensor), -1) if tensor.dim() else tensor.reshape(1, 1)


def write_predictions(table: Mapping[str, Tensor], path: Path) -> None:
    """CSV with one row per input: index, then the columns; written whole to a temporary file
    first, so an interrupted run leaves no half-written CSV."""
    lines = [",".join(["index", *table])]
    for i, row in enumerate(zip(*(column.tolist() for column in table.values()), strict=True)):
        cells = (f"{v:.6f}" if isinstance(v, float) else str(v) for v in row)
        lines.append(",".join([str(i), *cells]))
    from ..reliability.atomic_io import atomic_write_text

    atomic_write_text(path, "\n".join(lines) + "\n")  # no `.part` left, full disk or not


def main() -> None:
    """Console-script entry point (`my-project-predict`)."""
    entry.main("predict", predict)


if __name__ == "__main__":
    main()
