"""The runtime in this process: compile policy, launcher environment rules, torch-free SDK import."""

import json
import os
import subprocess
import sys
import tarfile

import pytest
from conftest import tiny_bert as conftest_tiny_bert

from sagemaker_tc import LauncherError, TrainingCompilerConfig, contract
from sagemaker_tc._internals import compiled_call
from sagemaker_tc.compiler.session import current_session
from sagemaker_tc.container import launcher


def tiny_bert():
    return conftest_tiny_bert(vocab_size=64, hidden_size=16, num_hidden_layers=3, max_position_embeddings=32)


def test_regional_compile_targets_the_transformer_layers_in_place():
    from sagemaker_tc.compiler.regions import find_repeated_blocks
    from sagemaker_tc.compiler.runtime import CompilerRuntime

    model = tiny_bert()
    keys = list(model.state_dict())
    blocks = find_repeated_blocks(model)
    assert [type(b).__name__ for b in blocks] == ["BertLayer"] * 3
    plan = CompilerRuntime().attach(model, TrainingCompilerConfig(plan="regional", baseline_steps=0))
    assert (plan.regional, plan.block_class, plan.num_regions) == (True, "BertLayer", 3)
    assert all(compiled_call(block) is not None for block in blocks)
    assert compiled_call(model) is None
    assert list(model.state_dict()) == keys


def test_whole_model_compile_when_regional_is_off():
    from sagemaker_tc.compiler.runtime import CompilerRuntime

    model = tiny_bert()
    plan = CompilerRuntime().attach(model, TrainingCompilerConfig(plan="model", baseline_steps=0))
    assert (plan.regional, plan.num_regions) == (False, 1)
    assert compiled_call(model) is not None


def test_repeated_blocks_found_without_no_split_modules():
    import torch

    from sagemaker_tc.compiler.regions import find_repeated_blocks

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Linear(4, 4)
            self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    net = Net()
    assert find_repeated_blocks(net) == list(net.layers)
    assert find_repeated_blocks(torch.nn.Sequential(torch.nn.Linear(4, 4))) == []


def test_disabled_config_leaves_the_model_uncompiled():
    import sagemaker_tc

    model = tiny_bert()
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(enabled=False))
    assert all(compiled_call(m) is None for m in model.modules())


def test_compile_model_follows_the_estimator_inside_a_job(monkeypatch):
    """Inside a job with no compiler_config the estimator decided: no compile. Outside a job: compile."""
    import sagemaker_tc

    monkeypatch.delenv(contract.ENV_FRAMEWORK_PARAMS, raising=False)
    monkeypatch.delenv(contract.ENV_SETTINGS, raising=False)
    monkeypatch.setenv("SM_TRAINING_ENV", "{}")
    in_job = sagemaker_tc.compile_model(tiny_bert())
    assert all(compiled_call(m) is None for m in in_job.modules())
    current_session().close()  # the job process ends; a laptop process starts without a session
    monkeypatch.delenv("SM_TRAINING_ENV")
    sagemaker_tc.compile_model(tiny_bert())
    assert current_session().runtime.prepared_plans() == ["regional", "model", "step"]  # plan="auto": all three


def test_report_command_finds_reports_and_names_what_is_not_one(tmp_path, capsys):
    from sagemaker_tc.cli import main

    job = tmp_path / "job" / "output"
    (job / "data" / "compiler").mkdir(parents=True)
    (job / "data" / "compiler" / "report.json").write_text(json.dumps({"compiled": True, "steps": 3}))
    with tarfile.open(job / "output.tar.gz", "w:gz") as tar:
        tar.add(job / "data" / "compiler", arcname="compiler")
    for path in (job / "output.tar.gz", tmp_path / "job", job / "data"):
        assert main(["report", str(path)]) == 0
        assert json.loads(capsys.readouterr().out) == {"compiled": True, "steps": 3}
    (tmp_path / "other.json").write_text("[1, 2]")
    assert main(["report", str(tmp_path / "other.json")]) == 2
    assert "is not a sagemaker-tc compiler report" in capsys.readouterr().err


def test_launcher_never_overwrites_a_user_variable(caplog):
    environ = {"TORCH_LOGS": "recompiles"}
    wanted = launcher.compiler_environment(
        TrainingCompilerConfig(debug=True), {"SM_OUTPUT_DATA_DIR": "/opt/ml/output/data"}
    )
    with caplog.at_level("WARNING", logger="sagemaker_tc.launcher"):
        applied = launcher.apply_environment(wanted, environ)
    assert environ["TORCH_LOGS"] == "recompiles"
    assert "TORCH_LOGS" not in applied
    assert environ["TORCH_TRACE"] == "/opt/ml/output/data/compiler/torch_trace"
    assert "already set to 'recompiles'; keeping it" in caplog.text


def test_compiler_environment_by_config():
    env = launcher.compiler_environment(TrainingCompilerConfig(debug=True, plan="model", dynamic=True), {})
    assert env["TORCH_LOGS"] == "graph_breaks,recompiles"
    assert env[contract.ENV_CONFIGURED] == "1"
    assert not any(name.startswith("ACCELERATE_DYNAMO_") for name in env)  # compiled in process, not by accelerate
    assert launcher.compiler_environment(TrainingCompilerConfig(backend="eager"), {}) == {contract.ENV_CONFIGURED: "1"}


def test_launcher_without_settings_names_the_problem(monkeypatch):
    monkeypatch.delenv(contract.ENV_FRAMEWORK_PARAMS, raising=False)
    monkeypatch.delenv(contract.ENV_SETTINGS, raising=False)
    with pytest.raises(LauncherError, match="no entry point"):
        launcher.main()


def test_launcher_missing_script_names_it_in_the_failure_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(contract.ENV_FRAMEWORK_PARAMS, raising=False)
    monkeypatch.setenv(contract.ENV_OUTPUT_DIR, str(tmp_path / "output"))
    with pytest.raises(LauncherError, match="'nope.py' was not found"):
        launcher.run("nope.py", [])
    assert (tmp_path / "output" / "failure").read_text().startswith("LauncherError: entry point 'nope.py'")


def test_sdk_side_imports_without_torch(tmp_path):
    (tmp_path / "train.py").write_text("")
    code = f"""
import sys
from sagemaker_tc import HuggingFace, PyTorch, TrainingCompilerConfig
estimator = HuggingFace("train.py", source_dir={str(tmp_path)!r}, instance_type="local_process",
                        compiler_config=TrainingCompilerConfig(), hyperparameters={{"lr": 0.1}})
from sagemaker_tc.sdk.modes.request import request_for
request = request_for(estimator.spec, "job", {{}}, "/tmp/s.tar.gz", output_path="file:///tmp/out").to_api_dict()
from sagemaker.core.training.configs import Compute, SourceCode
from sagemaker.train.model_trainer import Mode
from sagemaker_tc import ModelTrainer
trainer = ModelTrainer(training_mode=Mode.LOCAL_CONTAINER, training_image="img",
                       compute=Compute(instance_type="local_cpu"),
                       source_code=SourceCode(source_dir={str(tmp_path)!r}, entry_script="train.py"),
                       compiler_config=TrainingCompilerConfig(), local_container_root={str(tmp_path)!r})
import os; os.listdir(trainer.distributed.driver_dir)
print(sorted(m for m in ("torch", "transformers", "accelerate") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=os.environ)
    assert json.loads(out.stdout.strip().replace("'", '"')) == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("raise KeyError('missing column label')", "KeyError: 'missing column label'"),
        ("import sys; sys.exit(3)", "SystemExit: 3"),
        ("import sys; sys.exit(0)", None),
    ],
)
def test_launcher_writes_the_failure_file_with_the_exception_first(tmp_path, monkeypatch, body, expected):
    monkeypatch.delenv(contract.ENV_FRAMEWORK_PARAMS, raising=False)
    monkeypatch.delenv(contract.ENV_SETTINGS, raising=False)
    monkeypatch.setenv(contract.ENV_OUTPUT_DIR, str(tmp_path / "output"))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    script = tmp_path / "train.py"
    script.write_text(body + "\n")
    with pytest.raises(BaseException):  # noqa: B017 - the script's own exception propagates, whatever it is
        launcher.run(str(script), ["--lr", "0.1"])
    failure = tmp_path / "output" / "failure"
    if expected is None:
        assert not failure.exists()
    else:
        text = failure.read_text()
        assert text.splitlines()[0] == expected
        # The traceback starts at the user's script, not in the launcher or runpy.
        assert "runpy" not in text and str(script) in text


def test_torchrun_command_from_the_toolkit_environment():
    from sagemaker_tc.container.distributed import torchrun_command

    environ = {
        "SM_FRAMEWORK_PARAMS": json.dumps({"sagemaker_torch_distributed_enabled": True}),
        "SM_HOSTS": json.dumps(["algo-1", "algo-2"]),
        "SM_CURRENT_HOST": "algo-2",
        "SM_NUM_GPUS": "8",
    }
    command = torchrun_command("train.py", ["--lr", "0.1"], environ)
    assert command[1:3] == ["-m", "torch.distributed.run"]
    assert command[3:8] == [
        "--nnodes=2",
        "--node_rank=1",
        "--nproc_per_node=8",
        "--master_addr=algo-1",
        "--master_port=29500",
    ]
    assert command[8:] == ["-m", "sagemaker_tc.container.rank", "train.py", "--lr", "0.1"]
    params = {"sagemaker_torch_distributed_enabled": True, "sagemaker_tc_processes_per_host": 2}
    cpu_host = {**environ, "SM_FRAMEWORK_PARAMS": json.dumps(params), "SM_NUM_GPUS": "0"}
    assert "--nproc_per_node=2" in torchrun_command("train.py", [], cpu_host)
    assert torchrun_command("train.py", [], {**environ, "LOCAL_RANK": "0"}) is None  # already a rank
    assert torchrun_command("train.py", [], {**environ, "SM_FRAMEWORK_PARAMS": "{}"}) is None


def test_torchrun_exiting_zero_after_a_rank_failed_is_a_failure(tmp_path, monkeypatch):
    monkeypatch.setenv(contract.ENV_OUTPUT_DIR, str(tmp_path))
    failure = tmp_path / "failure"
    command = [sys.executable, "-c", f"open({str(failure)!r}, 'w').write('algo-1 rank 1: ValueError: x')"]
    with pytest.raises(SystemExit) as exited:
        launcher._run_ranks(command)
    assert exited.value.code == 1
    assert failure.read_text() == "algo-1 rank 1: ValueError: x"
