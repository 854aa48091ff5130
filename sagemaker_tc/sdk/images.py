"""Training images: stock AWS Deep Learning Container (DLC) URIs from sagemaker-core's image tables.

``image_uri=`` on the estimator overrides this (SMTC refused overrides; we allow them), which is also
how our own images from ``containers/`` are used.
"""

from __future__ import annotations

import re

from sagemaker_tc.errors import UnsupportedImageError

_UPGRADE_HINT_RE = re.compile(r"You may need to upgrade your SDK version \(pip install -U sagemaker\)[^.]*\.\s*")
# torch.compile with TorchInductor as this runtime uses it needs PyTorch 2.x; the runtime asks for >= 2.6.
MIN_PYTORCH = (2, 6)


def _version_tuple(version: str) -> tuple[int, ...]:
    if not isinstance(version, str):
        raise UnsupportedImageError(f"versions are strings such as '2.8', got {version!r}")
    try:
        return tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        raise UnsupportedImageError(f"{version!r} is not a version number such as '2.8'") from None


def _check_pytorch(version: str | None, argument: str) -> str:
    if not version:
        raise UnsupportedImageError(f"{argument} is required to pick a training image (or pass image_uri=)")
    if _version_tuple(version) < MIN_PYTORCH:
        minimum = ".".join(map(str, MIN_PYTORCH))
        raise UnsupportedImageError(
            f"{argument}={version!r}: sagemaker-tc compiles with TorchInductor and needs PyTorch >= {minimum}"
        )
    return version


def training_image(
    *,
    framework: str,
    region: str,
    instance_type: str,
    py_version: str | None,
    pytorch_version: str | None,
    transformers_version: str | None = None,
) -> str:
    """The stock DLC training image URI for these versions.

    Args:
        framework: ``"pytorch"`` or ``"huggingface"``.
        region: AWS region of the job, e.g. ``"us-east-1"``.
        instance_type: e.g. ``"ml.p5.48xlarge"`` (picks the GPU or CPU image).
        py_version: e.g. ``"py312"``.
        pytorch_version: PyTorch version (``framework_version`` for PyTorch, ``pytorch_version`` for HF).
        transformers_version: Hugging Face only.

    Raises:
        UnsupportedImageError: a version is missing, older than PyTorch 2.6, or the combination has no
            image; the message carries sagemaker-core's list of supported versions.
    """
    from sagemaker.core import image_uris

    if framework == "huggingface":
        if not transformers_version:
            raise UnsupportedImageError(
                "transformers_version is required to pick a training image (or pass image_uri=)"
            )
        pytorch = _check_pytorch(pytorch_version, "pytorch_version")
        kwargs = {"version": transformers_version, "base_framework_version": f"pytorch{pytorch}"}
    else:
        kwargs = {"version": _check_pytorch(pytorch_version, "framework_version")}
    if not py_version:
        raise UnsupportedImageError(
            "py_version is required to pick a training image, e.g. 'py312' (or pass image_uri=)"
        )
    try:
        return image_uris.retrieve(
            framework=framework,
            region=region,
            py_version=py_version,
            instance_type=instance_type,
            image_scope="training",
            **kwargs,
        )
    except ValueError as error:
        # sagemaker-core's text advises upgrading the SDK v2 package, which is not how this SDK gets new tables.
        detail = _UPGRADE_HINT_RE.sub("", str(error)).strip()
        raise UnsupportedImageError(
            f"no {framework} training image for {kwargs}, {py_version} in sagemaker-core's tables: {detail} "
            "(newer DLCs arrive with newer sagemaker-core releases; or pass image_uri=)"
        ) from None
