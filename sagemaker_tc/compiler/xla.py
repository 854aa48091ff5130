"""``backend="xla"``: the training step compiled by XLA through torch_xla's lazy tensors, on a PJRT device.

With torch_xla, tensors on the XLA device record the ops run on them instead of running them; at a
step mark (``torch_xla.sync()``) the recorded graph is compiled by XLA (once per distinct graph,
cached by its hash) and run. :class:`XlaBackend` puts the model on the XLA device, moves each
call's tensor inputs there (padded to buckets first, as with Inductor: one graph per bucket), and
marks the step right after ``optimizer.step()``: one compiled graph per optimizer step (forward,
backward and update together). A Hugging Face ``Trainer`` places the model and moves each batch
itself when torch_xla is installed (transformers and accelerate); the runtime then pads the
training batches in the dataloader, on the host (:meth:`XlaBackend.pad_on_host`), marks the
step at ``on_step_end`` and measures.

Why lazy tensors and not dynamo's ``openxla`` backend: ``torch.compile(backend="openxla")``
returned the logits where the loss should be on the demo's model, so training could not run, and
compiled more XLA graphs than lazy tensors where it did run; lazy tensors compile one graph for the
first step (whose update creates the optimizer's state) and one for the steady step (the runs:
benchmarks/README.md).

The PJRT device is ``$PJRT_DEVICE`` when set (``TPU``, ``CPU``), else ``CPU``; it is set only for a
``backend="xla"`` job (:func:`prepare_environment`), and torch_xla is imported by nothing else in
sagemaker-tc, so a job that merely has torch_xla installed is untouched.

Failures: the step's graph is compiled and run at the step mark. If that fails at the first step,
``policy="fallback"`` puts the model's weights back on the host as they were before the step
(kept until then), clears the optimizer's state, and the job continues eager on the CPU, with a
loud warning and the reason in the report; that first step's update is not applied. After a step
ran on the XLA device the weights exist only there, so a later failure raises
:class:`~sagemaker_tc.errors.CompilerError` (so does any failure under ``policy="strict"``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from sagemaker_tc import contract
from sagemaker_tc.compiler.dynamo import DynamoStats
from sagemaker_tc.compiler.failures import error_summary
from sagemaker_tc.compiler.ranks import world_size
from sagemaker_tc.compiler.shapes import ShapePolicy
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import CompilerError

logger = logging.getLogger("sagemaker_tc.compiler")

LABEL = "xla"
"""The step records' variant while steps run on the XLA device."""
DEFAULT_PJRT_DEVICE = "CPU"
HLO_DIRNAME = "xla-hlo"
METRICS_FILENAME = "xla-metrics.txt"
HLO_KEPT = (".before_optimizations.txt", "_after_optimizations.txt")  # XLA's dump names, per graph
# torch_xla's debug metrics (torch_xla/debug/metrics.py; names from its graph executor):
_COMPILES = "UncachedCompile"  # counter: graphs compiled by XLA (a cache hit does not count)
_COMPILE_TIME = "CompileTime"  # metric: (count, total nanoseconds, samples)
_EXECUTE_TIME = "ExecuteTime"


def prepare_environment(
    config: TrainingCompilerConfig, environ: MutableMapping[str, str], debug_dir: Path | None
) -> Callable[[], None]:
    """Set the PJRT device (and, in debug mode, XLA's HLO dump) for a ``backend="xla"`` job, before
    torch_xla is imported. Any other job is left alone.

    ``PJRT_DEVICE``: kept when set, else ``CPU``. Debug mode adds ``--xla_dump_to=<debug_dir>/xla-hlo
    --xla_dump_hlo_as_text`` to ``XLA_FLAGS`` (XLA writes the HLO of every graph it compiles).

    Returns:
        A function that puts the variables back as they were.
    """
    if not (config.compiles and config.backend == "xla"):
        return lambda: None
    before = {name: environ.get(name) for name in (contract.ENV_PJRT_DEVICE, contract.ENV_XLA_FLAGS)}
    environ.setdefault(contract.ENV_PJRT_DEVICE, DEFAULT_PJRT_DEVICE)
    if config.debug and debug_dir is not None:
        dump = f"--xla_dump_to={debug_dir / HLO_DIRNAME} --xla_dump_hlo_as_text"
        environ[contract.ENV_XLA_FLAGS] = " ".join(filter(None, (before[contract.ENV_XLA_FLAGS], dump)))

    def undo() -> None:
        for name, value in before.items():
            if value is None:
                environ.pop(name, None)
            else:
                environ[name] = value

    return undo


def import_torch_xla() -> Any:
    """torch_xla, imported now: when a ``backend="xla"`` session opens, before the script's first
    ``backward()`` (torch's autograd engine sizes its per-device queues when it first runs, so a device
    type registered later fails its backward with an INTERNAL ASSERT in ``engine.cpp``).

    Raises:
        CompilerError: torch_xla is not installed (with what to install).
    """
    try:
        import torch_xla
        import torch_xla.debug.metrics  # noqa: F401  (the compile and execution counters)
    except ImportError as error:
        raise CompilerError(
            "TrainingCompilerConfig(backend='xla') needs torch_xla, which is not installed here: pip install "
            "'sagemaker-tc[xla]' (torch 2.9.0 with torch_xla 2.9.0), or use backend='inductor'"
        ) from error
    return torch_xla


def _counter(name: str) -> int:
    import torch_xla.debug.metrics as metrics

    return int(metrics.counter_value(name) or 0)


def _metric(name: str) -> tuple[int, float]:
    """``(count, total seconds)`` of a torch_xla timing metric (zeros before its first sample)."""
    import torch_xla.debug.metrics as metrics

    data = metrics.metric_data(name)
    return (int(data[0]), float(data[1]) / 1e9) if data else (0, 0.0)


class XlaBackend:
    """``backend="xla"``'s part of the runtime (module docstring): the model on the XLA device, each
    call's tensors moved there, one XLA graph marked per optimizer step, XLA's own counts.
    :class:`~sagemaker_tc.compiler.runtime.CompilerRuntime` composes it for a ``backend="xla"`` session
    (its compile plans then stay idle: no schedule, no trials) and calls it at attach, at each model
    call, at each step's end, at a failure and for the report.

    Attributes:
        label: the step records' variant while steps run on the XLA device.
        device: the XLA device (None before the first :meth:`attach`).
        device_name: ``xla:<PJRT device>``, as the log names it.
        step_graph_compiles: graphs XLA compiled at the step marks.
        steps_synced: step marks that succeeded.
    """

    label = LABEL

    def __init__(self) -> None:
        self.device: Any = None
        self.device_name = f"xla:{DEFAULT_PJRT_DEVICE}"
        self.step_graph_compiles = 0
        self.steps_synced = 0
        self._host_copies: list[Callable[[], None]] = []  # each puts a parameter or buffer back on the host
        self._baseline = (0, 0.0, 0)

    def attach(self, model: Any) -> None:
        """Put ``model`` on the XLA device (kept there when a ``Trainer`` already put it there),
        keeping what puts it back on the host until the first step ran.

        Raises:
            CompilerError: torch_xla is missing, or the job runs more than one process.
        """
        torch_xla = import_torch_xla()
        if world_size() > 1:
            raise CompilerError(
                f"TrainingCompilerConfig(backend='xla') runs one training process per job in this version; this job "
                f"has WORLD_SIZE={world_size()}. Use one process (processes_per_host=1, instance_count=1), or "
                "backend='inductor' for distributed training"
            )
        if self.device is None:
            self.device = torch_xla.device()
            self.device_name = f"xla:{os.environ.get(contract.ENV_PJRT_DEVICE, '?')}"
            self._baseline = (_counter(_COMPILES), _metric(_COMPILE_TIME)[1], _metric(_EXECUTE_TIME)[0])
        if not _on_xla(model):
            self._host_copies.extend(_move_to(model, self.device))

    @staticmethod
    def inputs_on_device(args: tuple, kwargs: dict) -> bool:
        """True when a call's inputs are on the XLA device already (a ``Trainer``'s dataloader moved
        them): padding them at the call would make the unpadded length a graph input, a new XLA graph
        per length, so they are padded on the host instead (:meth:`pad_on_host`, or a collator)."""
        return any(_on_device(v) for v in (*args, *kwargs.values()))

    def to_device(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """A call's tensor inputs moved to the XLA device (the others as they are)."""
        return tuple(self._to_device(a) for a in args), {k: self._to_device(v) for k, v in kwargs.items()}

    def _to_device(self, value: Any) -> Any:
        import torch

        if isinstance(value, torch.Tensor) and value.device.type != "xla":
            return value.to(self.device)
        return value

    @staticmethod
    def pad_on_host(dataloader: Any, shapes: ShapePolicy) -> bool:
        """Pad each batch to its bucket in ``dataloader``'s collate function, on the host, before a
        ``Trainer``'s dataloader moves it to the XLA device (accelerate's ``MpDeviceLoaderWrapper``
        around a ``DataLoader``), by ``shapes``. Returns False when no ``DataLoader`` is found inside."""
        return shapes.pad_in_dataloader(dataloader)

    def mark_step(self) -> int:
        """Mark the step (right after ``optimizer.step()``): XLA compiles the step's graph when it is
        new and runs it; nothing waits for the device. Returns the graphs XLA compiled for it.

        Raises:
            Exception: XLA's compile or run error (``RuntimeError`` of many kinds).
        """
        import torch_xla

        before = _counter(_COMPILES)
        torch_xla.sync()
        compiled = _counter(_COMPILES) - before
        self.step_graph_compiles += compiled
        self.steps_synced += 1
        self._host_copies.clear()  # the weights are the device's now: no way back
        return compiled

    def failure(self, error: BaseException, policy: str) -> str:
        """The reason to fall back to eager on the host after the step's graph failed with ``error``:
        only at the first step, under ``policy="fallback"``.

        Raises:
            CompilerError: ``policy="strict"``, or a step already ran on the XLA device.
        """
        reason = error_summary(error)
        if policy == "strict":
            raise CompilerError(f"XLA failed and policy='strict' does not fall back: {reason}") from error
        if not self._host_copies:
            raise CompilerError(
                f"XLA failed after {self.steps_synced} step(s) ran on the XLA device, where the weights now live, so "
                f"the job cannot continue eager from them: {reason}"
            ) from error
        return (
            "XLA failed at the first step's graph; training continues eager on the CPU from the weights before "
            f"that step (its update was not applied): {reason}"
        )

    def back_to_host(self) -> None:
        """Put every moved parameter and buffer back on the host as it was before the first step."""
        for put_back in self._host_copies:
            put_back()
        self._host_copies.clear()

    # -- what the report reads -------------------------------------------------------------------
    def compile_stats(self, running: bool) -> dict[str, Any] | None:
        """What XLA did since the first attach; while steps still run on the device (``running``),
        waits for the graphs under way (report time only).

        Returns:
            ``device`` (``xla:<PJRT device>``); ``compiles``: graphs XLA compiled (every graph: the
            steps', and any a read of a tensor's value ran, e.g. transformers' mask check);
            ``compile_seconds``: XLA's compile time, seconds; ``step_graph_compiles``: graphs compiled
            at the step marks; ``recompiles``: ``step_graph_compiles`` beyond the first (a new bucket,
            and the first steady step after the update that created the optimizer's state);
            ``executions``: graphs run; ``steps_synced``: step marks that succeeded. None before
            the first :meth:`attach`.
        """
        if self.device is None:
            return None
        import torch_xla
        import torch_xla.core.xla_model as xm

        if running:
            torch_xla.sync()
            xm.wait_device_ops()
        compiles0, seconds0, executions0 = self._baseline
        return {
            "device": self.device_name,
            "compiles": _counter(_COMPILES) - compiles0,
            "compile_seconds": _metric(_COMPILE_TIME)[1] - seconds0,
            "step_graph_compiles": self.step_graph_compiles,
            "recompiles": max(0, self.step_graph_compiles - 1),
            "executions": _metric(_EXECUTE_TIME)[0] - executions0,
            "steps_synced": self.steps_synced,
        }

    def compiled_graphs(self, running: bool) -> DynamoStats:
        """The report's compile counts from XLA: ``graphs`` = graphs XLA compiled, ``recompiles`` =
        step-graph recompiles, no graph breaks (lazy tensors trace whatever runs)."""
        stats = self.compile_stats(running) or {}
        return DynamoStats(
            graphs=int(stats.get("compiles", 0)),
            frames_compiled=int(stats.get("step_graph_compiles", 0)),
            recompiles=int(stats.get("recompiles", 0)),
            compile_seconds=float(stats.get("compile_seconds", 0.0)),
        )

    def write_debug(self, folder: Path) -> list[str]:
        """Debug mode: torch_xla's metrics report into ``folder``, and of what XLA dumped into
        ``folder/xla-hlo`` (:func:`prepare_environment`) only the HLO text of each compiled graph,
        before and after XLA's optimizations (the CPU backend also dumps LLVM IR and MLIR for every
        fused kernel, many files per graph). Returns the names written."""
        if self.device is None:
            return []
        import torch_xla.debug.metrics as metrics

        folder.mkdir(parents=True, exist_ok=True)
        (folder / METRICS_FILENAME).write_text(metrics.metrics_report(), encoding="utf-8")
        hlo = folder / HLO_DIRNAME
        if not hlo.is_dir():
            return [METRICS_FILENAME]
        for path in hlo.iterdir():
            if path.is_file() and not path.name.endswith(HLO_KEPT):
                path.unlink()
        return [METRICS_FILENAME, f"{HLO_DIRNAME}/"]


def _move_to(model: Any, device: Any) -> list[Callable[[], None]]:
    """Move ``model`` to the XLA device keeping each parameter's Python object (an optimizer built
    before keeps working: ``Module.to`` across device types otherwise makes new parameters), and
    return the functions that put each parameter and buffer back as it was on the host."""
    import torch
    from torch.utils import swap_tensors

    put_back: list[Callable[[], None]] = []
    for parameter in model.parameters():
        host = parameter.detach()  # the host storage, kept alive

        def restore(parameter=parameter, host=host) -> None:
            parameter.grad = None
            swap_tensors(parameter, torch.nn.Parameter(host, requires_grad=parameter.requires_grad))

        put_back.append(restore)
    for module in model.modules():
        for name, buffer in module.named_buffers(recurse=False):
            put_back.append(lambda module=module, name=name, buffer=buffer: setattr(module, name, buffer))
    swap = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        model.to(device)
    finally:
        torch.__future__.set_swap_module_params_on_conversion(swap)
    return put_back


def _on_device(value: Any) -> bool:
    device = getattr(value, "device", None)
    return getattr(device, "type", None) == "xla"


def _on_xla(model: Any) -> bool:
    parameter = next(model.parameters(), None)
    return parameter is not None and parameter.device.type == "xla"
