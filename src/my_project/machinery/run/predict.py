"""Prediction entry point: class probabilities of a checkpoint's model, written as CSV.

`python predict.py ckpt_path=PATH` predicts the test split of `data`; `split=val` another
split; `input_path=inputs.npy` the images in a numpy file. The model is rebuilt from the
checkpoint alone, as in eval.py.
"""

from __future__ import annotations

import csv
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from ..config import print_config_tree
from ..errors import UserError
from . import entry

if TYPE_CHECKING:
    import numpy as np
    import torch
    from torch.utils.data import DataLoader

SPLITS = ("train", "val", "test")


def load_inputs(path: str | Path, image_shape: Sequence[int]) -> np.ndarray:
    """Read a .npy file of images shaped ``(N, *image_shape)``; (N, H, W) or one image also do.

    Anything else is a :class:`UserError` that names the shape the model takes.
    """
    import numpy as np

    path = Path(path)
    shape = tuple(int(n) for n in image_shape)
    expected = f"(N, {', '.join(map(str, shape))})"
    if not path.is_file():
        raise UserError(
            f"input_path={path} does not exist. Pass a .npy file of images shaped {expected}, "
            "written with numpy.save."
        )
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise UserError(
            f"input_path={path} is not a readable .npy file ({error}). Write the images with "
            f"`numpy.save(path, images)`, an array of numbers shaped {expected}."
        ) from error
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
        raise UserError(
            f"input_path={path} holds {getattr(array, 'dtype', type(array))} data, not numbers; "
            f"save the images as an array of numbers shaped {expected}."
        )
    one_channel = len(shape) == 3 and shape[0] == 1
    if array.shape in (shape, shape[1:] if one_channel else None):
        array = array[None]  # a single image
    if one_channel and array.shape[1:] == shape[1:]:
        array = array[:, None]
    if array.shape[1:] != shape or len(array) == 0:
        hint = f" or (N, {', '.join(map(str, shape[1:]))})" if one_channel else ""
        raise UserError(
            f"input_path={path} holds an array of shape {tuple(array.shape)}, but the model in "
            f"this checkpoint takes images of shape {shape}. Pass a non-empty array shaped "
            f"{expected}{hint}, preprocessed as in training."
        )
    array = array.astype(np.float32)
    low, high = float(array.min()), float(array.max())
    if low < -0.01 or high > 1.01:
        print(
            f"Warning: the inputs range from {low:g} to {high:g}, but the built-in data modules "
            "scale images to [0, 1] (e.g. 8-bit pixels divided by 255); check that the inputs "
            "are scaled as in training.",
            file=sys.stderr,
        )
    return array


def data_choice(cfg: DictConfig) -> str:
    """The `data=` option as typed (e.g. `mnist`), else the data module's class name."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        choice = HydraConfig.get().runtime.choices.get("data")
        if choice:
            return str(choice)
    return str(cfg.data._target_).rsplit(".", 1)[-1]


def split_loader(cfg: DictConfig, split: str, image_shape: Sequence[int] | None) -> DataLoader:
    """The loader of one split of ``cfg.data``, in a fixed order (no shuffling)."""
    from hydra.utils import instantiate
    from torch.utils.data import DataLoader

    if split not in SPLITS:
        raise UserError(f"split={split} is not a split; use one of {', '.join(SPLITS)}.")
    # The split's loader is only a source of its data set, re-read below in a fixed order:
    # ask for a DataLoader (`on_device` would hand out slices, which have no data set).
    datamodule = instantiate(cfg.data, **({"on_device": False} if "on_device" in cfg.data else {}))
    data_shape = tuple(getattr(datamodule, "image_shape", ()))
    if image_shape is not None and data_shape and data_shape != tuple(image_shape):
        raise UserError(
            f"The checkpoint's model takes images of shape {tuple(image_shape)}, but "
            f"data={data_choice(cfg)} gives {data_shape}. Pass the data the model was trained "
            "on, e.g. `data=digits` or `data=mnist`."
        )
    datamodule.prepare_data()
    datamodule.setup("test" if split == "test" else "fit")
    loader = getattr(datamodule, f"{split}_dataloader")()
    # Same data set and collate function as the module's loader, in a fixed order.
    return DataLoader(
        loader.dataset, batch_size=cfg.batch_size, shuffle=False, collate_fn=loader.collate_fn
    )


def write_predictions(
    probabilities: torch.Tensor, path: Path, targets: torch.Tensor | None = None
) -> Path:
    """CSV with one row per input: index, target (for a data split), prediction, prob_<class>.

    Written to a temporary file first, so an interrupted run leaves no half-written CSV.
    """
    predictions = probabilities.argmax(dim=1)
    header = ["index"] + (["target"] if targets is not None else []) + ["prediction"]
    header += [f"prob_{k}" for k in range(probabilities.shape[1])]
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    with open(partial, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for i, (row, predicted) in enumerate(
            zip(probabilities.tolist(), predictions.tolist(), strict=True)
        ):
            target = [int(targets[i])] if targets is not None else []
            writer.writerow([i, *target, predicted, *(f"{p:.6f}" for p in row)])
    os.replace(partial, path)
    return path


def predict(cfg: DictConfig) -> Path:
    """Load the checkpoint's model, predict the inputs, write and return the CSV's path."""
    from .. import preflight
    from . import build

    entry.register()
    ckpt_path = preflight.check_config(cfg, checkpoint_required=True)
    assert ckpt_path is not None
    output_dir = Path(cfg.paths.output_dir)
    config = build.masked_config(cfg)
    print_config_tree(config)
    output_dir.mkdir(parents=True, exist_ok=True)
    print_config_tree(config, save_to=output_dir / "config_tree.log")

    import torch
    from hydra.utils import instantiate
    from torch.utils.data import DataLoader, TensorDataset

    model = build.load_model(cfg.model._target_, ckpt_path)
    image_shape = model.hparams.get("image_shape")
    targets = None
    if cfg.get("input_path"):
        if image_shape is None:
            raise UserError(f"{ckpt_path} does not record the image shape its model takes.")
        inputs = torch.from_numpy(load_inputs(cfg.input_path, image_shape))
        loader = DataLoader(TensorDataset(inputs), batch_size=cfg.batch_size, shuffle=False)
        source = str(cfg.input_path)
    else:
        loader = split_loader(cfg, cfg.split, image_shape)
        targets = torch.cat([batch[1] for batch in loader])
        source = f"the {cfg.split} split"

    trainer = instantiate(cfg.trainer, logger=False, callbacks=[], enable_checkpointing=False)
    if trainer.world_size > 1:
        raise UserError(
            f"predict runs on one device, but the trainer config asks for {trainer.world_size} "
            "processes; pass `trainer.devices=1`."
        )
    batches = trainer.predict(model, dataloaders=loader)
    probabilities = torch.cat([batch.float().cpu() for batch in batches])
    path = write_predictions(probabilities, output_dir / cfg.output_file, targets)
    summary = f"Wrote {len(probabilities)} predictions for {source} to {path}"
    if targets is not None:
        accuracy = (probabilities.argmax(dim=1) == targets).float().mean().item()
        summary += f" (accuracy {accuracy:.4f} against its labels)"
    print(summary)
    return path


def main() -> None:
    """Console-script entry point (`my-project-predict`)."""
    entry.main("predict", predict)


if __name__ == "__main__":
    main()
