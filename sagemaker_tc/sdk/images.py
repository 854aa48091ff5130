"""Training images: stock AWS Deep Learning Container (DLC) URIs from sagemaker-core's image tables.

``image_uri=`` on the estimator overrides this (SMTC refused overrides; we allow them), which is also
how our own images from ``containers/`` are used.

The tables are sagemaker-core's (``sagemaker.core.image_uris.config_for_framework``): each framework
lists versions, short aliases (``"2.8"`` -> ``"2.8.0"``), Python versions and processors. A full
version the table does not list (``"4.56.0"`` when the DLC carries 4.56.2) resolves to the image of
its major.minor alias, with a log line naming the version the image carries. Errors list only what
sagemaker-tc supports: images with PyTorch >= 2.7 (the floor in ``support_matrix.json``).

With the compiler on, a stock DLC must also match a *tested* stack of the support matrix
(:func:`check_tested_stack`, :mod:`sagemaker_tc.sdk.support`).
"""

from __future__ import annotations

import logging
import re
from functools import cache
from typing import Any

from sagemaker_tc.errors import UnsupportedImageError
from sagemaker_tc.sdk.instances import InstanceKind
from sagemaker_tc.sdk.support import support_matrix

logger = logging.getLogger(__name__)

_UPGRADE_HINT_RE = re.compile(r"You may need to upgrade your SDK version \(pip install -U sagemaker\)[^.]*\.\s*")
# The support matrix's floor (support_matrix.json, with its reason): the oldest PyTorch the runtime runs on.
MIN_PYTORCH = support_matrix().floor.version
_MIN_TEXT = ".".join(map(str, MIN_PYTORCH))
_PYTORCH_PREFIX = "pytorch"  # Hugging Face tables key each version's PyTorch base as "pytorch<version>"


def _version_tuple(version: str) -> tuple[int, ...]:
    if not isinstance(version, str):
        raise UnsupportedImageError(f"versions are strings such as '2.8', got {version!r}")
    try:
        return tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        raise UnsupportedImageError(f"{version!r} is not a version number such as '2.8'") from None


def _short(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _check_pytorch(version: str | None, argument: str) -> str:
    if not version:
        raise UnsupportedImageError(f"{argument} is required to pick a training image (or pass image_uri=)")
    try:
        numbers = _version_tuple(version)
    except UnsupportedImageError as error:
        raise UnsupportedImageError(f"{argument}: {error}") from None
    if numbers < MIN_PYTORCH:
        raise UnsupportedImageError(
            f"{argument}={version!r}: sagemaker-tc compiles with TorchInductor and needs PyTorch >= {_MIN_TEXT}; "
            f"tested: {_tested_list()}"
        )
    return version


def check_pytorch_floor(version: str | None, argument: str) -> None:
    """Refuse a torch version below sagemaker-tc's floor (PyTorch 2.7: TorchInductor's training step),
    such as SMTC's ``"1.13"``; None (no version asked for) passes.

    Raises:
        UnsupportedImageError: below the floor, or not a version number such as ``"2.8"``.
    """
    if version:
        _check_pytorch(version, argument)


def training_table(framework: str) -> dict[str, Any]:
    """sagemaker-core's training image table for ``"pytorch"`` or ``"huggingface"``."""
    from sagemaker.core import image_uris

    return image_uris.config_for_framework(framework)["training"]


def _table_key(versions: dict[str, Any], aliases: dict[str, str], version: str, what: str) -> str | None:
    """The key to look ``version`` up by: itself when the table has it (full or alias), else its
    major.minor alias (logged), else None."""
    if version in versions or version in aliases:
        return version
    short = _short(version)
    if short in aliases:
        logger.info("%s %s: using the image for %s, which carries %s", what, version, short, aliases[short])
        return short
    return None


def _full(table: dict[str, Any], key: str) -> str:
    return table.get("version_aliases", {}).get(key, key)


def supported_pytorch_versions() -> list[str]:
    """``framework_version`` values (major.minor) with a PyTorch training DLC, PyTorch >= 2.7."""
    table = training_table("pytorch")
    return [_short(full) for full in table["versions"] if _version_tuple(full) >= MIN_PYTORCH]


def supported_huggingface_versions() -> list[tuple[str, str]]:
    """``(transformers major.minor, PyTorch major.minor)`` pairs with a Hugging Face training DLC,
    PyTorch >= 2.7."""
    table = training_table("huggingface")
    pairs = []
    for full, entry in table["versions"].items():
        for key in entry:
            base = key.removeprefix(_PYTORCH_PREFIX)
            if key.startswith(_PYTORCH_PREFIX) and _version_tuple(base) >= MIN_PYTORCH:
                pairs.append((_short(full), _short(base)))
    return pairs


def _pytorch_entry(version: str) -> tuple[str, dict[str, Any]]:
    table = training_table("pytorch")
    key = _table_key(table["versions"], table.get("version_aliases", {}), version, "framework_version")
    if key is None:
        raise UnsupportedImageError(
            f"framework_version={version!r} has no PyTorch training image in sagemaker-core's tables; sagemaker-tc "
            f"needs PyTorch >= {_MIN_TEXT}, supported: {', '.join(supported_pytorch_versions())} (or pass image_uri=)"
        )
    return key, table["versions"][_full(table, key)]


def _huggingface_entry(transformers: str, pytorch: str) -> tuple[str, str, dict[str, Any]]:
    table = training_table("huggingface")
    key = _table_key(table["versions"], table.get("version_aliases", {}), transformers, "transformers_version")
    pairs = ", ".join(f"transformers {t} with PyTorch {p}" for t, p in supported_huggingface_versions())
    if key is None:
        raise UnsupportedImageError(
            f"transformers_version={transformers!r} has no Hugging Face training image in sagemaker-core's tables "
            f"with PyTorch >= {_MIN_TEXT}; supported: {pairs} (or pass image_uri=)"
        )
    entry = table["versions"][_full(table, key)]
    base = f"{_PYTORCH_PREFIX}{pytorch}"
    base_key = _table_key(entry, entry.get("version_aliases", {}), base, "pytorch_version")
    if base_key is None:
        raise UnsupportedImageError(
            f"transformers_version={transformers!r} has no image with pytorch_version={pytorch!r}; supported: "
            f"{pairs} (or pass image_uri=)"
        )
    return key, base_key, entry[_full(entry, base_key)]


def _check_py_version(py_version: str | None, entry: dict[str, Any], what: str) -> str:
    if not py_version:
        raise UnsupportedImageError(
            "py_version is required to pick a training image, e.g. 'py312' (or pass image_uri=)"
        )
    if py_version not in entry.get("py_versions", [py_version]):
        raise UnsupportedImageError(
            f"py_version={py_version!r} has no {what} training image; Supported py_version(s): "
            f"{', '.join(entry['py_versions'])} (or pass image_uri=)"
        )
    return py_version


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
        pytorch_version: PyTorch version (``framework_version`` for PyTorch, ``pytorch_version`` for HF);
            ``"2.8"`` or a full version such as ``"2.8.0"``.
        transformers_version: Hugging Face only, e.g. ``"4.56"`` or ``"4.56.0"``.

    Raises:
        UnsupportedImageError: a version is missing, older than PyTorch 2.7, or the combination has no
            image; the message lists the supported versions (PyTorch >= 2.7 only).
    """
    from sagemaker.core import image_uris

    if framework == "huggingface":
        if not transformers_version:
            raise UnsupportedImageError(
                "transformers_version is required to pick a training image (or pass image_uri=)"
            )
        pytorch = _check_pytorch(pytorch_version, "pytorch_version")
        key, base_key, entry = _huggingface_entry(transformers_version, pytorch)
        kwargs = {"version": key, "base_framework_version": base_key}
        what = f"transformers {transformers_version} / PyTorch {pytorch}"
    else:
        key, entry = _pytorch_entry(_check_pytorch(pytorch_version, "framework_version"))
        kwargs = {"version": key}
        what = f"PyTorch {pytorch_version}"
    _check_py_version(py_version, entry, what)
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


def _tested_list() -> str:
    """The support matrix's tested stacks, the default first, as the refusals list them."""
    tested = sorted(support_matrix().tested(), key=lambda stack: not stack.default)
    return ", ".join(f"{stack.describe()} ({stack.name})" for stack in tested)


def _untested(what: str, *, override: str = "pass image_uri= with an image you have tested") -> UnsupportedImageError:
    """The refusal of a stock DLC that matches no tested stack: what was asked, and the tested stacks."""
    listed = _tested_list()
    return UnsupportedImageError(
        f"{what} matches no tested sagemaker-tc stack (torch and transformers compared by major.minor); "
        f"tested: {listed}. Use a tested stack, {override}, or turn the compiler off with "
        "TrainingCompilerConfig(enabled=False) (docs/supported.md, 'Tested versions')"
    )


def check_tested_stack(
    *,
    framework: str,
    estimator: str,
    pytorch_argument: str,
    pytorch_version: str | None,
    transformers_version: str | None = None,
) -> None:
    """Refuse, when an estimator with the compiler on and no ``image_uri`` is built, a stock DLC whose
    torch (and, for Hugging Face, transformers) matches no stack of the support matrix whose status is
    ``"tested"``. Missing versions are left to :func:`training_image`, which refuses them at ``fit()``.

    Args:
        framework: ``"pytorch"`` (torch compared) or ``"huggingface"`` (torch and transformers).
        estimator: the estimator's class name, for the message.
        pytorch_argument: the torch version's argument name (``framework_version``, ``pytorch_version``).
        pytorch_version: as given, e.g. ``"2.8"`` or ``"2.8.0"``.
        transformers_version: Hugging Face only, as given.

    Raises:
        UnsupportedImageError: torch below the floor (PyTorch 2.7), a version that is not a version
            number, or versions that match no tested stack; the message names the versions asked for
            and lists the tested stacks.
    """
    if not pytorch_version or (framework == "huggingface" and not transformers_version):
        return
    _check_pytorch(pytorch_version, pytorch_argument)  # the floor first: its message says why
    asked = f"{pytorch_argument}={pytorch_version!r}"
    if transformers_version is not None:
        _version_tuple(transformers_version)
        asked = f"transformers_version={transformers_version!r}, {asked}"
    try:
        match = support_matrix().tested_match(torch=pytorch_version, transformers=transformers_version)
    except ValueError as error:
        raise UnsupportedImageError(f"{estimator}({asked}): {error}") from None
    if match is None:
        raise _untested(f"{estimator}({asked})")


def check_processor(framework: str, estimator: str, instance_type: str, kind: InstanceKind) -> None:
    """Refuse, at construction, a CPU job whose framework has no CPU training image (the stock
    Hugging Face DLCs are GPU-only), instead of failing at ``fit()``. Call it only without ``image_uri``.

    Args:
        framework: ``"pytorch"`` or ``"huggingface"``.
        estimator: the estimator's class name, for the message.
        instance_type: as checked (a pipeline parameter's default value).
        kind: where the job runs; an ``ml.*`` CPU family and Docker's ``local`` need a CPU image.

    Raises:
        UnsupportedImageError: the table lists no CPU image for ``framework``.
    """
    needs_cpu = kind is InstanceKind.CPU or (kind is InstanceKind.LOCAL_DOCKER and instance_type == "local")
    if not needs_cpu or "cpu" in training_table(framework).get("processors", ["cpu"]):
        return
    raise UnsupportedImageError(
        f"{estimator} on {instance_type}: the stock {framework} training images are GPU-only (sagemaker-core's "
        "tables list no CPU image), so this job would have no image; pick a GPU instance type, pass image_uri= "
        "(a CPU image with your libraries), or use PyTorch(framework_version=...) which has CPU images"
    )


# An ECR image URI: <account>.dkr.ecr.<region>.amazonaws.com[.cn]/<repository>:<tag>.
_ECR_IMAGE_RE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/(?P<repository>[a-z0-9._/-]+):(?P<tag>[^@\s]+)$"
)
_TAG_VERSION_RE = re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)")
_TAG_TRANSFORMERS_RE = re.compile(r"-transformers(?P<major>\d+)\.(?P<minor>\d+)")  # Hugging Face DLC tags
_NOT_PYTORCH = ("tensorflow", "mxnet")
_DLC_TABLES = ("pytorch", "huggingface", "tensorflow", "pytorch-training-compiler", "huggingface-training-compiler")


def _registries(table: Any) -> set[str]:
    """Every account ID under a ``registries`` key of an image table."""
    if isinstance(table, dict):
        found = set(table["registries"].values()) if isinstance(table.get("registries"), dict) else set()
        return found.union(*(_registries(value) for value in table.values()))
    return set()


@cache
def dlc_accounts() -> frozenset[str]:
    """The AWS accounts that publish the Deep Learning Containers, from sagemaker-core's image tables."""
    from sagemaker.core import image_uris

    return frozenset().union(*(_registries(image_uris.config_for_framework(name)) for name in _DLC_TABLES))


# SMTC's images by their repository's name, in any registry (an AWS DLC account, a private ECR mirror,
# the pre-release account an SMTC notebook used): "[...]/huggingface-pytorch-trcomp-training:<tag>".
_SMTC_IMAGE_RE = re.compile(r"(?:^|/)(?P<repository>[a-z0-9._-]*-trcomp-training):(?P<tag>[^@\s/:]+)$")


def _refuse_smtc_image(uri: Any, argument: str, hint: str) -> None:
    """Refuse SMTC's ``*-trcomp-training`` images wherever they are mirrored (PyTorch <= 1.13, Python 3.8/3.9).

    Raises:
        UnsupportedImageError: ``uri`` names one.
    """
    match = _SMTC_IMAGE_RE.search(uri) if isinstance(uri, str) else None
    if match is None:
        return
    version = _TAG_VERSION_RE.match(match.group("tag"))
    if "tensorflow" in match.group("repository"):
        carries = "is a TensorFlow image"
    else:
        carries = f"carries PyTorch {version['major']}.{version['minor']}" if version else "carries PyTorch < 2"
    raise UnsupportedImageError(
        f"{argument} {uri!r} {carries}: it is SMTC's Training Compiler image ({match.group('repository')}), and "
        f"sagemaker-tc compiles with TorchInductor and needs PyTorch >= {_MIN_TEXT}; {hint}"
    )


def check_training_image(uri: Any, *, argument: str = "training_image", tested_stack: bool = True) -> None:
    """Refuse a training image we can tell cannot run the compiler: SMTC's ``*-trcomp-training``
    images in any registry (a private mirror too), or an AWS Deep Learning Container
    (one of the accounts in sagemaker-core's tables) whose repository is TensorFlow or MXNet, or whose
    tag starts with a PyTorch version below 2.7, or
    whose tag's torch (and a Hugging Face tag's transformers) matches no tested stack of the support
    matrix (``tested_stack``; the estimators' ``image_uri`` skips that last check, as it always did).
    Other images (your own, a pipeline parameter) are accepted as they are. Called only with the
    compiler on; ``argument`` names the image in the message.

    Raises:
        UnsupportedImageError: the image is one of those; the message names a current one, or lists
            the tested stacks.
    """
    hint = (
        f"use a PyTorch >= {_MIN_TEXT} training image, e.g. sagemaker.core.image_uris.retrieve(framework='pytorch', "
        "version='2.8', py_version='py312', instance_type=..., region=..., image_scope='training')"
    )
    _refuse_smtc_image(uri, argument, hint)
    match = _ECR_IMAGE_RE.match(uri) if isinstance(uri, str) else None
    if match is None or match.group("account") not in dlc_accounts():
        return
    repository = match.group("repository")
    if any(name in repository for name in _NOT_PYTORCH):
        raise UnsupportedImageError(f"{argument} {uri!r} is not a PyTorch image: sagemaker-tc compiles PyTorch; {hint}")
    version = _TAG_VERSION_RE.match(match.group("tag"))
    if "pytorch" not in repository or version is None:
        return
    torch = f"{version['major']}.{version['minor']}"
    if (int(version["major"]), int(version["minor"])) < MIN_PYTORCH:
        raise UnsupportedImageError(
            f"{argument} {uri!r} carries PyTorch {torch}: sagemaker-tc compiles with "
            f"TorchInductor and needs PyTorch >= {_MIN_TEXT}; {hint}"
        )
    if not tested_stack:
        return
    transformers = _TAG_TRANSFORMERS_RE.search(match.group("tag"))
    transformers_version = f"{transformers['major']}.{transformers['minor']}" if transformers else None
    if support_matrix().tested_match(torch=torch, transformers=transformers_version) is None:
        what = f"torch {torch}" if transformers is None else f"transformers {transformers_version} / torch {torch}"
        raise _untested(f"training_image {uri!r} ({what})", override="use your own image as training_image")
