"""`strategy="dp"` for Lightning 2: one process, the module's forward split across devices.

Lightning 2 removed its DataParallel strategy (upstream PR 16748), which replicated the whole
LightningModule on every step and so lost torchmetrics state and `self.log` calls made in
the replicas. This strategy keeps everything on the root device instead: batches, every
`*_step`, every metric update and every `self.log` run once there, and only what the
module's ``forward`` computes goes through :func:`torch.nn.parallel.data_parallel`, for any
LightningModule: at setup the strategy puts a splitting ``forward`` on the module instance
(no wrapper around the module, so checkpoint keys are unchanged and checkpoints move freely
between dp and non-dp runs), and takes it off at teardown.

A step that never calls ``forward`` (``self(x)``) would run on one device while the user
asked for several: the first training step that does so stops the run, saying why.

`registry.register_strategies` registers it in Lightning's ``StrategyRegistry`` as ``dp``.
"""

from __future__ import annotations

from typing import Any

import torch
from lightning.pytorch.strategies import ParallelStrategy, Strategy
from lightning.pytorch.utilities import rank_zero_warn
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from torch import Tensor, nn

from ..errors import UserError

DP_NAME = "dp"
DP_NODES_MESSAGE = (
    "strategy 'dp' runs one process on one machine: it splits each batch across that "
    "machine's GPUs by threads, so it cannot span {num_nodes} nodes. Use `trainer.strategy=ddp "
    "trainer.num_nodes={num_nodes}` (one process per GPU on every node) instead."
)


class ForwardNotCalledError(UserError):
    """Under dp, a training step computed its outputs without the module's forward."""


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
                "device(s): nothing is split, the module runs as on one device."
            )

    def setup(self, trainer: Any) -> None:
        super().setup(trainer)
        self._split = None
        if self.splits_batches:
            assert self.lightning_module is not None
            self._split = SplitForward(self, self.lightning_module)
            self._split.install()

    def training_step(self, *args: Any, **kwargs: Any) -> Any:
        split = getattr(self, "_split", None)
        calls = split.calls if split is not None else 0
        output = super().training_step(*args, **kwargs)
        if split is not None and not split.checked:  # the first training step tells
            split.checked = True
            if split.calls == calls:
                raise ForwardNotCalledError(split.not_called_message())
        return output

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
        split = getattr(self, "_split", None)
        if split is not None:
            split.uninstall()
            self._split = None
        # Skip ParallelStrategy.teardown: one process has no cluster environment to tear down.
        Strategy.teardown(self)

    def data_parallel(self, module: nn.Module, inputs: tuple[Any, ...], kwargs: dict) -> Any:
        """``module(*inputs, **kwargs)`` with the batch (dim 0) split across the devices."""
        return nn.parallel.data_parallel(
            module,
            inputs,
            device_ids=list(self.parallel_devices or ()),
            output_device=self.root_device,
            module_kwargs=kwargs or None,
        )


class SplitForward:
    """The ``forward`` the dp strategy puts on a module instance while it runs.

    Calling it runs the class's own ``forward`` through ``data_parallel``, on a replica of the
    module per device. The replicas re-enter the caller's autocast dtype: ``parallel_apply``'s
    worker threads re-enter autocast with only its *enabled* flag, so on CUDA `bf16-mixed`
    would silently run in float16.
    """

    def __init__(self, strategy: DataParallelStrategy, module: nn.Module) -> None:
        self.strategy = strategy
        self.module = module
        self.replicated = ClassForward(module)
        self.calls = 0
        self.checked = False

    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        self.calls += 1
        device_type = self.strategy.root_device.type
        self.replicated.autocast = (
            (device_type, torch.get_autocast_dtype(device_type))
            if torch.is_autocast_enabled(device_type)
            else None
        )
        return self.strategy.data_parallel(self.replicated, inputs, kwargs)

    def install(self) -> None:
        # An instance attribute: nn.Module.__call__ looks `forward` up on the instance first.
        object.__setattr__(self.module, "forward", self)

    def uninstall(self) -> None:
        if vars(self.module).get("forward") is self:
            object.__delattr__(self.module, "forward")

    def not_called_message(self) -> str:
        name = type(self.module).__name__
        return (
            f"trainer.strategy=dp splits what {name}.forward computes across the GPUs, but "
            f"{name}.training_step never called it (it calls its layers directly), so nothing "
            "would be split. Compute the outputs with `self(x)` (which runs `forward`) in the "
            "step, or use `trainer.strategy=ddp`."
        )


class ClassForward(nn.Module):
    """What ``data_parallel`` replicates: a module whose forward is ``module``'s class forward.

    The class's, not the instance's: the instance's is the `SplitForward` (kept in each
    replica's copy of the module's attributes), which would split again.
    """

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module
        self.autocast: tuple[str, torch.dtype] | None = None

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        forward = type(self.module).forward
        if self.autocast is None:
            return forward(self.module, *inputs, **kwargs)
        with torch.autocast(self.autocast[0], dtype=self.autocast[1]):
            return forward(self.module, *inputs, **kwargs)
