"""`strategy="dp"` for Lightning 2: one process, the module's forward split across devices.

Lightning 2 removed its DataParallel strategy (PR 16748), which replicated the whole module every
step and lost torchmetrics state and `self.log` calls made in the replicas. Here everything runs
once on the root device, and only ``forward`` goes through `torch.nn.parallel.data_parallel`: a
splitting ``forward`` on the module instance (no wrapper: checkpoint keys stay the same). A
training step that never calls ``forward`` would run on one device: the first one says so.
"""

from __future__ import annotations

from typing import Any

import torch
from lightning.pytorch.strategies import ParallelStrategy, Strategy
from lightning.pytorch.utilities import rank_zero_warn
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from torch import nn

from ..errors import UserError

DP_NAME = "dp"


class ClassForward(nn.Module):
    """What ``data_parallel`` replicates: ``module``'s *class* forward (the instance's splits),
    in the caller's autocast dtype (``parallel_apply``'s threads re-enter autocast with its
    *enabled* flag only: `bf16-mixed` would run float16)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module
        self.autocast: tuple[str, torch.dtype] | None = None

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        kind, dtype = self.autocast or ("cpu", None)
        with torch.autocast(kind, dtype=dtype, enabled=self.autocast is not None):
            return type(self.module).forward(self.module, *inputs, **kwargs)


class DataParallelStrategy(ParallelStrategy):
    """Single-process data parallelism: the root device holds the model, metrics and batches."""

    strategy_name = DP_NAME

    def __init__(self, **kwargs: Any) -> None:  # accelerator, parallel_devices, ...
        super().__init__(**kwargs)
        self._replicated: ClassForward | None = None
        self._calls: int | None = None  # forward calls; None once the first step was checked

    # One process: ranks and collectives are trivial.
    global_rank = local_rank = node_rank = property(lambda self: 0)
    world_size = property(lambda self: 1)
    # Not distributed: Lightning injects no DistributedSampler, one process sees every batch.
    is_distributed = property(lambda self: False)
    distributed_sampler_kwargs = property(lambda self: {"num_replicas": 1, "rank": 0})

    def _set_num_nodes(self, num_nodes: int) -> None:  # Lightning sets Trainer(num_nodes=...)
        if num_nodes != 1:
            raise MisconfigurationException(
                f"trainer.strategy=dp runs one process on one machine, so it cannot span "
                f"{num_nodes} nodes. Use `trainer.strategy=ddp trainer.num_nodes={num_nodes}`."
            )

    num_nodes = property(lambda self: 1, _set_num_nodes)

    @property
    def root_device(self) -> torch.device:
        assert self.parallel_devices, "the Trainer sets the devices"
        return self.parallel_devices[0]

    @property
    def splits_batches(self) -> bool:
        """Several devices of a CUDA-like accelerator: where `data_parallel` can split."""
        return len(self.parallel_devices or ()) > 1 and self.root_device.type not in ("cpu", "mps")

    def setup_environment(self) -> None:
        super().setup_environment()
        if not self.splits_batches:
            rank_zero_warn(f"strategy='dp' on {self.root_device.type}: nothing is split.")

    def setup(self, trainer: Any) -> None:
        super().setup(trainer)
        if self.splits_batches and self.lightning_module is not None:
            self._replicated, self._calls = ClassForward(self.lightning_module), 0
            # an instance attribute: nn.Module.__call__ looks `forward` up there first
            object.__setattr__(self.lightning_module, "forward", self._split_forward)

    def _split_forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """``module(*inputs, **kwargs)`` with the batch (dim 0) split across the devices."""
        assert self._replicated is not None
        self._calls = None if self._calls is None else self._calls + 1
        kind = self.root_device.type
        enabled = torch.is_autocast_enabled(kind)
        self._replicated.autocast = (kind, torch.get_autocast_dtype(kind)) if enabled else None
        return nn.parallel.data_parallel(
            self._replicated,
            inputs,
            device_ids=list(self.parallel_devices or ()),
            output_device=self.root_device,
            module_kwargs=kwargs or None,
        )

    def training_step(self, *args: Any, **kwargs: Any) -> Any:
        calls = self._calls
        output = super().training_step(*args, **kwargs)
        if calls is not None and self._calls == calls:  # the first training step tells
            name = type(self.lightning_module).__name__
            raise UserError(
                f"trainer.strategy=dp splits what {name}.forward computes across the GPUs, but "
                f"{name}.training_step never called it (it calls its layers directly), so "
                "nothing would be split. Compute the outputs with `self(x)` (which runs "
                "`forward`) in the step, or use `trainer.strategy=ddp`."
            )
        self._calls = None
        return output

    def model_to_device(self) -> None:
        self.model.to(self.root_device)  # type: ignore[union-attr]

    def reduce(self, tensor: Any, *args: Any, **kwargs: Any) -> Any:
        return tensor

    def barrier(self, *args: Any, **kwargs: Any) -> None:
        pass

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        return obj

    def reduce_boolean_decision(self, decision: bool, all: bool = True) -> bool:
        return decision

    def teardown(self) -> None:
        module = self.lightning_module
        if module is not None and vars(module).get("forward") == self._split_forward:
            object.__delattr__(module, "forward")
        self._replicated = self._calls = None
        Strategy.teardown(self)  # not ParallelStrategy's: one process has no cluster to tear down
