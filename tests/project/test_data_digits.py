"""The default data: bundled digits, split deterministically from a seed."""

from __future__ import annotations

import torch

from my_project.data.digits import DigitsDataModule


def _splits(seed: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    datamodule = DigitsDataModule(split_seed=seed)
    datamodule.setup("fit")
    return datamodule.splits


def test_digits_splits_cover_all_1797_images_without_overlap() -> None:
    splits = _splits(0)
    sizes = {name: len(labels) for name, (_, labels) in splits.items()}
    assert sum(sizes.values()) == 1797
    assert sizes["val"] == sizes["test"] == round(1797 * 0.15)
    rows = [tuple(image.flatten().tolist()) for images, _ in splits.values() for image in images]
    assert len(set(rows)) > 1700  # a few digits are pixel-identical in the data set itself


def test_digits_split_is_a_function_of_the_seed() -> None:
    first, again, other = _splits(7), _splits(7), _splits(8)
    assert torch.equal(first["test"][1], again["test"][1])
    assert torch.equal(first["train"][0], again["train"][0])
    assert not torch.equal(first["test"][0], other["test"][0])


def test_digits_batches_have_the_shape_the_model_is_told() -> None:
    datamodule = DigitsDataModule(batch_size=32)
    datamodule.setup("fit")
    images, labels = next(iter(datamodule.train_dataloader()))
    assert images.shape == (32, *datamodule.model_kwargs()["in_shape"])
    assert datamodule.model_kwargs()["num_classes"] == 10
    assert images.dtype == torch.float32 and images.min() >= 0.0 and images.max() <= 1.0
    assert labels.dtype == torch.long and set(labels.tolist()) <= set(range(10))
