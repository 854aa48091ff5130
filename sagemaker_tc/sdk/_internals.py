"""The private APIs of sagemaker-core and sagemaker-train that sagemaker-tc's SDK side touches.

As :mod:`sagemaker_tc._internals` does for torch and transformers: each is wrapped in a small
function whose docstring names the symbol, the version it was checked against, and what happens when
it is missing; ``tests/test_internals.py`` calls every wrapper against the installed versions. The
SDK side imports this module without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sagemaker_tc.errors import InternalAPIMissing

if TYPE_CHECKING:
    from sagemaker.core.workflow.pipeline_context import PipelineSession


# -- sagemaker-core ------------------------------------------------------------------------------------
def hand_request_to_pipeline(session: PipelineSession, request: dict[str, Any]) -> None:
    """Hand a CreateTrainingJob request to a SageMaker Pipelines step instead of creating the job.

    ``PipelineSession._intercept_create_request(request, None, "train")`` stores the request in
    ``session.context``, from where ``TrainingStep`` reads the step's arguments (sagemaker-core
    2.27, ``sagemaker/core/workflow/pipeline_context.py``; the same method as SDK v2's
    ``PipelineSession``).

    Raises:
        InternalAPIMissing: the session has no such method (a sagemaker-core that changed it).
    """
    intercept = getattr(session, "_intercept_create_request", None)
    if intercept is None:
        raise InternalAPIMissing(
            f"{type(session).__name__}._intercept_create_request is missing: this sagemaker-core cannot take a "
            "training request into a pipeline step"
        )
    intercept(request, None, "train")


def docker_compose_command() -> list[str]:
    """The docker compose command sagemaker-core's Docker local engine will run (``docker compose``
    or ``docker-compose``), found the way the engine finds it.

    ``sagemaker.core.local.image._SageMakerContainer._get_compose_cmd_prefix()`` (sagemaker-core 2.27;
    the same static method as SDK v2's ``sagemaker.local.image``) raises ``ImportError`` naming what
    it looked for when neither is installed.

    Raises:
        ImportError: docker compose is not installed (sagemaker-core's message).
        InternalAPIMissing: this sagemaker-core has no such class or method.
    """
    from sagemaker.core.local import image

    container = getattr(image, "_SageMakerContainer", None)
    prefix = getattr(container, "_get_compose_cmd_prefix", None)
    if prefix is None:
        raise InternalAPIMissing(
            "sagemaker.core.local.image._SageMakerContainer._get_compose_cmd_prefix is missing: this sagemaker-core "
            "finds docker compose another way"
        )
    return list(prefix())


# -- sagemaker-train -----------------------------------------------------------------------------------
def model_trainer_metric_definitions(trainer: Any) -> list[Any] | None:
    """The metric definitions a sagemaker-train ``ModelTrainer`` will send (None when none were set).

    ``ModelTrainer.with_metric_definitions`` stores them in the private attribute
    ``_metric_definitions`` and offers no getter (sagemaker-train 1.27, ``sagemaker/train/model_trainer.py``);
    sagemaker-tc reads them so the compiler's definitions are added after the user's, not over them.

    Raises:
        InternalAPIMissing: the trainer has no such attribute (a sagemaker-train that renamed it).
    """
    private = getattr(trainer, "__pydantic_private__", None) or {}
    if "_metric_definitions" not in private:
        raise InternalAPIMissing(
            f"{type(trainer).__name__}._metric_definitions is missing: this sagemaker-train keeps metric definitions "
            "elsewhere, so sagemaker-tc cannot add the compiler's after yours"
        )
    return private["_metric_definitions"]
