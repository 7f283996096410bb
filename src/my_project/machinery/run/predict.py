"""Prediction: `python predict.py ckpt_path=PATH` writes what a checkpoint's model predicts for
a split of the run's `data`, or for files of new inputs (``input_path=``, checked and batched as
the data's: `inputs.py`, `input_files.py`), as ``predictions.csv``, with Lightning's
``trainer.predict``. A module's own ``predict_step`` gets whole batches; any other gets their
inputs through ``forward``, a classifier's outputs (scores against class indices, one value
against 0/1 targets, a value per label against 0/1 targets of shape (N, L)) as its class or
labels, ``prediction``, and ``prob``, its probabilities. A tensor, a tuple (``output_<k>``) or
a dict of tensors a batch becomes a column group per output (``<name>_<k>`` for several values),
after ``target`` and, for several loaders, ``dataloader`` (``file`` for a folder of files).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from ..errors import UserError
from . import entry
from .boundary import describe, teams_bug
from .checkpoint_config import checkpoint_run
from .input_files import input_files, read_inputs
from .inputs import Refused, Signature, chunks, inputs_of, samples_in, signature_of

if TYPE_CHECKING:
    from torch import Tensor


def predict(cfg: DictConfig) -> Path:
    """Load the checkpoint's model, predict the split or the files, write and return the CSV."""
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
    given = cfg.get("input_path")
    if given:  # the files' inputs, checked as the data's, in batches shaped as the data's
        source = f"input_path={given}"
        signature = signature_for(model, loaders, own, source)
        files = {file: read_inputs(file, signature) for file in input_files(str(given))}
        size = int(cfg.batch_size)
        made = [signature.batch(part) for arrays in files.values() for part in chunks(arrays, size)]
        batches = [Batches(made, whole=own, targets=False)]
    else:
        source = f"the {cfg.split} split"
        batches = [Batches(loader, whole=own) for loader in loaders]
    trainer = build.build_trainer(cfg, callbacks=[], loggers=[], enable_checkpointing=False)
    if trainer.world_size > 1:
        raise UserError(
            f"predict runs in one process, but the trainer config asks for {trainer.world_size} "
            "processes; pass `trainer.devices=1`."
        )
    Path(cfg.paths.output_dir).mkdir(parents=True, exist_ok=True)  # record what runs
    entry.announce_run_dir()  # every check passed
    print_config_tree(config)
    print_config_tree(config, save_to=Path(cfg.paths.output_dir) / "config_tree.log")
    try:  # run
        outputs = trainer.predict(model, dataloaders=batches)
    except (RuntimeError, TypeError, ValueError, IndexError, KeyError) as error:
        if own or teams_bug(error, inputs_given=True) is not None:
            raise  # its own predict_step, or a bug of its forward: its traceback
        raise cannot_take(model, source, error) from error
    per_loader = outputs if len(batches) > 1 else [outputs or []]  # record what came out
    predicted = prediction_columns([out for outs in per_loader for out in outs or []], task)
    count = len(next(iter(predicted.values())))
    seen = [t for b in batches for t in b.targets]
    table: dict[str, Any] = {}
    if seen and all(isinstance(t, torch.Tensor) for t in seen):
        target = torch.cat([_rows(t) for t in seen])
        table["target"] = target.long() if task is not None else target
    if len(batches) > 1:
        table["dataloader"] = torch.cat([torch.full((b.rows,), i) for i, b in enumerate(batches)])
    table = {k: v for k, v in columns(table).items() if len(v) == count}
    if given and Path(str(given)).is_dir():  # which file each row is of
        table["file"] = [
            file.name for file, arrays in files.items() for _ in range(samples_in(arrays))
        ]
    write_predictions({**table, **predicted}, path)
    print(f"Wrote {count} predictions for {source} to {path}{score(predicted, table)}")
    return path


def cannot_take(model: Any, source: str, error: BaseException) -> UserError:
    """The paragraph for a module without a predict_step whose ``forward`` cannot take the
    inputs of ``source`` (a GAN's generator, fed noise in training)."""
    return UserError(
        f"{type(model).__name__} cannot take the inputs of {source} ({describe(error)}) Without "
        "a predict_step of its own, predict.py, serve.py and export.py call `forward(inputs)` "
        "on each batch's inputs (its first element): give the module a "
        "`predict_step(self, batch, batch_idx)` returning a tensor, a tuple or a dict of tensors."
    )


def signature_for(model: Any, loaders: list[Any], own: bool, source: str) -> Signature:
    """What the model takes, from the first batches (up to 16) of the split's first loader;
    a refusal in one paragraph where it takes neither a tensor nor a dict of tensors."""
    batches = list(itertools.islice(loaders[0], 16))
    try:
        return signature_of(batches, model, own, type(model).__name__)
    except Refused as error:
        raise UserError(f"{error}.") from error
    except (RuntimeError, TypeError, ValueError, IndexError, KeyError) as error:
        if own or teams_bug(error, inputs_given=True) is not None:
            raise  # its own predict_step, or a bug of its forward: its traceback
        raise cannot_take(model, source, error) from error


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


class Batches:
    """A loader's batches as the model takes them: whole (its own ``predict_step``) or their
    inputs (Lightning's default ``predict_step`` calls ``forward`` on the batch); the targets
    (second elements) and the number of inputs kept aside."""

    def __init__(self, loader: Any, whole: bool, targets: bool = True) -> None:
        self.loader, self.whole, self.keep_targets = loader, whole, targets
        self.targets: list[Any] = []
        self.rows = 0

    def __iter__(self) -> Iterator[Any]:
        self.targets, self.rows = [], 0
        for batch in self.loader:
            if self.keep_targets and isinstance(batch, (list, tuple)) and len(batch) > 1:
                self.targets.append(batch[1])
            self.rows += samples_in(inputs_of(batch))
            yield batch if self.whole else inputs_of(batch)

    def __len__(self) -> int:  # for the progress bar
        return len(self.loader)


def classifier_of(model: Any, batch: Any) -> str | None:
    """How ``forward`` of an ``(inputs, targets, ...)`` batch is a classifier's (see the module
    docstring): ``"logits"`` or ``"probabilities"``, prefixed ``"multilabel "`` for a value per
    label against 0/1 targets of shape (N, L); None for anything else."""
    import torch

    from ..tasks import is_binary_labels

    if not isinstance(batch, (list, tuple)) or len(batch) < 2:
        return None
    targets = batch[1]
    try:
        with torch.no_grad():
            scores = model.eval()(batch[0])
        scores = scores.float().reshape(len(targets), -1)
    except Exception:  # a forward that takes no inputs, an output that is not one tensor
        return None
    if not isinstance(targets, torch.Tensor) or not len(targets):
        return None
    several = targets.dim() == 2 and targets.shape[1] == scores.shape[1] > 1
    if several:  # a value per label against 0/1 targets: multi-label
        if not is_binary_labels(targets.reshape(-1)):
            return None
    elif targets.reshape(len(targets), -1).shape[1] != 1:
        return None
    elif scores.shape[1] == 1:  # one logit, or a probability, against 0/1 labels
        if not is_binary_labels(targets.reshape(-1)):
            return None
    elif targets.is_floating_point() or not ((targets >= 0) & (targets < scores.shape[1])).all():
        return None
    within = bool(((scores >= 0) & (scores <= 1)).all())
    if several:
        return "multilabel " + ("probabilities" if within else "logits")
    sums_to_one = torch.allclose(scores.sum(1), torch.ones(len(scores)), atol=1e-4)
    return "probabilities" if within and (sums_to_one or scores.shape[1] == 1) else "logits"


def as_classes(outputs: Tensor, how: str) -> dict[str, Tensor]:
    """A classifier's outputs as its class and probabilities: of each class, of class 1 for
    one value, of each label (and 0/1 per label) for a multi-label one."""
    scores = outputs.reshape(len(outputs), -1).float()
    given = how.endswith("probabilities")
    if how.startswith("multilabel") or scores.shape[1] == 1:
        prob = scores if given else scores.sigmoid()
        prob = prob if how.startswith("multilabel") else prob[:, 0]
        return {"prediction": (prob > 0.5).long(), "prob": prob}
    prob = scores if given else scores.softmax(1)
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
    if isinstance(output, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in output):
        return {f"output_{k}": value for k, value in enumerate(output)}
    held = output.values() if isinstance(output, Mapping) else output
    inside = isinstance(output, (Mapping, tuple, list)) and output
    kinds = f" of {', '.join(sorted({type(v).__name__ for v in held}))}" if inside else ""
    raise UserError(
        f"The model's predictions are {type(output).__name__}s{kinds}; predict.py and serve.py "
        "take a tensor, a tuple or a dict of tensors per batch, each with a row per input. "
        "Return one of those from `predict_step`."
    )


def prediction_columns(outputs: Sequence[Any], task: str | None = None) -> dict[str, Tensor]:
    """The CSV's columns from what the model returned for each batch (see the docstring)."""
    import torch

    if not outputs:
        raise UserError("There is nothing to predict: the inputs are empty.")
    named = [named_outputs(output, task) for output in outputs]
    if any(list(out) != list(named[0]) for out in named):
        raise UserError(
            f"The model's predictions name other outputs from one batch to the next ("
            f"{', '.join(named[0])}, then {', '.join(next(o for o in named if list(o) != list(named[0])))}); "
            "predict.py writes a column group per output: return the same ones for every batch."
        )
    table = columns({key: torch.cat([_rows(out[key]) for out in named]) for key in named[0]})
    lengths = {key: len(values) for key, values in table.items()}
    if len(set(lengths.values())) > 1:
        raise UserError(
            f"The model's predictions have no row per input ({', '.join(f'{k}: {n} rows' for k, n in lengths.items())}); "
            "return a tensor, a tuple or a dict of tensors with a row per input from `predict_step`."
        )
    return table


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


def write_predictions(table: Mapping[str, Any], path: Path) -> None:
    """CSV with one row per input: index, then the columns (tensors, or lists of names); written
    whole to a temporary file first, so an interrupted run leaves no half-written CSV."""
    lines = [",".join(["index", *table])]
    values = (column.tolist() if hasattr(column, "tolist") else column for column in table.values())
    for i, row in enumerate(zip(*values, strict=True)):
        cells = (f"{v:.6f}" if isinstance(v, float) else str(v) for v in row)
        lines.append(",".join([str(i), *cells]))
    from ..reliability.atomic_io import atomic_write_text

    atomic_write_text(path, "\n".join(lines) + "\n")  # no `.part` left, full disk or not


def main() -> None:
    """Console-script entry point (`my-project-predict`)."""
    entry.main("predict", predict)


if __name__ == "__main__":
    main()
