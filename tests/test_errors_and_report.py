"""Errors where the docs say they are, and ``sagemaker-tc report`` on files that are not reports
(issue 15): one line each, exit code 2."""

from __future__ import annotations

import json
import os


# --- sagemaker-tc report on files that are not reports: one line each, exit code 2 --------------------
def _tar(path, members: dict[str, bytes]):
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _report_cases(tmp_path):
    good = json.dumps({"compiled": True, "steps": 3, "padding": "x" * 20000}).encode()
    full = _tar(tmp_path / "full.tar.gz", {"compiler/report.json": good, "echo.json": os.urandom(20000)})
    truncated = tmp_path / "output.tar.gz"
    truncated.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    (tmp_path / "model").mkdir()
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "garbage.bin").write_bytes(b"\x00\xff\xfe not json")
    (tmp_path / "wrong.json").write_text(json.dumps({"compiled": "yes", "steps": 1}))
    (tmp_path / "bench.json").write_text(json.dumps({"schema": 1, "results": []}))
    return {
        truncated: "is a damaged or truncated archive",
        "/dev/null": "is not a regular file",
        _tar(tmp_path / "model" / "model.tar.gz", {"model.safetensors": b"w"}): "is a job's model archive",
        _tar(tmp_path / "plain.tar.gz", {"echo.json": b"{}"}): "holds no compiler/report.json: the job ran without",
        tmp_path / "empty.json": "is empty",
        tmp_path / "garbage.bin": "is not a sagemaker-tc compiler report",
        tmp_path / "wrong.json": "is not a sagemaker-tc compiler report",
        tmp_path / "bench.json": "is not a sagemaker-tc compiler report",
        tmp_path / "missing.json": "does not exist",
        tmp_path / "model": "no report.json or output.tar.gz in",
        "s3://tc-bucket/jobs/j-1/output/output.tar.gz": "s3://tc-bucket/jobs/j-1/output/output.tar.gz is an S3 URI",
    }


def test_report_on_what_is_not_a_report_is_one_line_and_exit_code_2(tmp_path, capsys):
    from sagemaker_tc.cli import main

    for path, message in _report_cases(tmp_path).items():
        assert main(["report", str(path)]) == 2, path
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1, captured.err
        assert captured.err.startswith("sagemaker-tc report: ReportNotFoundError: ") and message in captured.err
    (tmp_path / "report.json").write_text(json.dumps({"compiled": False, "steps": 0}))
    assert main(["report", str(tmp_path / "report.json")]) == 0


def test_report_reads_every_folder_of_a_job_that_holds_it(tmp_path, capsys):
    """A local_process job's folder, its ``opt_ml`` (the job's /opt/ml), ``opt_ml/output`` and
    ``opt_ml/output/data``, and the job's ``output/`` with its archive: each prints the report."""
    from sagemaker_tc.cli import main

    job = tmp_path / "job-1"
    data = job / "opt_ml" / "output" / "data" / "compiler"
    data.mkdir(parents=True)
    (data / "report.json").write_text(json.dumps({"compiled": False, "steps": 7}))
    (job / "output").mkdir()
    archived = json.dumps({"compiled": True, "steps": 7}).encode()
    _tar(job / "output" / "output.tar.gz", {"compiler/report.json": archived})
    host = tmp_path / "job-2" / "algo-1"  # a host's folder of a local job on several hosts
    (host / "opt_ml" / "output" / "data" / "compiler").mkdir(parents=True)
    (host / "opt_ml" / "output" / "data" / "compiler" / "report.json").write_text((data / "report.json").read_text())
    folders = [
        job,
        job / "output",
        host,
        host / "opt_ml",
        host / "opt_ml" / "output",
        host / "opt_ml" / "output" / "data",
    ]
    for folder in folders:
        assert main(["report", str(folder)]) == 0, folder
        assert json.loads(capsys.readouterr().out)["steps"] == 7


# --- every error class is where the docs say: sagemaker_tc.errors (the bench's: sagemaker_tc_bench.errors) ---
def test_every_error_class_lives_in_sagemaker_tc_errors():
    import importlib
    import importlib.util
    import pkgutil
    import sys
    from pathlib import Path

    import sagemaker_tc
    import sagemaker_tc_bench
    from sagemaker_tc import errors
    from sagemaker_tc_bench import errors as bench_errors

    for package in (sagemaker_tc, sagemaker_tc_bench):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(info.name)
    found = {
        value
        for name, module in sys.modules.items()
        if name.startswith("sagemaker_tc")
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Exception)
        and not issubclass(value, Warning)
        and value.__module__.startswith("sagemaker_tc")
    }
    assert len(found) > 20
    bench_classes = {cls for cls in found if cls.__module__.startswith("sagemaker_tc_bench")}
    assert {cls.__name__ for cls in bench_classes} == {
        "BenchError",
        "ScriptLoadError",
        "ModelNotDeterministicError",
        "NumericalMismatchError",
        "VariantFailedError",
    }
    for cls in found:
        home = bench_errors if cls in bench_classes else errors
        assert getattr(home, cls.__name__, None) is cls, f"{cls.__module__}.{cls.__name__} is not in {home.__name__}"
        assert issubclass(cls, errors.SagemakerTCError), cls
    assert not any(hasattr(errors, cls.__name__) for cls in bench_classes), "the runtime's errors name no bench error"
    from sagemaker_tc.cli import ReportNotFoundError

    assert ReportNotFoundError is errors.ReportNotFoundError
    # The image's entry module, loaded from its file: nothing is left in sys.path or sys.modules.
    path = Path(__file__).resolve().parents[1] / "containers" / "entry" / "sagemaker_tc_image.py"
    spec = importlib.util.spec_from_file_location("sagemaker_tc_image", path)
    image_entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(image_entry)
    assert image_entry.ImageEntryError is errors.ImageEntryError
    assert "sagemaker_tc_image" not in sys.modules
