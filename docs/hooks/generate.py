"""mkdocs hook: fills the generated sections of the docs from the code and data they describe.

A page marks a section with ``<!-- generated: NAME -->`` on a line of its own; at build time the
marker is replaced by the output of ``SECTIONS[NAME]()``. The sources are the pydantic model
``sagemaker_tc.config.TrainingCompilerConfig``, the instance-family table
``sagemaker_tc/sdk/instance_families.json``, sagemaker-core's DLC image tables as
``sagemaker_tc.sdk.images`` reads them, ``containers/matrix.json``, the known-wrong plan table
``sagemaker_tc.compiler.known_wrong.KNOWN_WRONG`` and the support matrix
``sagemaker_tc/sdk/support_matrix.json``, so the reference cannot drift from the code.
``tests/test_docs.py`` checks the same functions.
"""

from __future__ import annotations

import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)
REGION = "us-east-1"  # the region of the example image URIs


def _type_name(annotation: Any) -> str:
    """A field's type as a reader writes it: ``bool``, ``"a" | "b"``, ``list[int] | "auto" | None``."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(value) for value in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in typing.get_args(annotation))
    if annotation is type(None):
        return "None"
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_name(arg) for arg in typing.get_args(annotation))}]"
    return annotation.__name__


def _bounds(field: Any) -> str:
    parts = []
    for item in field.metadata:
        for name, symbol in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(item, name, None)
            if value is not None:
                parts.append(f"{symbol} {value}")
    return f" ({', '.join(parts)})" if parts else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _python_literal(value: Any) -> str:
    """``value`` as a user writes it in Python: ``True``, ``None``, ``3``, ``"auto"``."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def config_reference() -> str:
    """Every ``TrainingCompilerConfig`` field: name, type, default (as Python), description."""
    from sagemaker_tc.config import TrainingCompilerConfig

    rows = ["| field | type | default | description |", "| --- | --- | --- | --- |"]
    for name, field in TrainingCompilerConfig.model_fields.items():
        default = _python_literal(field.default)
        kind = _type_name(field.annotation) + _bounds(field)
        rows.append(f"| `{name}` | `{_cell(kind)}` | `{default}` | {_cell(field.description or '')} |")
    return "\n".join(rows)


def instance_families() -> str:
    """The instance-family table, as the estimators read it."""
    from sagemaker_tc.sdk.instances import instance_families as table

    families = table()
    what = {
        "gpu": "accepted: NVIDIA GPUs, compiled with TorchInductor (Triton kernels)",
        "cpu": "accepted with a `CpuInstanceWarning`: TorchInductor compiles C++ kernels; gains are model-dependent",
        "neuron": "refused (`UnsupportedInstanceTypeError`): Trainium/Inferentia compile with the Neuron SDK",
    }
    rows = ["| kind | families | sagemaker-tc |", "| --- | --- | --- |"]
    for kind in ("gpu", "cpu", "neuron"):
        rows.append(f"| {kind.upper()} | {', '.join(f'`{name}`' for name in families[kind])} | {what[kind]} |")
    return "\n".join(rows)


def _short_versions(versions: dict, aliases: dict) -> list[tuple[str, str]]:
    """``(alias, full version)`` pairs, e.g. ``("2.8", "2.8.0")``, oldest first."""
    by_full = {full: alias for alias, full in aliases.items()}
    return [(by_full.get(full, full), full) for full in versions]


def _accepted(version: str) -> bool:
    from sagemaker_tc.sdk.images import MIN_PYTORCH

    return tuple(int(part) for part in version.split(".")[:2]) >= MIN_PYTORCH


def dlc_images() -> str:
    """The stock DLC training images the estimators resolve (PyTorch ≥ the runtime's minimum)."""
    from sagemaker.core import image_uris

    from sagemaker_tc.errors import UnsupportedImageError
    from sagemaker_tc.sdk.images import MIN_PYTORCH, training_image

    lines = [
        f"`PyTorch(framework_version=..., py_version=...)`, PyTorch ≥ {'.'.join(map(str, MIN_PYTORCH))}:",
        "",
        "| `framework_version` | `py_version` | GPU image (`ml.g5.2xlarge`, us-east-1) | CPU image |",
        "| --- | --- | --- | --- |",
    ]
    table = image_uris.config_for_framework("pytorch")["training"]
    for alias, full in _short_versions(table["versions"], table.get("version_aliases", {})):
        if not _accepted(full):
            continue
        for py_version in table["versions"][full]["py_versions"]:
            uris = []
            for instance_type in ("ml.g5.2xlarge", "ml.m5.xlarge"):
                try:
                    uri = training_image(
                        framework="pytorch",
                        region=REGION,
                        instance_type=instance_type,
                        py_version=py_version,
                        pytorch_version=alias,
                    )
                    uris.append(f"`{uri.split('/', 1)[1]}`")
                except UnsupportedImageError:
                    uris.append("none")
            lines.append(f"| `{alias}` | `{py_version}` | {uris[0]} | {uris[1]} |")
    lines += [
        "",
        "`HuggingFace(transformers_version=..., pytorch_version=..., py_version=...)` (GPU only):",
        "",
        "| `transformers_version` | `pytorch_version` | `py_version` | GPU image (us-east-1) |",
        "| --- | --- | --- | --- |",
    ]
    table = image_uris.config_for_framework("huggingface")["training"]
    for alias, full in _short_versions(table["versions"], table.get("version_aliases", {})):
        entry = table["versions"][full]
        bases = {key.removeprefix("pytorch"): value for key, value in entry.items() if key.startswith("pytorch")}
        for base_full, base in bases.items():
            if not _accepted(base_full):
                continue
            base_alias = ".".join(base_full.split(".")[:2])
            for py_version in base["py_versions"]:
                uri = training_image(
                    framework="huggingface",
                    region=REGION,
                    instance_type="ml.g5.2xlarge",
                    py_version=py_version,
                    pytorch_version=base_alias,
                    transformers_version=alias,
                )
                lines.append(f"| `{alias}` | `{base_alias}` | `{py_version}` | `{uri.split('/', 1)[1]}` |")
    lines += [
        "",
        f"Registry in {REGION}: `{uri.split('/', 1)[0]}`. Other regions: the same repositories and tags, in the "
        "registry sagemaker-core's tables give for the region (the estimators resolve it for you).",
    ]
    return "\n".join(lines)


def container_matrix() -> str:
    """The images ``containers/build.py`` builds (``containers/matrix.json``)."""
    entries = json.loads((REPO / "containers" / "matrix.json").read_text(encoding="utf-8"))["images"]
    rows = ["| image | Dockerfile | base DLC versions |", "| --- | --- | --- |"]
    for entry in entries:
        versions = f"PyTorch {entry['pytorch_version']}, {entry['py_version']}"
        if entry.get("transformers_version"):
            versions = f"transformers {entry['transformers_version']}, " + versions
        rows.append(f"| `{entry['name']}` | `containers/{entry['dockerfile']}` | {versions} |")
    return "\n".join(rows)


def tested_versions() -> str:
    """The support matrix (``sagemaker_tc/sdk/support_matrix.json``): one row per stack, then the floor."""
    from sagemaker_tc.sdk.support import support_matrix

    matrix = support_matrix()
    rows = [
        "| stack | kind | Python | torch | transformers | accelerate | peft | lane | status |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for stack in matrix.stacks:
        name = f"`{stack.name}` (default)" if stack.default else f"`{stack.name}`"
        cells = [stack.python, stack.torch, stack.transformers, stack.accelerate, stack.peft]
        versions = " | ".join(value or "not recorded" for value in cells)
        status = f"{stack.status}: {_cell(stack.notes)}" if stack.notes else stack.status
        rows.append(f"| {name} | {stack.kind} | {versions} | `{stack.lane}` | {status} |")
    floor = matrix.floor
    rows += ["", f"The floor is PyTorch {floor.torch}: {_cell(floor.reason)}."]
    return "\n".join(rows)


def known_wrong_plans() -> str:
    """The plans ``plan="auto"`` leaves out per architecture (``sagemaker_tc.compiler.known_wrong``)."""
    from sagemaker_tc.compiler.known_wrong import KNOWN_WRONG

    rows = ["| architecture | plans | torch | why | test |", "| --- | --- | --- | --- | --- |"]
    for entry in KNOWN_WRONG:
        plans = ", ".join(f"`{plan}`" for plan in entry.plans)
        rows.append(
            f"| `{entry.architecture}` | {plans} | `{entry.torch_range()}` | {_cell(entry.reason)} | `{entry.repro}` |"
        )
    return "\n".join(rows)


SECTIONS = {
    "config-reference": config_reference,
    "instance-families": instance_families,
    "dlc-images": dlc_images,
    "container-matrix": container_matrix,
    "tested-versions": tested_versions,
    "known-wrong": known_wrong_plans,
}


def render(markdown: str) -> str:
    """Replace every ``<!-- generated: NAME -->`` marker in ``markdown``.

    Raises:
        KeyError: a marker names no known section.
    """
    return MARKER.sub(lambda match: SECTIONS[match.group(1)](), markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs event: fill the page's generated sections."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return render(markdown)
