"""Prediction: `python predict.py ckpt_path=PATH` writes what a checkpoint's model predicts for
a split of the run's `data`, or for files of new inputs (``input_path=``, checked and batched as
the data's: `inputs.py`, `input_files.py`), as ``predictions.csv``, with Lightning's
``trainer.predict``. A module's own ``predict_step`` gets whole batches; any other gets their
inputs through ``forward``, a classifier's outputs (scores against class indices, one value
against 0/1 targets, a value per label against 0/1 targets of shape (N, L)) as its class or
labels, ``prediction``, and ``prob``, its probabilities. A tensor, a tuple (``output_<k>``) or
a dict of tensors a batch becomes a column group per output (``<name>_<k>`` for several values),
after ``target`` and, for several loaders, ``dataloader`` (``file`` for a folder of files);
outputs of batches padded to other lengths leave the cells past a batch's own length empty.
A value of a file the model fails on, where the rule of `run/boundary.py` says the inputs
explain it (a token id past the vocabulary), is one paragraph naming the file and its rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from ..errors import UserError
from . import entry
from .boundary import describe, teams_bug
from .checkpoint_config import checkpoint_run
from .input_files import input_files, read_inputs
from .inputs import (
    Arrays,
    Refused,
    Signature,
    call_model,
    chunks,
    counted,
    inputs_of,
    rows_named,
    samples_in,
    signature_of,
)

if TYPE_CHECKING:
    from torch import Tensor

Table = dict[str, "Tensor | list[Any]"]  # the CSV's columns: tensors, or lists with empty cells


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
    pieces: list[Piece] = []
    if given:  # the files' inputs, checked as the data's, in batches shaped as the data's
        source = f"input_path={given}"
        signature = signature_for(model, loaders, own, source)
        files = {file: read_inputs(file, signature) for file in input_files(str(given))}
        size = int(cfg.batch_size)
        pieces = [
            Piece(file, start, part)
            for file, arrays in files.items()
            for start, part in zip(itertools.count(0, size), chunks(arrays, size), strict=False)
        ]
        batches = [Batches([signature.batch(p.arrays) for p in pieces], whole=own, targets=False)]
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
        if given and teams_bug(error, inputs_given=True) is None and takes(model, own, first):
            raise refused_inputs(model, own, signature, pieces, batches[0], error) from error
        if own or teams_bug(error, inputs_given=True) is not None:
            raise  # its own predict_step, or a bug of its forward: its traceback
        raise cannot_take(model, source, error) from error
    per_loader = outputs if len(batches) > 1 else [outputs or []]  # record what came out
    predicted = prediction_columns([out for outs in per_loader for out in outs or []], task)
    count = len(next(iter(predicted.values())))
    seen = [t for b in batches for t in b.targets]
    table: Table = {}
    if seen and all(isinstance(t, torch.Tensor) for t in seen):  # padded per batch, maybe
        table |= columns({"target": [t.long() if task is not None else t for t in seen]})
    if len(batches) > 1:
        table["dataloader"] = torch.cat([torch.full((b.rows,), i) for i, b in enumerate(batches)])
    table = {k: v for k, v in table.items() if len(v) == count}
    if given and Path(str(given)).is_dir():  # which file each row is of
        table["file"] = [
            file.name for file, arrays in files.items() for _ in range(samples_in(arrays))
        ]
    write_predictions({**table, **predicted}, path)
    print(f"Wrote {counted(count, 'prediction')} for {source} to {path}{score(predicted, table)}")
    return path


@dataclass(frozen=True)
class Piece:
    """The inputs of one batch made from a file: the file, its first row's number, the arrays."""

    file: Path
    start: int
    arrays: Arrays


def takes(model: Any, own: bool, batch: Any) -> bool:
    """Whether the model answers ``batch`` (on its device, as predict.py's loop calls it)."""
    import torch
    from lightning.fabric.utilities.apply_func import move_data_to_device

    try:
        with torch.no_grad():
            call_model(model.eval(), move_data_to_device(batch, model.device), own)
    except (RuntimeError, TypeError, ValueError, IndexError, KeyError):
        return False
    return True


def refused_inputs(
    model: Any,
    own: bool,
    signature: Signature,
    pieces: Sequence[Piece],
    batches: Batches,
    error: BaseException,
) -> UserError:
    """The paragraph for inputs of a file that the model fails on, where its values explain the
    failure (the rule of `run/boundary.py`) and the model answers its data's own batch: the
    file and the rows it fails on alone (of the first 1,000 of the batch), else the batch's."""
    done = batches.yielded  # the batch that failed is among the last ones fetched, or earlier
    order = [*range(max(0, done - 2), done), *range(max(0, done - 2))]
    failed = (pieces[i] for i in order if not takes(model, own, signature.batch(pieces[i].arrays)))
    piece = next(failed, None)
    name = type(model).__name__
    advice = (
        "predict.py passes a file's values to the model as they are: pass the values the data "
        "module gives it (token ids within its vocabulary, say)."
    )
    if piece is None:  # it failed in the loop, but answers each batch alone
        return UserError(
            f"{name} fails on the inputs of {', '.join(sorted({str(p.file) for p in pieces}))}: "
            f"{describe(error)} {advice}"
        )
    count = samples_in(piece.arrays)
    alone = [
        piece.start + row
        for row in range(min(count, 1000))
        if not takes(
            model, own, signature.batch({k: a[row : row + 1] for k, a in piece.arrays.items()})
        )
    ]
    where = (
        rows_named(alone)
        if alone
        else f"rows {piece.start} to {piece.start + count - 1} taken together (counting from 0)"
    )
    return UserError(
        f"{piece.file} holds inputs {name} cannot take, {where}: {describe(error)} {advice}"
    )


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


def score(predicted: Table, table: Table) -> str:
    """`` (accuracy ...)`` or `` (RMSE ...)`` against the split's targets, where they compare
    (one value each a row, no cell empty)."""
    import torch

    guess, target = predicted.get("prediction"), table.get("target")
    if not isinstance(guess, torch.Tensor) or not isinstance(target, torch.Tensor):
        return ""
    if target.dim() != 1 or guess.dim() != 1:
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
        self.rows = self.yielded = 0

    def __iter__(self) -> Iterator[Any]:
        self.targets, self.rows, self.yielded = [], 0, 0
        for batch in self.loader:
            self.yielded += 1
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


def prediction_columns(outputs: Sequence[Any], task: str | None = None) -> Table:
    """The CSV's columns from what the model returned for each batch (see the docstring)."""
    import torch

    if not outputs:
        raise UserError("There is nothing to predict: the inputs are empty.")
    named = [named_outputs(output, task) for output in outputs]
    bare = [isinstance(output, torch.Tensor) and task is None for output in outputs]
    if all(bare):  # one name for every batch, however many values a row of each holds
        wide = any(out.dim() > 1 and out[0].numel() != 1 for out in outputs)
        named = [{"output" if wide else "prediction": out} for out in outputs]
    if any(list(out) != list(named[0]) for out in named):
        raise UserError(
            f"The model's predictions name other outputs from one batch to the next ("
            f"{', '.join(named[0])}, then {', '.join(next(o for o in named if list(o) != list(named[0])))}); "
            "predict.py writes a column group per output: return the same ones for every batch."
        )
    table = columns({key: [out[key] for out in named] for key in named[0]})
    lengths = {key: len(values) for key, values in table.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{key}: {counted(n, 'row')}" for key, n in lengths.items())
        raise UserError(
            f"The model's predictions have no row per input ({shown}); "
            "return a tensor, a tuple or a dict of tensors with a row per input from `predict_step`."
        )
    return table


def columns(named: Mapping[str, Tensor | list[Tensor]]) -> Table:
    """Each output (a tensor of a row per sample, or the tensors of each batch) as a column, or
    as ``<name>_<k>`` for several values a row, flattened. Tensors of batches padded to other
    sizes (per-token outputs of sequences padded per batch) are padded to the largest size of
    each dimension first, so ``<name>_<k>`` is the same position in every row; a cell a batch
    has no value for is empty (None): the column is then a Python list, not a tensor."""
    import torch

    table: Table = {}
    for key, values in named.items():
        given = values if isinstance(values, list) else [values]
        parts = [part.detach().cpu() for part in given]
        parts = [part.reshape(1, 1) if not part.dim() else part for part in parts]
        filled = [torch.ones(part.shape, dtype=torch.bool) for part in parts]
        if len({part.shape[1:] for part in parts}) > 1:
            parts, filled = padded(parts), padded(filled)
        flat, kept = torch.cat([_rows(p) for p in parts]), torch.cat([_rows(f) for f in filled])
        names = [key] if flat.shape[1] == 1 else [f"{key}_{k}" for k in range(flat.shape[1])]
        for k, name in enumerate(names):
            column = flat[:, k]
            table[name] = column if bool(kept[:, k].all()) else [
                value if present else None
                for value, present in zip(column.tolist(), kept[:, k].tolist(), strict=True)
            ]  # fmt: skip
    return table


def padded(parts: Sequence[Tensor]) -> list[Tensor]:
    """``parts`` (a batch's rows each) zero-padded at the end of each dimension past the first
    to the largest size any of them has; parts of other numbers of dimensions are flattened
    first (their values then padded at the end of each row)."""
    if len({part.dim() for part in parts}) > 1:
        parts = [_rows(part) for part in parts]
    largest = [max(sizes) for sizes in zip(*(part.shape[1:] for part in parts), strict=True)]
    grown = []
    for part in parts:
        room = part.new_zeros((len(part), *largest))
        room[tuple([slice(None), *(slice(0, n) for n in part.shape[1:])])] = part
        grown.append(room)
    return grown


def _rows(tensor: Any) -> Tensor:
    """One row per sample, on the CPU."""
    tensor = tensor.detach().cpu()
    return tensor.reshape(len(tensor), -1) if tensor.dim() else tensor.reshape(1, 1)


def write_predictions(table: Mapping[str, Any], path: Path) -> None:
    """CSV with one row per input: index, then the columns (tensors, or lists of names or of
    values with None for an empty cell); written whole to a temporary file first, so an
    interrupted run leaves no half-written CSV."""
    lines = [",".join(["index", *table])]
    values = (column.tolist() if hasattr(column, "tolist") else column for column in table.values())
    for i, row in enumerate(zip(*values, strict=True)):
        cells = (f"{v:.6f}" if isinstance(v, float) else "" if v is None else str(v) for v in row)
        lines.append(",".join([str(i), *cells]))
    from ..reliability.atomic_io import atomic_write_text

    atomic_write_text(path, "\n".join(lines) + "\n")  # no `.part` left, full disk or not


def main() -> None:
    """Console-script entry point (`my-project-predict`)."""
    entry.main("predict", predict)


if __name__ == "__main__":
    main()
