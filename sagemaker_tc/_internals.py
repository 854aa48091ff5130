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


class InternalAPIMissing(RuntimeError):
    """A private API this module wraps is not in the installed library (it moved or was renamed)."""


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
