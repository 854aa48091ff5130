"""Every error sagemaker-tc raises on purpose, in one place.

User input errors are ``ValueError`` subclasses and are raised before any job starts; job and
runtime failures are ``RuntimeError`` subclasses. All share :class:`SagemakerTCError`.
"""

from __future__ import annotations


class SagemakerTCError(Exception):
    """Base class of every error sagemaker-tc raises on purpose."""


class ConfigError(SagemakerTCError, ValueError):
    """A ``TrainingCompilerConfig`` field or value is not accepted (unknown field, bad value or type)."""


class ModelArgumentError(SagemakerTCError, TypeError, ValueError):
    """``compile_model`` was given something other than a ``torch.nn.Module`` instance (None, a model
    name, a function, the model's class); the message says what it got. Raised before the compiler
    session is touched."""


class CollatorArgumentError(SagemakerTCError, TypeError, ValueError):
    """``BucketCollator`` was given a ``collate_fn`` that is not callable, or bucket lengths or a
    ``max_length`` that ``TrainingCompilerConfig(buckets=...)`` would refuse; the message says what
    is accepted."""


class EstimatorArgumentError(SagemakerTCError, ValueError):
    """An estimator argument is missing or has a value the estimator cannot use."""


class CheckpointArgumentError(SagemakerTCError, TypeError, ValueError):
    """A bad argument to a checkpoint helper (:func:`sagemaker_tc.checkpoints.writing`): the message names
    it and what is accepted."""


class ModelTrainerArgumentError(EstimatorArgumentError):
    """An SDK v3 ``ModelTrainer`` argument cannot run with ``compiler_config`` (a ``SourceCode.command``,
    no ``entry_script``, a ``distributed`` config other than ``Torchrun``, ...); the message says what to use."""


class SourceNotFoundError(EstimatorArgumentError):
    """``entry_point`` or ``source_dir`` names a file or folder that does not exist."""


class MemberNotOfferedError(EstimatorArgumentError, AttributeError):
    """An SDK v2 estimator member sagemaker-tc does not offer (``transformer()``, ``update_profiler()``,
    ``jobs``, ...); the message says what to use instead. Also an ``AttributeError``, so ``hasattr()``
    and ``getattr(estimator, name, default)`` answer as for any missing attribute."""


class ChannelNotFoundError(EstimatorArgumentError):
    """A ``fit()`` input channel points to a local path that does not exist, or has a bad name."""


class UnsupportedInstanceTypeError(EstimatorArgumentError):
    """The estimator cannot run on the requested ``instance_type`` / ``instance_count``."""


class UnsupportedImageError(EstimatorArgumentError):
    """No stock DLC training image matches the requested versions, region and instance type."""


class SupportMatrixError(SagemakerTCError, ValueError):
    """The packaged ``sagemaker_tc/sdk/support_matrix.json`` is malformed (a missing or unknown key, a
    stack kind or status that is not accepted); the message names the stack and what is accepted."""


class SourceLinkError(EstimatorArgumentError):
    """A symbolic link in ``source_dir`` cannot be shipped: it resolves outside ``source_dir`` (and the
    estimator was not given ``allow_symlinks_outside_source_dir=True``), points to nothing, or loops."""


class HyperparameterError(EstimatorArgumentError):
    """A hyperparameter name or value cannot be sent the way SageMaker sends it (JSON-encoded), or
    would not reach the script as written (the toolkit passes each as ``--name value``)."""


class HyperparameterWarning(UserWarning):
    """A hyperparameter is sent, but the script will probably not read it as meant (a value such as
    ``"--help"`` that an argument parser takes for an option)."""


class ReservedEnvironmentWarning(UserWarning):
    """An ``environment`` name that torchrun sets for each process of a distributed job (``RANK``,
    ``MASTER_ADDR``, ...): sent as given, but replaced there."""


class ConfigWarning(UserWarning):
    """A ``TrainingCompilerConfig`` field has no effect with the others (e.g. ``debug=True`` with
    ``enabled=False``); the message says which field wins."""


class CacheLocationError(SagemakerTCError, OSError):
    """A local compile cache file whose path leaves the cache folder through a link (an entry folder
    linked elsewhere): never read, written or deleted there. Caught by the cache's save, which logs
    it as a warning (``Compile cache not saved: CacheLocationError: ...``); the job goes on."""


class ReportNotFoundError(SagemakerTCError, FileNotFoundError):
    """``sagemaker-tc report PATH``: nothing at ``PATH`` is a compiler report (a missing path, an empty,
    damaged or truncated file, a ``model.tar.gz``, a JSON file that is not a report)."""


class BenchNotInstalledError(SagemakerTCError, ImportError):
    """``sagemaker-tc bench``, ``verify`` or ``tune`` ran where the ``sagemaker_tc_bench`` package (the
    workstation's benchmark commands, installed with ``sagemaker-tc[bench]``) is not installed."""


class TrainingJobFailedError(SagemakerTCError, RuntimeError):
    """The training job ended in ``Failed``.

    Attributes:
        job_name: the training job's name.
        failure_reason: the job's failure reason (the container's ``output/failure`` file, at most
            1024 characters as SageMaker keeps it).
    """

    def __init__(self, job_name: str, failure_reason: str) -> None:
        self.job_name = job_name
        self.failure_reason = failure_reason
        super().__init__(f"Training job {job_name} failed. Reason: {failure_reason}")


class JobArtifactsError(SagemakerTCError, OSError):
    """A local job's ``model.tar.gz`` or ``output.tar.gz`` could not be written (a full disk, a file
    size limit): the message names the folder, the space the archive needs and the space free. No
    torn archive is left under its final name; the job's files stay in its folder."""


class CheckpointSyncError(SagemakerTCError, OSError):
    """A ``local_process`` job's checkpoint sync could not copy a file (a full checkpoint location, a
    file size limit): the message names the file, the folder and the space needed. No partial file
    is left; the job's ``model.tar.gz`` and ``output.tar.gz`` are written first."""


class MaxRuntimeExceededError(TrainingJobFailedError):
    """The training job was stopped at its ``max_run`` (``Stopped``, secondary status
    ``MaxRuntimeExceeded``) before its script finished: ``wait()`` and ``fit()`` raise it, so a job
    that did not finish never passes for one that did. A job stopped with ``stop()`` raises nothing.
    A :class:`TrainingJobFailedError`, with the same ``job_name`` and ``failure_reason``."""

    def __init__(self, job_name: str, failure_reason: str) -> None:
        self.job_name = job_name
        self.failure_reason = failure_reason
        SagemakerTCError.__init__(
            self,
            f"Training job {job_name} was stopped at its max_run limit (MaxRuntimeExceeded) before its script "
            f"finished; it did not fail, and it did not complete. Reason: {failure_reason}. Give max_run more "
            "seconds, or save checkpoints and resume (a job you stop with stop() raises nothing)",
        )


class DockerNotAvailableError(SagemakerTCError, RuntimeError):
    """Docker local mode needs the docker CLI, a running Docker engine and docker compose."""


class OptMlUnavailableError(SagemakerTCError, RuntimeError):
    """A ``local_process`` job names ``/opt/ml`` (a hyperparameter, an environment value, its code, or
    checkpoints), but this machine cannot give each host a private mount namespace where ``/opt/ml`` is
    the job's folder (not Linux, no ``unshare``, namespaces denied); or any job there while this
    machine's ``/opt/ml`` exists or can be made and ``SM_TC_ALLOW_HOST_OPT_ML=1`` is not set. Raised
    before the job starts; the message names the ``SM_*`` variables to read instead."""


class OptMlNotMappedWarning(UserWarning):
    """A ``local_process`` job runs without a private ``/opt/ml`` (no mount namespace on this machine); it
    does not name ``/opt/ml``, so it runs with the job's folders from the ``SM_*`` variables."""


class SessionStateError(SagemakerTCError, RuntimeError):
    """A compiler session was opened while another is open in the process, or used after it was closed."""


class InternalAPIMissing(SagemakerTCError, RuntimeError):
    """A private API of torch, transformers or sagemaker-core that :mod:`sagemaker_tc._internals`
    wraps is not in the installed library (it moved or was renamed)."""


class ImageEntryError(SagemakerTCError, RuntimeError):
    """A sagemaker-tc training image (``containers/``) cannot run the job its hyperparameters ask for
    (the message says the fix). Raised by the image's entry module, ``sagemaker_tc_image``."""


class JobSettingWarning(UserWarning):
    """An SDK v2 job setting is sent as given, but may not do what is meant (managed spot training
    without a checkpoint location to resume from; Debugger or Profiler hooks, which add overhead)."""


class CpuInstanceWarning(UserWarning):
    """The job runs on CPU instances, where compile gains are model-dependent."""


class LauncherError(SagemakerTCError, RuntimeError):
    """The in-container launcher cannot start the user's script (bad settings, missing entry point)."""


class StuckRankError(SagemakerTCError, RuntimeError):
    """A job process (a torchrun rank, or the job's only process) did not exit within ``hang_grace_s``
    seconds after its script ended, or made no progress that long after another rank's script ended.
    The watchdog (:mod:`sagemaker_tc.container.watchdog`) stopped it; the job's failure reason names
    its host and rank and carries its Python stack."""


class CompilerError(SagemakerTCError, RuntimeError):
    """The compiler failed and the config's ``policy="strict"`` asked to raise instead of falling back
    to eager. The original compiler exception is the ``__cause__``."""


class StepBodyUnsupported(SagemakerTCError, RuntimeError):
    """The optimizer or its settings cannot run in a captured whole step (not torch's Adam/AdamW, a
    parameter without a fused kernel, a differentiable group): the message says which. The
    ``Trainer``'s own step runs instead."""


class StepBodyFailed(SagemakerTCError, RuntimeError):
    """The whole step failed in an uncaptured warm-up step; every recording was dropped and the
    ``Trainer``'s own steps run for the rest of the job. Its update is one fused kernel after the
    backward, so a failure before or in it leaves the parameters as they were."""


class CaptureFailed(SagemakerTCError, RuntimeError):
    """Recording one bucket key's whole step as a CUDA graph failed; the step did not run, and that
    key's steps run uncaptured from then on (``key``, ``reason``)."""

    def __init__(self, key: object, reason: str) -> None:
        super().__init__(f"recording the step for bucket {key!r} failed: {reason}")
        self.key, self.reason = key, reason


class GraphsInvalidated(SagemakerTCError, RuntimeError):
    """The model changed under the recorded whole steps (parameters, ``requires_grad``, hooks,
    training mode or a gradient tensor): every recording was dropped and is made again."""


class CompiledBackwardError(SagemakerTCError, RuntimeError):
    """A compile plan's compiled backward failed in ``loss.backward()`` (a kernel error, out of memory,
    a gradient-checkpoint recompute), where no eager rerun of the same call is possible. The plan has
    ended for the job (the compile history records it, so the next job's ``plan="auto"`` skips it) and
    the step's gradients are incomplete. A ``Trainer`` job zeroes them and reruns the step on the next
    safer plan; a plain loop gets this error.

    Attributes:
        plan: the plan whose backward failed.
        stepped_back_to: the plan the job runs from now on (``"eager"`` when none is left).
    The original exception is the ``__cause__``."""

    def __init__(self, message: str, plan: str, stepped_back_to: str) -> None:
        self.plan, self.stepped_back_to = plan, stepped_back_to
        super().__init__(message)


class GlooAveragingError(SagemakerTCError, RuntimeError):
    """FSDP2 (``fully_shard``) on a gloo process group with a torch whose gloo ``reduce_scatter`` sums
    where ``ReduceOp.AVG`` was asked (pytorch#162338): gradients would come out multiplied by the world
    size. Raised before the first sharded training step; use NCCL, or a torch whose gloo averages."""


class ShardingOrderWarning(UserWarning):
    """``compile_model`` got a model that ``fully_shard`` had already sharded: it still trains, but
    the documented order is ``compile_model`` first, then ``fully_shard`` per block, then the root."""


class CompilerFallbackWarning(UserWarning):
    """The compiler failed at a compiled call and the job continues uncompiled (``policy="fallback"``)."""


class TuningError(SagemakerTCError, ValueError):
    """A batch-size or learning-rate tuning input is not accepted (a non-positive batch or learning
    rate, an unknown scaling rule, a budget larger than the device, a model the finder cannot make
    inputs for). Raised before any try runs."""


class LossNotFoundError(SagemakerTCError, ValueError):
    """A model's output holds no loss and no ``loss_fn`` was given (batch-size search, verify)."""


class BatchSizeSearchError(SagemakerTCError, RuntimeError):
    """The batch-size finder found no batch that fits: even the smallest tried batch ran out of
    memory or peaked above the budget.

    Attributes:
        trials: every try (:class:`sagemaker_tc.tuning.search.Trial`), with its peak and reason.
    """

    def __init__(self, message: str, trials: list | None = None) -> None:
        self.trials = list(trials or [])
        super().__init__(message)
