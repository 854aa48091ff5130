"""Bad inputs, third round, recounted a second time (issue 33): what a new user's recount of 458
inputs still found silently accepted or accepted wrongly, each refused or warned about before any
job starts."""

from __future__ import annotations

import pytest
from test_bad_input_round3c import CLOUD

from sagemaker_tc import EstimatorArgumentError, HyperparameterError, TrainingCompilerConfig
from sagemaker_tc.errors import JobSettingWarning


def test_an_output_path_file_uri_naming_a_host_is_refused(make, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EstimatorArgumentError, match=r"output_path='file://relhost/x' names the host 'relhost'"):
        make(output_path="file://relhost/x")
    assert not (tmp_path / "relhost").exists()


@pytest.mark.parametrize("uri", [" ck", "ck ", "file:///tmp/ck "])
def test_a_local_checkpoint_location_with_surrounding_whitespace_is_refused(make, tmp_path, monkeypatch, uri):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EstimatorArgumentError, match=r"starts or ends with whitespace"):
        make(checkpoint_s3_uri=uri)


@pytest.mark.parametrize("value", ["a\x00b", ["x", "y\x00"]])
def test_a_hyperparameter_value_with_a_nul_byte_is_refused(make, value):
    with pytest.raises(HyperparameterError, match=r"hyperparameter 'note' holds a NUL byte"):
        make(hyperparameters={"note": value})


def test_a_tensorboard_output_path_that_is_not_an_s3_uri_is_refused(make):
    with pytest.raises(EstimatorArgumentError, match=r"tensorboard_output_config's S3OutputPath='x'"):
        make(tensorboard_output_config={"S3OutputPath": "x"}, **CLOUD)
    make(tensorboard_output_config={"S3OutputPath": "s3://tc-bucket/tb"}, **CLOUD)


def test_an_instance_size_the_api_does_not_list_is_warned_about(make):
    with pytest.warns(JobSettingWarning, match=r"instance_type='ml.g5.huge' is not among CreateTrainingJob's"):
        make(**{**CLOUD, "instance_type": "ml.g5.huge"})


def test_a_local_namespace_setting_that_is_neither_on_nor_off_is_refused_before_the_job(make, monkeypatch, tmp_path):
    monkeypatch.setenv("SM_TC_LOCAL_NAMESPACE", "nonsense")
    estimator = make()
    with pytest.raises(EstimatorArgumentError, match=r"SM_TC_LOCAL_NAMESPACE='nonsense' is neither on nor off"):
        estimator.fit()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("where", ["is", "lies inside", "holds"])
def test_a_local_cache_overlapping_a_channel_is_refused_at_fit(make, tmp_path, where):
    data = tmp_path / "data" / "train"
    data.mkdir(parents=True)
    (data / "rows.tsv").write_text("sentence\tlabel\n")
    cache = {"is": data, "lies inside": data / "cache", "holds": tmp_path / "data"}[where]
    estimator = make(compiler_config=TrainingCompilerConfig(cache=str(cache)))
    with pytest.raises(EstimatorArgumentError, match=rf"compiler_config.cache=.* {where} the 'train' channel's folder"):
        estimator.fit({"train": str(data)})
    assert sorted(path.name for path in data.rglob("*")) == ["rows.tsv"]
