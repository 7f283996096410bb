"""MNIST from the standard IDX files under ``data_dir``, downloaded (and checksummed) when missing."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from ..machinery.data.in_memory import InMemoryDataModule, Split
from ..machinery.errors import UserError
from .idx import IDXFormatError, read_idx

# The four files of the data set and their MD5 sums (the same sums torchvision checks).
MNIST_FILES: dict[str, str] = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
MNIST_MIRRORS: tuple[str, ...] = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)


class MNISTDownloadError(UserError, RuntimeError):
    """MNIST files are missing and could not be downloaded (offline, or a bad checksum)."""


class MNISTFilesMissingError(UserError, FileNotFoundError):
    """MNIST files are missing and downloading is switched off."""


def md5sum(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def find_file(root: Path, name: str) -> Path | None:
    """The file as downloaded (``.gz``) or already unpacked (without ``.gz``), if present."""
    for candidate in (root / name, root / name.removesuffix(".gz")):
        if candidate.is_file():
            return candidate
    return None


def download_mnist(
    root: str | Path,
    files: Mapping[str, str] = MNIST_FILES,
    mirrors: Sequence[str] = MNIST_MIRRORS,
    timeout: float = 10.0,
) -> Path:
    """Make sure every file in ``files`` is under ``root``; download the missing ones.

    Each download goes to a temporary file, is checked against its MD5 sum, then moved into
    place, so an interrupted or corrupted download never leaves a file that looks complete.
    """
    root = Path(root)
    absolute = root.absolute()
    made = [f for f in (absolute, *absolute.parents) if not f.exists()]  # innermost first
    for name, checksum in files.items():
        if find_file(root, name) is not None:
            continue
        root.mkdir(parents=True, exist_ok=True)
        errors = []
        for mirror in mirrors:
            url = mirror + name
            parts: list[Path] = []
            try:
                with (
                    urllib.request.urlopen(url, timeout=timeout) as response,
                    tempfile.NamedTemporaryFile(dir=root, delete=False, suffix=".part") as tmp,
                ):
                    parts.append(Path(tmp.name))
                    shutil.copyfileobj(response, tmp)
                tmp_path = Path(tmp.name)
            except (urllib.error.URLError, OSError, TimeoutError) as error:
                for part in parts:  # cut off mid-way: no half file left
                    part.unlink(missing_ok=True)
                errors.append(f"{url}: {getattr(error, 'reason', error)}")
                continue
            actual = md5sum(tmp_path)
            if actual != checksum:
                tmp_path.unlink()
                errors.append(f"{url}: checksum {actual} does not match the expected {checksum}")
                continue
            tmp_path.replace(root / name)
            break
        else:
            for folder in made:  # made for this download: nothing is left where nothing came
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only if empty
            raise MNISTDownloadError(
                f"MNIST file {name} is not in {root.resolve()} and could not be downloaded "
                f"({'; '.join(errors)}). If this machine is offline, copy the four MNIST files "
                f"({', '.join(files)}; gzipped or not) into {root.resolve()} from a machine that "
                "has them, or point `data.data_dir=` at a folder that holds them."
            )
    return root


class MNISTDataModule(InMemoryDataModule):
    """MNIST: 60k training images (split into train/val) and the official 10k test set."""

    def model_kwargs(self) -> dict[str, Any]:
        """What the model takes from this data (README, "Bring your own model and data")."""
        return {"num_classes": 10, "in_shape": (1, 28, 28)}

    def __init__(
        self,
        data_dir: str = "data/mnist",
        batch_size: int = 128,
        val_fraction: float = 1 / 12,
        split_seed: int = 12345,
        num_workers: int = 0,
        pin_memory: bool | None = None,
        persistent_workers: bool = False,
        shuffle_seed: int | None = None,
        mirrors: Sequence[str] = MNIST_MIRRORS,
        download: bool = True,
    ) -> None:
        super().__init__(
            batch_size=batch_size,
            val_fraction=val_fraction,
            test_fraction=0.0,
            split_seed=split_seed,
            num_workers=num_workers,
            pin_memory=pin_memory,
            persistent_workers=persistent_workers,
            shuffle_seed=shuffle_seed,
        )
        self.data_dir = Path(data_dir)
        self.mirrors = tuple(mirrors)
        self.download = download

    def prepare_data(self) -> None:
        """Download once per node (Lightning calls this on local rank 0 only)."""
        if self.download:
            download_mnist(self.data_dir, mirrors=self.mirrors)

    def _read(self, prefix: str) -> Split:
        paths = {}
        for kind in ("images", "labels"):
            name = next(n for n in MNIST_FILES if n.startswith(f"{prefix}-{kind}"))
            path = find_file(self.data_dir, name)
            if path is None:
                raise MNISTFilesMissingError(
                    f"MNIST file {name} is missing from {self.data_dir.resolve()}. Run with "
                    "`data.download=true` on a machine with network access, copy the files "
                    "there, or point `data.data_dir=` at the folder that holds them."
                )
            paths[kind] = path
        images = torch.from_numpy(read_idx(paths["images"]).copy()).float().unsqueeze(1) / 255.0
        labels = torch.from_numpy(read_idx(paths["labels"]).astype("int64"))
        if len(images) != len(labels):
            raise IDXFormatError(
                f"{paths['images']} holds {len(images)} images but {paths['labels']} holds "
                f"{len(labels)} labels; one of them is from another data set or truncated."
            )
        return images, labels

    def load(self) -> tuple[Split, Split | None]:
        return self._read("train"), self._read("t10k")
