"""Reader for the IDX format of the MNIST files (http://yann.lecun.com/exdb/mnist/).

Written here because torchvision (which has one) has no CPU build on every platform, and
the format is a 4-byte magic number, the dimensions, then raw big-endian data.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from ..machinery.errors import UserError

# Third byte of the magic number -> numpy dtype (big-endian where it matters).
_IDX_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


class IDXFormatError(UserError, ValueError):
    """The file is not a valid IDX file (truncated, corrupted, or another format).

    A :class:`UserError`: the entry points print its message and exit with status 2.
    """


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file, plain or gzip-compressed (``.gz``), into a numpy array."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            data = handle.read()
    except (OSError, EOFError) as error:  # gzip raises these on corrupted archives
        raise IDXFormatError(
            f"{path}: cannot be read as {'gzip ' if path.suffix == '.gz' else ''}IDX ({error})."
        ) from error
    return parse_idx(data, source=str(path))


def parse_idx(data: bytes, source: str = "<bytes>") -> np.ndarray:
    """Parse the bytes of an IDX file; raise :class:`IDXFormatError` naming what is wrong."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise IDXFormatError(
            f"{source}: not an IDX file (bad magic number {data[:4].hex() or 'empty'}); "
            "delete it and let it download again, or replace it with the original file."
        )
    dtype, ndim = _IDX_DTYPES[data[2]], data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IDXFormatError(f"{source}: truncated IDX header; delete the file and fetch it again.")
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) - header != expected:
        raise IDXFormatError(
            f"{source}: IDX header promises shape {shape} ({expected} bytes of data) but the file "
            f"holds {len(data) - header}; it is truncated or corrupted. Delete it and fetch it again."
        )
    return (
        np.frombuffer(data, dtype=dtype, offset=header)
        .reshape(shape)
        .astype(dtype.newbyteorder("="))
    )


def write_idx(path: str | Path, array: np.ndarray) -> None:
    """Write an array as an IDX file (gzip-compressed when the name ends in ``.gz``)."""
    path = Path(path)
    codes = {
        value.newbyteorder(">").str if value.itemsize > 1 else value.str: key
        for key, value in _IDX_DTYPES.items()
    }
    dtype = array.dtype.newbyteorder(">") if array.dtype.itemsize > 1 else array.dtype
    code = codes[dtype.str]
    header = bytes([0, 0, code, array.ndim]) + b"".join(
        int(d).to_bytes(4, "big") for d in array.shape
    )
    payload = header + np.ascontiguousarray(array, dtype=dtype).tobytes()
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as handle:
        handle.write(payload)
