"""`strategy="dp"` for Lightning 2: one process, the network's forward split across devices.

Lightning 2 removed its DataParallel strategy (upstream PR 16748), which replicated the whole
LightningModule on every step and so lost torchmetrics state and `self.log` calls made in
the replicas. This strategy keeps everything on the root device instead: batches, every
`*_step`, every metric update and every `self.log` run once there, and only the network's
forward goes through :func:`torch.nn.parallel.data_parallel` (the module calls
:func:`parallel_forward`). The module is never wrapped, so checkpoint keys are unchanged and
checkpoints move freely between dp and non-dp runs.

`registry.register_strategies` registers it in Lightning's ``StrategyRegistry`` as ``dp``.
"""

from __future__ import annotations

from typing import Any

import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.strategies import ParallelStrategy, Strategy
from lightning.pytorch.utilities import rank_zero_warn
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from torch import Tensor, nn

DP_NAME = "dp"
DP_NODES_MESSAGE = (
    "strategy 'dp' runs one process on one machine: it splits each batch across that "
    "machine's GPUs by threads, so it cannot span {num_nodes} nodes. Use `trainer.strategy=ddp "
    "trainer.num_nodes={num_nodes}` (one process per GPU on every node) instead."
)


class DataParallelStrategy(ParallelStrategy):
    """Single-process data parallelism: the root device holds the model, metrics and batches."""

    strategy_name = DP_NAME

    def __init__(
        self,
        accelerator: Any = None,
        parallel_devices: list[torch.device] | None = None,
        checkpoint_io: Any = None,
        precision_plugin: Any = None,
    ) -> None:
        super().__init__(
            accelerator=accelerator,
            parallel_devices=parallel_devices,
            cluster_environment=None,
            checkpoint_io=checkpoint_io,
            precision_plugin=precision_plugin,
        )
        self._num_nodes = 1

    # -- one process: ranks and collectives are trivial ----------------------------------------
    @property
    def global_rank(self) -> int:
        return 0

    @property
    def local_rank(self) -> int:
        return 0

    @property
    def node_rank(self) -> int:
        return 0

    @property
    def world_size(self) -> int:
        return 1

    @property
    def is_distributed(self) -> bool:
        """Tells Lightning not to inject a DistributedSampler: one process sees every batch."""
        return False

    @property
    def distributed_sampler_kwargs(self) -> dict[str, Any]:
        return {"num_replicas": 1, "rank": 0}

    @property
    def num_nodes(self) -> int:
        return self._num_nodes

    @num_nodes.setter
    def num_nodes(self, num_nodes: int) -> None:
        # Lightning sets this from `Trainer(num_nodes=...)` while it builds the Trainer.
        if num_nodes != 1:
            raise MisconfigurationException(DP_NODES_MESSAGE.format(num_nodes=num_nodes))
        self._num_nodes = num_nodes

    @property
    def root_device(self) -> torch.device:
        if not self.parallel_devices:
            raise RuntimeError("DataParallelStrategy has no devices yet; the Trainer sets them.")
        return self.parallel_devices[0]

    @property
    def splits_batches(self) -> bool:
        """True where `data_parallel` can split: several devices of a CUDA-like accelerator."""
        return len(self.parallel_devices or ()) > 1 and self.root_device.type not in ("cpu", "mps")

    def setup_environment(self) -> None:
        super().setup_environment()
        if not self.splits_batches:
            rank_zero_warn(
                f"strategy='dp' on {len(self.parallel_devices or ())} {self.root_device.type} "
                "device(s): nothing is split, the network runs as on one device."
            )

    def model_to_device(self) -> None:
        assert self.model is not None, "the model must be set before it is moved"
        self.model.to(self.root_device)

    def reduce(self, tensor: Any, *args: Any, **kwargs: Any) -> Any:
        return tensor

    def all_gather(self, tensor: Tensor, group: Any = None, sync_grads: bool = False) -> Tensor:
        return tensor

    def barrier(self, *args: Any, **kwargs: Any) -> None:
        pass

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        return obj

    def reduce_boolean_decision(self, decision: bool, all: bool = True) -> bool:
        return decision

    def teardown(self) -> None:
        # Skip ParallelStrategy.teardown: one process has no cluster environment to tear down.
        Strategy.teardown(self)

    # -- the only parallel part: the network's forward ---------------------------------------
    def forward_net(self, net: nn.Module, *inputs: Any) -> Any:
        """``net(*inputs)`` with the batch (dim 0) split across ``parallel_devices``."""
        if not self.splits_batches:
            return net(*inputs)
        device_type = self.root_device.type
        replica: nn.Module = net
        if torch.is_autocast_enabled(device_type):
            replica = _AutocastReplica(net, device_type, torch.get_autocast_dtype(device_type))
        return nn.parallel.data_parallel(
            replica,
            inputs,
            device_ids=list(self.parallel_devices or ()),
            output_device=self.root_device,
        )


class _AutocastReplica(nn.Module):
    """Runs ``net`` under the caller's autocast dtype.

    `parallel_apply`'s worker threads re-enter autocast with only the *enabled* flag, so on
    CUDA they fall back to float16 and `bf16-mixed` would silently run in fp16. Each replica
    of this wrapper re-enters the dtype captured on the main thread.
    """

    def __init__(self, net: nn.Module, device_type: str, dtype: torch.dtype) -> None:
        super().__init__()
        self.net = net
        self.device_type = device_type
        self.dtype = dtype

    def forward(self, *inputs: Any) -> Any:
        with torch.autocast(self.device_type, dtype=self.dtype):
            return self.net(*inputs)


def parallel_forward(module: LightningModule, net: nn.Module, *inputs: Any) -> Any:
    """Call ``net(*inputs)``; under the dp strategy, split across its devices.

    A LightningModule routes its network call through this so that dp splits only the
    network's forward; outside a Trainer, or under any other strategy, it is a plain call.
    """
    trainer = module._trainer  # `module.trainer` raises when no Trainer is attached
    strategy = trainer.strategy if trainer is not None else None
    if isinstance(strategy, DataParallelStrategy):
        return strategy.forward_net(net, *inputs)
    return net(*inputs)
