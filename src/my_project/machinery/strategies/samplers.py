"""Exact evaluation under DDP: each sample of a val/test set is seen by exactly one rank.

Lightning gives val/test loaders a ``DistributedSampler``, which pads the set with repeated
samples until it divides by the world size; metrics then count those duplicates (89 test
samples on 2 ranks are scored as 90). An unpadded sampler leaves the last batches of some
ranks one sample short instead, which is safe for evaluation: DDP synchronises buffers only
on the first evaluation batch, torchmetrics sums the states of all ranks at the end, and
``self.log(..., sync_dist=True)`` weighs each rank's mean by its number of samples.

For map-style data sets only: an iterable data set is sharded by its own code.

With ranks of unequal sizes, one Lightning bug shows: ``self.log(..., sync_dist=True)``
averages each rank's sample count as an integer tensor, truncating 44.5 to 44, so the logged
mean is off by up to 1/n. `EXACT_MEAN` (in place while the DDP strategy runs) makes that
count a float.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import Any

from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from lightning.pytorch.trainer.connectors.logger_connector.result import _ResultMetric
from lightning.pytorch.utilities.data import _update_dataloader
from lightning.pytorch.utilities.rank_zero import rank_zero_warn
from torch.utils.data import DataLoader, DistributedSampler

from ..patching import Patch


def unpadded(dataloader: object) -> object:
    """``dataloader`` with Lightning's padding ``DistributedSampler`` of an evaluation loader
    replaced by one that splits the data set across ranks without repeating samples.

    Anything else (a training loader, a sampler of the user's own, an iterable data set, a set
    smaller than the number of ranks, where every rank must still get a batch) is returned as
    it is.
    """
    if not isinstance(dataloader, DataLoader):
        return dataloader
    sampler = dataloader.sampler
    if type(sampler) is not DistributedSampler or sampler.shuffle or sampler.drop_last:
        return dataloader
    dataset = dataloader.dataset
    if not isinstance(dataset, Sized):
        return dataloader
    if len(dataset) < sampler.num_replicas:
        rank_zero_warn(
            f"An evaluation set of {len(dataset)} samples on {sampler.num_replicas} processes: "
            "every process needs a batch, so Lightning's DistributedSampler repeats samples and "
            "its metrics count them twice. Evaluate it with `trainer.devices=1`."
        )
        return dataloader
    exact = UnrepeatedDistributedSampler(
        dataset, num_replicas=sampler.num_replicas, rank=sampler.rank, shuffle=False
    )
    return _update_dataloader(dataloader, exact)


def _float_sample_count(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`_ResultMetric.compute` with the count of samples a float before it is synchronised."""

    def compute(self: Any) -> Any:
        count = getattr(self, "cumulated_batch_size", None)
        if self.is_tensor and count is not None and not count.is_floating_point():
            self.cumulated_batch_size = count.to(self.value.dtype)
        return original(self)

    return compute


EXACT_MEAN = Patch(_ResultMetric, "compute", _float_sample_count)
