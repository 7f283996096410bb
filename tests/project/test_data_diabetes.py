"""The regression example's data: scikit-learn's diabetes, standardised with training-split
statistics only, and what it tells the model."""

from __future__ import annotations

import torch

from my_project.data.diabetes import DiabetesDataModule


def test_features_are_standardised_on_the_training_split_only() -> None:
    data = DiabetesDataModule()
    data.setup()
    sizes = {name: len(y) for name, (_, y) in data.splits.items()}
    assert sum(sizes.values()) == 442 and sizes["test"] == sizes["val"] == round(442 * 0.15)
    train_x = data.splits["train"][0]
    torch.testing.assert_close(train_x.mean(dim=0), torch.zeros(10), atol=1e-5, rtol=0)
    torch.testing.assert_close(train_x.std(dim=0), torch.ones(10), atol=1e-5, rtol=0)
    # The other splits use the training split's statistics, so theirs are not exactly 0 and 1.
    assert data.splits["test"][0].mean(dim=0).abs().max() > 1e-3


def test_the_model_is_told_the_input_shape_and_the_targets_scale() -> None:
    offered = DiabetesDataModule().model_kwargs()
    assert offered["in_shape"] == (10,)
    assert 100 < offered["target_mean"] < 200 and 50 < offered["target_std"] < 100
    data = DiabetesDataModule(batch_size=16)
    data.setup()
    x, y = next(iter(data.train_dataloader()))
    assert x.shape == (16, 10) and y.dtype == torch.float32
