"""A local job writes only into a job folder it made (issue 43, fifth round): an earlier job's folder
of the same name (whatever its host count), a folder of the user's that the job name happens to
name (a channel's folder among them) are refused before anything is written; a job folder inside a
channel's folder runs, with a warning. Real ``local_process`` jobs of a tiny script, the compiler off."""

from __future__ import annotations

import pytest

from sagemaker_tc import PyTorch, TrainingCompilerConfig
from sagemaker_tc.errors import EstimatorArgumentError

SCRIPT = "import os, pathlib\npathlib.Path(os.environ['SM_MODEL_DIR'], 'w.txt').write_text('trained')\n"


def estimator(tmp_path, output_path, **arguments) -> PyTorch:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text(SCRIPT)
    return PyTorch(
        "train.py",
        source_dir=str(code),
        instance_type="local_process",
        output_path=str(output_path),
        compiler_config=TrainingCompilerConfig(enabled=False),
        **arguments,
    )


def tree(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_an_earlier_jobs_folder_is_refused_whatever_its_host_count_and_its_model_kept(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    first = estimator(tmp_path, tmp_path / "out")
    first.fit({"train": str(data)}, job_name="same-name", logs=False)
    kept = tree(tmp_path / "out" / "same-name")
    assert "output/model.tar.gz" in kept

    second = estimator(
        tmp_path, tmp_path / "out", instance_count=2, distribution={"torch_distributed": {"enabled": True}}
    )
    with pytest.raises(EstimatorArgumentError, match=r"same-name already exists and holds .*job names must be unique"):
        second.fit({"train": str(data)}, job_name="same-name", logs=False)
    assert tree(tmp_path / "out" / "same-name") == kept


def test_a_job_name_that_names_a_folder_of_yours_is_refused_and_the_folder_left_alone(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    job = estimator(tmp_path, tmp_path)
    before = tree(tmp_path / "code")
    with pytest.raises(EstimatorArgumentError, match=r"code already exists and holds train\.py: job names"):
        job.fit({"train": str(data)}, job_name="code", logs=False)
    assert tree(tmp_path / "code") == before and sorted(p.name for p in (tmp_path / "code").iterdir()) == ["train.py"]


def test_a_job_folder_that_is_a_channels_folder_is_refused_and_one_inside_runs_with_a_warning(tmp_path):
    from sagemaker_tc.errors import JobSettingWarning

    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.csv").write_text("1,2\n")
    with pytest.raises(EstimatorArgumentError, match=r"data already exists and holds rows\.csv: job names"):
        estimator(tmp_path, tmp_path).fit({"train": str(data)}, job_name="data", logs=False)
    assert tree(data) == {"rows.csv": b"1,2\n"} and sorted(p.name for p in data.iterdir()) == ["rows.csv"]

    inside = estimator(tmp_path, data / "out")  # SageMaker takes an output prefix under an input prefix
    with pytest.warns(JobSettingWarning, match=r"lies inside the 'train' channel's folder .* become part of that"):
        inside.fit({"train": str(data)}, job_name="job-1", logs=False)
    assert inside.model_data.startswith(f"file://{data}/out/job-1/")
