"""``backend="xla"`` where it can be checked without torch_xla: the config, the refusals at
construction, and that nothing XLA happens in a job whose backend is not ``xla``. The XLA training
itself is tested in its own environment (``make test-xla``, tests_xla/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

from sagemaker_tc import ConfigError, ConfigWarning, HuggingFace, PyTorch, TrainingCompilerConfig
from sagemaker_tc.errors import CompilerError

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def test_xla_is_a_compiling_backend():
    config = TrainingCompilerConfig(backend="xla")
    assert config.compiles and config.backend == "xla"
    with pytest.raises(ConfigError, match="backend"):
        TrainingCompilerConfig(backend="openxla")


@pytest.mark.parametrize("extra", [{"mode": "max-autotune"}, {"plan": "regional"}])
def test_torch_compile_options_with_xla_warn_that_they_do_nothing(extra):
    with pytest.warns(ConfigWarning, match="with backend='xla' each optimizer step is one XLA graph"):
        TrainingCompilerConfig(backend="xla", **extra)


@pytest.mark.parametrize("cls", [HuggingFace, PyTorch])
@pytest.mark.parametrize("instance_type", ["ml.g5.2xlarge", "ml.p5.48xlarge", "local_gpu"])
def test_xla_on_a_gpu_is_refused_at_construction(make, cls, instance_type):
    with pytest.raises(ConfigError, match=r"XLA:CUDA was removed upstream in torch_xla 2\.9.*backend='inductor'"):
        make(cls, instance_type=instance_type, role=ROLE, compiler_config=TrainingCompilerConfig(backend="xla"))


def test_xla_on_a_cpu_instance_needs_an_image_with_torch_xla(make):
    config = TrainingCompilerConfig(backend="xla")
    cloud = {"instance_type": "ml.c5.xlarge", "role": ROLE, "output_path": "s3://tc-bucket/jobs"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the CPU-instance warning
        with pytest.raises(ConfigError, match=r"needs torch_xla in the training image.*sagemaker-tc\[xla\]"):
            make(PyTorch, compiler_config=config, **cloud)
        estimator = make(PyTorch, compiler_config=config, image_uri="my-xla-image", **cloud)
    assert estimator.compiler_config.backend == "xla"


def test_modeltrainer_refuses_xla_on_a_gpu():
    from sagemaker.core.training.configs import Compute, SourceCode

    from sagemaker_tc import ModelTrainer

    assets = os.path.join(os.path.dirname(__file__), "assets")
    trainer = None
    with pytest.raises(ConfigError, match="XLA:CUDA was removed upstream"):
        trainer = ModelTrainer(
            training_image="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312",
            source_code=SourceCode(source_dir=assets, entry_script="echo.py"),
            compute=Compute(instance_type="ml.g5.2xlarge"),
            role=ROLE,
            compiler_config=TrainingCompilerConfig(backend="xla"),
        )
    assert trainer is None


def test_xla_without_torch_xla_installed_is_a_clear_error_and_leaves_nothing_open():
    import torch

    from sagemaker_tc import compile_model
    from sagemaker_tc.compiler.session import current_session

    assert "torch_xla" not in sys.modules
    before = {name: os.environ.get(name) for name in ("PJRT_DEVICE", "XLA_FLAGS")}
    with pytest.raises(CompilerError, match=r"needs torch_xla.*pip install 'sagemaker-tc\[xla\]'"):
        compile_model(torch.nn.Linear(4, 2), TrainingCompilerConfig(backend="xla"))
    assert current_session() is None
    assert {name: os.environ.get(name) for name in before} == before


# A stand-in torch_xla that records being imported: importing it is what must not happen.
STUB = 'import os\nopen(os.environ["XLA_STUB_MARK"], "w").write("imported")\n'
JOB = textwrap.dedent(
    """
    import json, os, sys
    import torch
    from sagemaker_tc import TrainingCompilerConfig, compile_model
    from sagemaker_tc.compiler.session import current_session
    model = compile_model(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)),
                          TrainingCompilerConfig(backend=sys.argv[1], plan="model"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(torch.randn(4, 8)).sum().backward(); optimizer.step(); optimizer.zero_grad()
    current_session().close()
    print(json.dumps(sorted(k for k in os.environ if k in ("PJRT_DEVICE", "XLA_FLAGS"))))
    """
)


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_a_job_with_torch_xla_installed_but_another_backend_never_imports_it(tmp_path, backend):
    stub = tmp_path / "site" / "torch_xla"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(STUB)
    mark = tmp_path / "imported"
    environ = {k: v for k, v in os.environ.items() if k not in ("PJRT_DEVICE", "XLA_FLAGS")}
    environ.update(PYTHONPATH=str(tmp_path / "site"), XLA_STUB_MARK=str(mark))
    check = subprocess.run(
        [sys.executable, "-c", "import torch_xla"], env=environ, capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0 and mark.exists()  # the stand-in is importable and records it
    mark.unlink()
    out = subprocess.run(
        [sys.executable, "-c", JOB, backend], env=environ, capture_output=True, text=True, timeout=600, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
    assert not mark.exists()
