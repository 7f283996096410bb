"""What a model takes, read from real batches of its data, and inputs from outside (a request to
serve.py, a file for predict.py) checked against it and made into a batch shaped as the data's.

A batch's inputs are the batch itself, or its first element (``(x, y, ...)``): one tensor, its
shape past the first dimension fixed; or a dict of tensors (a padding ``collate_fn``'s), whose
inputs are the keys the model reads (its ``predict_step``, else ``forward``, on a real batch):
each of its number of dimensions and dtype, its sizes past the first fixed at the data's, free
where the data's batches vary in them (a sequence's padded length), and then equal where the
data's are equal in every batch (``tokens`` and ``mask``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

ONE = ""  # the name of a model's one input tensor
Arrays = dict[str, "np.ndarray"]


class Refused(ValueError):
    """Inputs from outside that the model cannot take: the message is a predicate of one
    sentence ("holds inputs of shape (1, 2), ..."), which the caller gives its subject."""


@dataclass(frozen=True)
class Spec:
    """One input: its name, its shape past the first dimension (None: any size), its dtype."""

    name: str
    shape: tuple[int | None, ...]
    dtype: str

    def shown(self) -> str:
        sizes = ["N", *("*" if n is None else str(n) for n in self.shape)]
        return f"({', '.join(sizes)}{',' * (len(sizes) == 1)}) {self.dtype}"


@dataclass(frozen=True)
class Signature:
    """What the model takes: one tensor (``named`` false) or named tensors; ``ties``: groups of
    (input, dimension past the first) of equal size; ``example``: one sample of the data's batch
    (CPU tensors), which gives a batch made from inputs its other parts."""

    inputs: tuple[Spec, ...]
    named: bool
    ties: tuple[tuple[tuple[int, int], ...], ...]
    example: Any

    def shown(self) -> str:
        """``(N, 16) float32``, or ``input_ids (N, *) int64, lengths (N,) int64`` (``*``: a size
        the data's batches vary in)."""
        if not self.named:
            return self.inputs[0].shown()
        return ", ".join(f"{spec.name} {spec.shown()}" for spec in self.inputs)

    def request(self) -> str:
        """What a request to serve.py sends: ``{"inputs": ...}``."""
        if not self.named:
            return '{"inputs": [...]}, inputs shaped ' + self.shown()
        named = ", ".join(f'"{spec.name}": [...]' for spec in self.inputs)
        return '{"inputs": {' + named + "}}, shaped " + self.shown()

    def check(self, given: Any) -> tuple[Arrays, bool]:
        """``given`` (JSON's lists, arrays of a file; for named inputs a dict of them) as arrays
        shaped as a batch of the data's inputs, by name, and whether it held one input alone;
        else :class:`Refused`."""
        if not self.named:
            array, single = self._one(given)
            return {ONE: array}, single
        if not isinstance(given, Mapping) or set(given) != {s.name for s in self.inputs}:
            held = f"the keys {sorted(given)}" if isinstance(given, Mapping) else "no named arrays"
            raise Refused(f"holds {held}, not the model's inputs {self._names()}")
        arrays = {spec.name: _numbers(given[spec.name], spec) for spec in self.inputs}
        singles = {
            arr.ndim == len(spec.shape)
            for spec, arr in zip(self.inputs, arrays.values(), strict=True)
        }
        single = singles == {True}
        for spec in self.inputs:
            array = arrays[spec.name] = arrays[spec.name][None] if single else arrays[spec.name]
            fixed = all(
                n is None or n == m for n, m in zip(spec.shape, array.shape[1:], strict=False)
            )
            if array.ndim != len(spec.shape) + 1 or not len(array) or not fixed:
                raise Refused(
                    f"holds `{spec.name}` of shape {array.shape}, where the model takes "
                    f"{spec.shown()} (or one input without the first dimension)"
                )
        counts = {name: len(array) for name, array in arrays.items()}
        if len(set(counts.values())) > 1:
            raise Refused(f"holds inputs of different counts ({_listed(counts)})")
        for tie in self.ties:
            sizes = {f"{self.inputs[i].name} {d + 1}": arrays[self.inputs[i].name].shape[d + 1]
                     for i, d in tie}  # fmt: skip
            if len(set(sizes.values())) > 1:
                raise Refused(
                    f"holds inputs whose sizes must be equal, as in the data ({_listed(sizes)}, "
                    "by name and dimension)"
                )
        for name, array in arrays.items():
            _finite(array.reshape(len(array), -1), f" of `{name}`")
        return arrays, single

    def _one(self, given: Any) -> tuple[np.ndarray, bool]:
        (spec,) = self.inputs
        shape = tuple(int(n) for n in spec.shape if n is not None)
        array = _numbers(given, spec)
        short = shape[1:] if len(shape) == 3 and shape[0] == 1 else shape  # no channel axis
        single = array.shape in (shape, short)
        if single or array.shape[1:] == short:
            array = array.reshape(-1, *shape)
        if array.shape[1:] != shape or not len(array):
            raise Refused(
                f"holds inputs of shape {array.shape}, where the model takes {spec.shown()} "
                "(or one input without the first dimension)"
            )
        _finite(array.reshape(len(array), -1), "")
        return array, single

    def _names(self) -> str:
        return ", ".join(f"`{spec.name}`" for spec in self.inputs)

    def batch(self, arrays: Arrays) -> Any:
        """Checked inputs as a batch of the data: a predict_step that unpacks ``x, y = batch``
        or reads ``batch["label"]`` gets it, the parts that are not inputs as zeros."""
        import torch

        tensors = {name: torch.from_numpy(array) for name, array in arrays.items()}
        count = len(next(iter(tensors.values())))
        inputs = tensors[ONE] if not self.named else tensors
        data = self.example[0] if isinstance(self.example, (list, tuple)) else self.example
        if isinstance(data, Mapping):
            inputs = {
                key: tensors.get(key, zeros_like(value, count)) for key, value in data.items()
            }
        if not isinstance(self.example, (list, tuple)):
            return inputs
        rest = [zeros_like(part, count) for part in self.example[1:]]
        return (inputs, *rest) if isinstance(self.example, tuple) else [inputs, *rest]


def zeros_like(part: Any, count: int) -> Any:
    """Zeros in place of a part of the data's one sample, for ``count`` samples."""
    return part.new_zeros(count, *part.shape[1:]) if hasattr(part, "new_zeros") else part


def inputs_of(batch: Any) -> Any:
    """A batch's inputs: its first element (``(x, y)``), or the batch itself."""
    return batch[0] if isinstance(batch, (list, tuple)) else batch


def samples_in(inputs: Any) -> int:
    """The number of samples of a batch's inputs (a tensor, or a dict of them)."""
    if isinstance(inputs, Mapping):
        return samples_in(next(iter(inputs.values()))) if inputs else 0
    return len(inputs)


def signature_of(batches: Sequence[Any], model: Any, own: bool, name: str) -> Signature:
    """The signature of the data's ``batches`` (the first ones of a split) for ``model``:
    ``own``, whether it has its own predict_step. Reads the keys of dict inputs by running the
    model on the first batch; what that raises is the caller's to judge."""
    import torch
    from lightning_utilities.core.apply_func import apply_to_collection

    first = inputs_of(batches[0])
    example = apply_to_collection(batches[0], torch.Tensor, lambda t: t[:1].cpu())
    if isinstance(first, torch.Tensor) and first.dim() >= 1:
        spec = Spec(ONE, tuple(first.shape[1:]), _dtype(first))
        return Signature((spec,), False, (), example)
    if not (isinstance(first, Mapping) and any(_is_rows(v) for v in first.values())):
        raise Refused(
            f"{name} takes {type(first).__name__} inputs; serve.py, export.py and predict.py's "
            "input files take a tensor, a batch of samples along its first dimension, or a "
            "dict of such tensors"
        )
    keys = keys_read(model, batches[0], own)
    others = [k for k in keys if not _is_rows(first[k])]
    if others:
        raise Refused(
            f"{name} reads `{others[0]}` from its batches, a {type(first[others[0]]).__name__}; "
            "serve.py and predict.py's input files give it tensors of a row per sample only"
        )
    sizes: dict[tuple[int, int], list[int]] = {}
    for batch in batches:
        for i, key in enumerate(keys):
            for d, n in enumerate(inputs_of(batch)[key].shape[1:]):
                sizes.setdefault((i, d), []).append(int(n))
    varying = [where for where, seen in sizes.items() if len(set(seen)) > 1]

    def size(i: int, d: int) -> int | None:  # free where the data's batches vary in it
        return None if (i, d) in varying else sizes[i, d][0]

    specs = tuple(
        Spec(k, tuple(size(i, d) for d in range(first[k].dim() - 1)), _dtype(first[k]))
        for i, k in enumerate(keys)
    )
    groups: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for where in varying:
        groups.setdefault(tuple(sizes[where]), []).append(where)
    ties = tuple(tuple(group) for group in groups.values() if len(group) > 1)
    return Signature(specs, True, ties, example)


def keys_read(model: Any, batch: Any, own: bool) -> list[str]:
    """The keys of a dict batch's inputs that the model reads on ``batch`` (through its
    ``predict_step``, else ``forward``), in the order it reads them; all of them where it
    walks the dict whole."""
    import torch

    reads = _Reads(inputs_of(batch))
    whole: Any = reads
    if isinstance(batch, (list, tuple)):
        whole = type(batch)([reads, *batch[1:]]) if isinstance(batch, list) else (reads, *batch[1:])
    with torch.no_grad():
        model.predict_step(whole, 0) if own else model(reads)
    return reads.read or list(reads.data)


class _Reads(dict):
    """A dict batch that notes the keys read from it (``**batch`` reads them all)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        self.data, self.read = dict(data), []  # type: ignore[var-annotated]

    def _note(self, *keys: Any) -> None:
        self.read += [k for k in keys if k in self.data and k not in self.read]

    def __getitem__(self, key: Any) -> Any:
        self._note(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._note(key)
        return super().get(key, default)

    def __iter__(self) -> Any:
        self._note(*self.data)
        return super().__iter__()

    def keys(self) -> Any:
        self._note(*self.data)
        return super().keys()

    def values(self) -> Any:
        self._note(*self.data)
        return super().values()

    def items(self) -> Any:
        self._note(*self.data)
        return super().items()


def _finite(rows: np.ndarray, of: str) -> None:
    """Refuse rows (inputs flattened) holding NaN or an infinity, naming them."""
    import numpy as np

    if rows.dtype.kind != "f":
        return
    bad = np.flatnonzero(~np.isfinite(rows).all(axis=1)).tolist()
    if bad:
        which = "its one input" if len(rows) == 1 else f"{len(bad)} of its {len(rows)} inputs, "
        which += "" if len(rows) == 1 else rows_named(bad)
        raise Refused(
            f"has NaN or infinite values{of} in {which}, for which a model's outputs mean nothing"
        )


def counted(count: int, noun: str) -> str:
    """``1 prediction``, ``2 predictions``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def rows_named(rows: Sequence[int]) -> str:
    """``row 3 (counting from 0)``, ``rows 1, 3 and 8 (counting from 0)``; the first ten."""
    shown = [str(row) for row in rows[:10]]
    if len(rows) == 1:
        return f"row {shown[0]} (counting from 0)"
    listed = f"{', '.join(shown[:-1])} and {shown[-1]}" if len(rows) <= 10 else ", ".join(shown)
    more = f" and {len(rows) - 10} more" if len(rows) > 10 else ""
    return f"rows {listed}{more} (counting from 0)"


def _numbers(given: Any, spec: Spec) -> np.ndarray:
    """``given`` as an array of ``spec``'s dtype; whole numbers only for an integer dtype."""
    import numpy as np

    where = f"`{spec.name}`" if spec.name else "the inputs"
    if np.dtype(spec.dtype).kind != "b" and _holds_booleans(given):
        raise Refused(  # numpy would read them as 1 and 0, silently
            f"holds true or false in {where}, where the model takes numbers ({spec.dtype}); "
            "send the numbers the data gives the model (1 and 0, if that is what they mean)"
        )
    try:
        array = np.asarray(given, dtype=np.float64)
    except (ValueError, TypeError) as error:
        raise Refused(f"cannot be read as arrays of numbers ({said(error)})") from error
    if np.dtype(spec.dtype).kind in "iub":
        whole = np.isfinite(array) & (array == np.round(array))
        if not whole.all():
            raise Refused(f"holds values of {where} that are not whole numbers ({spec.dtype})")
    return array.astype(spec.dtype, copy=False)


def _holds_booleans(given: Any) -> bool:
    """Whether ``given`` (JSON's nested lists, or an array of a file) holds a true or false."""
    import numpy as np

    if isinstance(given, np.ndarray):
        return given.dtype.kind == "b"
    pending = [given]
    while pending:
        value = pending.pop()
        if isinstance(value, (bool, np.bool_)):
            return True
        if isinstance(value, (list, tuple)):
            pending.extend(value)
    return False


def said(error: BaseException) -> str:
    """A library's complaint inside one sentence: ``Type: message`` without full stops."""
    message = " ".join(str(error).split()).replace(". ", "; ").rstrip(".")
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _listed(values: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {value}" for name, value in values.items())


def _dtype(tensor: Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _is_rows(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.dim() >= 1


def chunks(arrays: Arrays, size: int) -> Iterable[Arrays]:
    """The rows of ``arrays`` in pieces of ``size``."""
    count = len(next(iter(arrays.values())))
    for start in range(0, count, size):
        yield {name: array[start : start + size] for name, array in arrays.items()}


def call_model(model: Any, batch: Any, own: bool) -> Any:
    """What predict.py's Lightning loop returns for ``batch``: the module's own
    ``predict_step``, or ``forward`` of the batch's inputs."""
    return model.predict_step(batch, 0) if own else model(inputs_of(batch))
