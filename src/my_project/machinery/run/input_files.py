"""predict.py's ``input_path=``: new inputs in a file (``.npy``; ``.npz`` of named arrays; ``.csv``,
a row per input) or a folder of them, read as arrays and checked as the data's inputs
(`inputs.py`); what cannot be read or does not fit is one paragraph naming the file."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from .boundary import describe
from .inputs import Arrays, Refused, Signature, counted

if TYPE_CHECKING:
    import numpy as np

SUFFIXES = (".npy", ".npz", ".csv")


def input_files(given: str) -> list[Path]:
    """The file ``input_path`` names, or the files of the folder it names, in name order."""
    path = Path(given)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
        if not files:
            raise UserError(
                f"input_path={given} is a folder without a .npy, .npz or .csv file; pass a file "
                "of inputs or a folder of them."
            )
        return files
    if not path.is_file() or path.suffix.lower() not in SUFFIXES:
        problem = "is not a .npy, .npz or .csv file" if path.is_file() else "does not exist"
        raise UserError(
            f"input_path={given} {problem}; pass a .npy file (`numpy.save`), a .npz of named "
            "arrays (`numpy.savez`), a .csv file of a row per input, or a folder of them."
        )
    return [path]


def read_inputs(path: Path, signature: Signature) -> Arrays:
    """The inputs of ``path``, checked against ``signature``: arrays by name."""
    import numpy as np

    suffix = path.suffix.lower()
    if signature.named and suffix != ".npz":
        raise UserError(
            f"{path} holds one array, but the model takes named inputs ({signature.shown()}); "
            "save them as a .npz file of those names, `numpy.savez(path, "
            + ", ".join(f"{spec.name}=..." for spec in signature.inputs)
            + ")`, padded as the data module pads them."
        )
    try:
        if suffix == ".csv":
            given: Any = csv_rows(path)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                given = {name: archive[name] for name in archive.files}
        else:
            given = np.load(path, allow_pickle=False)
    except ValueError as error:
        if "allow_pickle" not in str(error):
            raise UserError(unreadable(path, error)) from error
        if "Object arrays" not in str(error):  # not numpy's format: pickled data, or noise
            raise UserError(
                f"{path} is not a file `numpy.save` or `numpy.savez` wrote: numpy can read it "
                "only as pickled Python data, and predict.py never unpickles a file (that could "
                "run code in it). "
                "Save the inputs with `numpy.save`, `numpy.savez` (named arrays) or as a .csv "
                "file of a row per input."
            ) from error
        raise UserError(  # numpy's advice, allow_pickle=True, would run code the file holds
            f"{path} holds Python objects, not numbers (an array of dtype object: sequences of "
            "different lengths, strings or None), and predict.py reads numbers only, never "
            "unpickling a file. Save an array of numbers instead: pad sequences to one length "
            "(as the data module pads them), turn text into the ids the model takes, then "
            "`numpy.save(path, numpy.asarray(values, dtype=numpy.int64))` (or float32)."
        ) from error
    except (OSError, EOFError, zipfile.BadZipFile) as error:
        raise UserError(unreadable(path, error)) from error
    if not signature.named:
        given = one_array(given, signature, path)
    try:
        arrays, _ = signature.check(given)
    except Refused as error:
        raise UserError(
            f"{path} {error}; pass inputs shaped as the training data's, {signature.shown()}, "
            "with the values the model takes (predict.py passes the file's values as they are: "
            "scale or encode them as the data module does first)."
        ) from error
    return arrays


def unreadable(path: Path, error: BaseException) -> str:
    """The paragraph for a file numpy or the .csv reader cannot read."""
    return (
        f"{path} cannot be read as inputs ({describe(error)}) Save them with `numpy.save`, "
        "`numpy.savez` (named arrays) or as a .csv file of a row per input."
    )


def one_array(given: Any, signature: Signature, path: Path) -> Any:
    """The array of a file for a model of one input: a .npz of one array; a .csv's rows,
    reshaped where they hold an input's values flattened (an image's pixels)."""
    import numpy as np

    if isinstance(given, dict):
        if len(given) != 1:
            raise UserError(
                f"{path} holds {len(given)} arrays ({', '.join(given)}), but the model takes one "
                f"input, {signature.shown()}; pass a .npy file or a .npz of one array."
            )
        (given,) = given.values()
    shape = tuple(n for n in signature.inputs[0].shape if n is not None)
    if path.suffix.lower() == ".csv" and len(shape) > 1 and given.shape[1] == np.prod(shape):
        given = given.reshape(-1, *shape)
    return given


def csv_rows(path: Path) -> np.ndarray:
    """A .csv file's rows as numbers, its header line (no cell a number) aside; an empty cell
    is NaN, which the check then names."""
    import csv

    import numpy as np

    with open(path, newline="") as handle:
        lines = [line for line in csv.reader(handle) if line]
    if lines and not any(_number(cell) is not None for cell in lines[0]):
        lines = lines[1:]
    if not lines:
        raise ValueError("no rows of numbers")
    width = len(lines[0])
    for row, line in enumerate(lines):
        if len(line) != width:
            raise ValueError(
                f"row {row} (from 0) has {counted(len(line), 'value')}, row 0 has {width}"
            )
        for column, cell in enumerate(line):
            if _number(cell) is None:
                raise ValueError(f"row {row}, column {column} (from 0) is {cell!r}, not a number")
    return np.array([[_number(cell) for cell in line] for line in lines], dtype=np.float64)


def _number(cell: str) -> float | None:
    if not cell.strip():
        return float("nan")
    try:
        return float(cell)
    except ValueError:
        return None
