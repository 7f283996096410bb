"""MNIST: the IDX reader on files the test writes, checksummed download, the offline error,
and a missing or corrupted data directory as one clear message."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from my_project.data.idx import IDXFormatError, read_idx, write_idx
from my_project.data.mnist import (
    MNIST_FILES,
    MNISTDataModule,
    MNISTDownloadError,
    download_mnist,
)
from my_project.machinery.errors import report_user_errors
from my_project.machinery.run.train import train

from ..machinery.helpers import FAST, compose_config
from .example import METRICS


def write_fake_mnist(
    root: Path, n_train: int = 120, n_test: int = 30, gz: bool = True
) -> dict[str, str]:
    """Write the four MNIST files with random content; return their MD5 sums."""
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    arrays = {
        "train-images-idx3-ubyte.gz": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte.gz": rng.integers(0, 10, n_train, dtype=np.uint8),
        "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    sums = {}
    for name, array in arrays.items():
        path = root / (name if gz else name.removesuffix(".gz"))
        write_idx(path, array)
        sums[name] = hashlib.md5(path.read_bytes()).hexdigest()
    return sums


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("suffix", [".idx", ".gz"])
def test_idx_round_trip(tmp_path: Path, dtype: type, suffix: str) -> None:
    array = (np.arange(2 * 3 * 4) - 5).reshape(2, 3, 4).astype(dtype)
    write_idx(tmp_path / f"a{suffix}", array)
    assert np.array_equal(read_idx(tmp_path / f"a{suffix}"), array)


def test_truncated_idx_file_is_reported_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "train-images-idx3-ubyte"
    write_idx(path, np.zeros((4, 28, 28), dtype=np.uint8))
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(IDXFormatError, match=r"truncated or corrupted.*Delete it"):
        read_idx(path)


def test_file_that_is_not_idx_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "t10k-labels-idx1-ubyte"
    path.write_bytes(b"<html>404</html>")
    with pytest.raises(IDXFormatError, match="not an IDX file"):
        read_idx(path)


def test_datamodule_reads_idx_files_into_train_val_test(tmp_path: Path) -> None:
    write_fake_mnist(tmp_path, gz=False)
    datamodule = MNISTDataModule(
        data_dir=str(tmp_path), batch_size=16, val_fraction=0.25, download=False
    )
    datamodule.prepare_data()
    datamodule.setup("fit")
    sizes = {name: len(labels) for name, (_, labels) in datamodule.splits.items()}
    assert sizes == {"train": 90, "val": 30, "test": 30}
    images, labels = next(iter(datamodule.train_dataloader()))
    assert images.shape == (16, 1, 28, 28) and images.min() >= 0 and images.max() <= 1
    assert labels.max() < 10


def test_download_fetches_missing_files_and_checks_their_sums(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    sums = write_fake_mnist(mirror)
    target = tmp_path / "data"
    download_mnist(target, files=sums, mirrors=[mirror.as_uri() + "/"])
    assert sorted(p.name for p in target.iterdir()) == sorted(MNIST_FILES)
    assert all(hashlib.md5((target / n).read_bytes()).hexdigest() == s for n, s in sums.items())


def test_download_rejects_a_file_with_the_wrong_checksum(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    sums = write_fake_mnist(mirror)
    wrong = dict.fromkeys(sums, "0" * 32)
    target = tmp_path / "data"
    with pytest.raises(MNISTDownloadError, match="checksum"):
        download_mnist(target, files=wrong, mirrors=[mirror.as_uri() + "/"])
    assert not any(target.glob("*.gz")) and not any(target.glob("*.part"))


def test_offline_error_says_where_to_put_the_files_and_leaves_no_folder(tmp_path: Path) -> None:
    # Port 9 (discard) on loopback refuses at once: the same path as a machine with no network.
    with pytest.raises(MNISTDownloadError) as info:
        download_mnist(tmp_path / "data" / "mnist", mirrors=["http://127.0.0.1:9/"], timeout=2)
    message = str(info.value)
    assert str((tmp_path / "data" / "mnist").resolve()) in message
    assert "train-images-idx3-ubyte.gz" in message and "offline" in message
    assert list(tmp_path.iterdir()) == []  # data/ and data/mnist/ were made for it: gone
    (tmp_path / "mine").mkdir()
    with pytest.raises(MNISTDownloadError):
        download_mnist(tmp_path / "mine", mirrors=["http://127.0.0.1:9/"], timeout=2)
    assert (tmp_path / "mine").is_dir()  # the team's own folder stays


def test_a_download_cut_off_leaves_no_part_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror = tmp_path / "mirror"
    sums = write_fake_mnist(mirror)
    (mirror / "keep").mkdir()  # downloads into the mirror: the folder is there already

    def cut_off(source: object, target: Any) -> None:
        target.write(b"half a file")
        raise OSError("connection reset")

    monkeypatch.setattr(shutil, "copyfileobj", cut_off)
    with pytest.raises(MNISTDownloadError, match="connection reset"):
        download_mnist(mirror / "keep", files=sums, mirrors=[mirror.as_uri() + "/"])
    assert list((mirror / "keep").iterdir()) == []


def train_in_process(overrides: list[str], output_dir: Path, capsys) -> tuple[int, str]:
    """`python train.py <overrides>` minus the new process: exit status and stderr."""
    cfg = compose_config(overrides, output_dir)
    with pytest.raises(SystemExit) as info:
        report_user_errors(train)(cfg)
    return int(info.value.code), capsys.readouterr().err


def test_missing_data_directory_says_where_the_files_should_be(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nowhere"
    overrides = [*FAST, *METRICS, "model=classifier", "data=mnist", "data.download=false"]
    overrides.append(f"data.data_dir={missing}")
    code, err = train_in_process(overrides, tmp_path / "run", capsys)
    assert code == 2 and f"is missing from {missing}" in err and "data.download=true" in err


def test_corrupted_idx_file_is_a_clean_error(tmp_path: Path, capsys) -> None:
    mnist_dir = tmp_path / "mnist"
    write_fake_mnist(mnist_dir)
    images = mnist_dir / "train-images-idx3-ubyte.gz"
    images.write_bytes(images.read_bytes()[:-200])
    overrides = [*FAST, *METRICS, "model=classifier", "data=mnist", "data.download=false"]
    overrides.append(f"data.data_dir={mnist_dir}")
    code, err = train_in_process(overrides, tmp_path / "run", capsys)
    assert code == 2 and "train-images-idx3-ubyte.gz: cannot be read as gzip IDX" in err
