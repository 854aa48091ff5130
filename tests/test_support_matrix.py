"""The support matrix (sagemaker_tc/sdk/support_matrix.json): its data, the dev stack against this
environment, and the build-time refusal of a stock DLC that matches no tested stack."""

import dataclasses
import json
import re
import sys
from importlib import metadata
from pathlib import Path

import boto3
import pytest

from sagemaker_tc import HuggingFace, ModelTrainer, PyTorch, TrainingCompilerConfig, UnsupportedImageError
from sagemaker_tc.errors import SupportMatrixError
from sagemaker_tc.sdk import images
from sagemaker_tc.sdk.support import major_minor, parse_matrix, support_matrix

REPO = Path(__file__).resolve().parents[1]
MATRIX_JSON = REPO / "sagemaker_tc" / "sdk" / "support_matrix.json"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
CLOUD = {"instance_type": "ml.g5.2xlarge", "role": ROLE, "output_path": "s3://tc-bucket/jobs", "py_version": "py312"}
TESTED_TEXT = (
    "tested: transformers 4.56.2 / torch 2.8.0 (hf-4.56-pt2.8), transformers 5.24.0 / torch 2.13.0 (dev), "
    "transformers 4.55.0 / torch 2.7.1 (hf-4.55-pt2.7), transformers 5.3.0 / torch 2.9.0 (hf-5.3-pt2.9), "
    "transformers 5.3.0 / torch 2.10.0 (pt-2.10), transformers 5.17.0 / torch 2.11.0 (gpu-check)"
)
DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/"


def test_the_matrix_reads_and_marks_its_lanes():
    """Every stack parses; the default is the HF 4.56 / PyTorch 2.8 DLC; make test's stacks are tested, and
    a make test-stacks stack is tested only with its lane's committed results file."""
    matrix = support_matrix()
    assert matrix.default().name == "hf-4.56-pt2.8"
    assert [stack.name for stack in matrix.tested()] == [
        "dev",
        "hf-4.56-pt2.8",
        "hf-4.55-pt2.7",
        "hf-5.3-pt2.9",
        "pt-2.10",
        "gpu-check",
    ]
    for stack in matrix.stacks:
        if stack.lane == "make test":
            assert stack.tested, stack.name
        elif stack.tested:
            result = json.loads((REPO / "benchmarks" / "results" / f"stack-{stack.name}.json").read_text())
            assert result["installed"]["torch"].split("+")[0] == stack.torch, stack.name
            assert result["counts"]["passed"] > 0 and (not result["failing"] or stack.notes), stack.name
        if stack.kind == "huggingface-dlc":
            assert stack.accelerate and stack.peft and stack.source, stack.name
    assert images.MIN_PYTORCH == (2, 7) == matrix.floor.version and matrix.floor.reason


def test_the_dev_stack_is_this_environment():
    """constraints.txt pins the dev stack's torch, transformers, accelerate and peft; in that environment
    (make test's venv) the installed ones and Python are the dev stack's."""
    dev = support_matrix().stack("dev")
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (REPO / "constraints.txt").read_text(), re.MULTILINE))
    assert [pins.get(name) for name in ("torch", "transformers", "accelerate", "peft")] == [
        dev.torch,
        dev.transformers,
        dev.accelerate,
        dev.peft,
    ]
    if metadata.version("torch").split("+")[0] != dev.torch:
        pytest.skip("another stack's environment (make test-stacks): the dev pins are checked above")
    installed = {name: metadata.version(name) for name in ("transformers", "accelerate", "peft")}
    assert installed == {"transformers": dev.transformers, "accelerate": dev.accelerate, "peft": dev.peft}
    assert f"{sys.version_info.major}.{sys.version_info.minor}" == dev.python


def test_a_malformed_matrix_is_named():
    data = json.loads(MATRIX_JSON.read_text())
    data["stacks"][0]["tpu"] = "v5"
    with pytest.raises(SupportMatrixError, match=r"stack 'dev': unknown keys \['tpu'\]"):
        parse_matrix(data)
    data["stacks"][0].pop("tpu")
    data["stacks"][0]["status"] = "green"
    with pytest.raises(SupportMatrixError, match="accepted kinds: .*statuses: tested, untested"):
        parse_matrix(data)
    assert major_minor("2.13.0+cpu") == (2, 13)


@pytest.mark.parametrize(
    ("cls", "versions"),
    [
        (HuggingFace, {"transformers_version": "4.56", "pytorch_version": "2.8"}),
        (HuggingFace, {"transformers_version": "4.56.0", "pytorch_version": "2.8.0"}),
        (PyTorch, {"framework_version": "2.8"}),
    ],
)
def test_a_tested_stack_builds(make, cls, versions):
    estimator = make(cls, **CLOUD, **versions)
    assert estimator.compiler_enabled and "2.8" in estimator.training_image_uri("us-east-1")


@pytest.mark.parametrize(
    ("cls", "versions", "asked", "stack"),
    [
        (
            HuggingFace,
            {"transformers_version": "4.55", "pytorch_version": "2.7"},
            "transformers_version='4.55'",
            "hf-4.55-pt2.7",
        ),
        (PyTorch, {"framework_version": "2.10", "py_version": "py313"}, "framework_version='2.10'", "pt-2.10"),
    ],
)
def test_an_untested_stack_is_refused_when_built(make, monkeypatch, cls, versions, asked, stack):
    """A DLC that resolves (checked with the compiler off) but matches no tested stack is refused with
    the compiler on, naming what was asked and the tested stacks; compiler off builds and resolves it.
    Every stock DLC with PyTorch >= 2.7 matches a tested stack today, so the matrix here marks the one
    it would match untested, as it stood before its lane ran."""
    matrix = support_matrix()
    marked = tuple(dataclasses.replace(s, status="untested") if s.name == stack else s for s in matrix.stacks)
    monkeypatch.setattr(images, "support_matrix", lambda: dataclasses.replace(matrix, stacks=marked))
    arguments = {**CLOUD, **versions}
    off = make(cls, **arguments, compiler_config=TrainingCompilerConfig(enabled=False))
    assert off.training_image_uri("us-east-1")  # a real, resolvable DLC
    with pytest.raises(UnsupportedImageError) as raised:
        make(cls, **arguments)
    text = str(raised.value)
    assert f"{cls.__name__}(" in text and asked in text and "matches no tested sagemaker-tc stack" in text
    assert f"({stack})" not in text and "(hf-4.56-pt2.8)" in text and "TrainingCompilerConfig(enabled=False)" in text


def test_what_runs_no_stock_dlc_is_not_refused(make):
    """Your own image and local_process (this host's Python) are not checked against the matrix."""
    mine = {**CLOUD, "image_uri": "123.dkr.ecr.us-east-1.amazonaws.com/mine:1"}
    assert make(PyTorch, **mine, framework_version="2.9").image_uri
    assert make(PyTorch, framework_version="2.9", py_version="py312").compiler_enabled  # local_process


@pytest.mark.parametrize("version", ["2.5", "2.6"])
def test_below_the_floor_says_so_when_built(make, version):
    """PyTorch 2.6 has a training DLC but is below the floor (support_matrix.json's reason)."""
    with pytest.raises(UnsupportedImageError, match=rf"framework_version='{version}': .*needs PyTorch >= 2.7"):
        make(PyTorch, **CLOUD, framework_version=version)


@pytest.mark.parametrize(
    ("image", "refused"),
    [
        ("pytorch-training:2.8-gpu-py312", False),
        ("huggingface-pytorch-training:2.8.0-transformers4.56.2-gpu-py312-cu129-ubuntu22.04", False),
        ("pytorch-training:2.10.0-gpu-py312-cu130-ubuntu22.04-sagemaker", False),
        ("huggingface-pytorch-training:2.9.0-transformers5.3.0-gpu-py312-cu130-ubuntu22.04", False),
        ("huggingface-pytorch-training:2.8.0-transformers5.3.0-gpu-py312", True),
    ],
)
def test_modeltrainer_checks_a_stock_dlc_against_the_matrix(image, refused):
    if refused:
        with pytest.raises(UnsupportedImageError, match=re.escape(TESTED_TEXT)):
            images.check_training_image(DLC + image)
    else:
        images.check_training_image(DLC + image)


def modeltrainer(source_dir, compiler_config, image):
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.core.training.configs import Compute, OutputDataConfig, SourceCode

    return ModelTrainer(
        training_image=DLC + image,
        source_code=SourceCode(source_dir=str(source_dir), entry_script="echo.py"),
        compute=Compute(instance_type="ml.g5.2xlarge", instance_count=1),
        role=ROLE,
        output_data_config=OutputDataConfig(s3_output_path="s3://tc-v3-bucket/jobs"),
        sagemaker_session=Session(boto_session=boto3.Session(region_name="us-east-1"), default_bucket="tc-v3-bucket"),
        compiler_config=compiler_config,
    )


def test_modeltrainer_refuses_an_untested_dlc_unless_the_compiler_is_off(aws, monkeypatch, source_dir):
    boto3.client("s3").create_bucket(Bucket="tc-v3-bucket")
    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")  # moto has no SimulatePrincipalPolicy
    untested = "huggingface-pytorch-training:2.8.0-transformers5.3.0-gpu-py312"  # no stack pairs these
    with pytest.raises(UnsupportedImageError, match=r"training_image .*transformers5\.3\.0.* matches no tested"):
        modeltrainer(source_dir, TrainingCompilerConfig(), untested)
    assert not modeltrainer(source_dir, TrainingCompilerConfig(enabled=False), untested).compiler_enabled
    assert modeltrainer(source_dir, TrainingCompilerConfig(), "pytorch-training:2.8-gpu-py312").compiler_enabled


def test_a_lane_with_too_little_disk_stops_before_pip(tmp_path):
    """A new lane environment (a CUDA torch build) is refused with the free space named when the disk
    cannot hold it, not left to pip's "No space left on device" halfway through an install."""
    import stack_lane  # tests/ is on sys.path, as for conftest

    stack_lane.check_disk(tmp_path, need_gib=0)
    with pytest.raises(SystemExit, match=r"GiB free on the disk of .*needs about 1000000 GiB"):
        stack_lane.check_disk(tmp_path, need_gib=1_000_000)
