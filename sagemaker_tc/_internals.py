"""Every private API of torch, transformers and sagemaker-core that sagemaker-tc touches, in one place.

Each is wrapped in a small function whose docstring names the symbol, the versions it was checked
against, and what we do when it is missing. Nothing outside this module uses a ``torch._*`` module,
a ``_``-prefixed attribute of torch, transformers or sagemaker-core, or dynamo's log-message text;
``tests/test_internals.py`` calls every wrapper against the installed versions and fails naming the
symbol that moved.

Imports are lazy (inside each function): the SDK side imports this module without torch.
"""

from __future__ import annotations

from typing import Any

from sagemaker_tc.errors import InternalAPIMissing

__all__ = ["InternalAPIMissing", "docker_compose_command", "hand_request_to_pipeline"]


# -- sagemaker-core ------------------------------------------------------------------------------------
def hand_request_to_pipeline(session: Any, request: dict[str, Any]) -> None:
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
