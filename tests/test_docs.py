"""docs/: the site builds with ``mkdocs build --strict``, every Python code block runs (or compiles,
where it needs AWS or SDK v2), the generated reference matches the code and data, and the
troubleshooting page covers every error class and every message the package raises."""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

import sagemaker_tc
import sagemaker_tc_bench
from sagemaker_tc.errors import SagemakerTCError

DOCS = REPO / "docs"
PAGES = sorted(DOCS.glob("*.md"))
TROUBLESHOOTING = DOCS / "troubleshooting.md"
FENCE = re.compile(
    r"(?:<!-- docs-test: (?P<mode>[a-z-]+): (?P<why>[^>]+?) -->\n)?```(?P<lang>\w*)\n(?P<code>.*?)```", re.S
)
# Built-in exceptions whose raise sites are internal invariants, not messages for users.
INTERNAL_RAISES = {"AttributeError", "NotImplementedError", "AssertionError"}


def load_generator():
    """docs/hooks/generate.py, loaded from its file: nothing is left in sys.path or sys.modules."""
    spec = importlib.util.spec_from_file_location("docs_hook_generate", DOCS / "hooks" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_site_builds_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    config = (tmp_path / "site" / "configuration" / "index.html").read_text()
    supported = (tmp_path / "site" / "supported" / "index.html").read_text()
    assert "baseline_steps" in config and "p6e-gb200" in supported and "pytorch-training:2.8-gpu-py312" in supported
    for page in (tmp_path / "site").rglob("*.html"):
        assert "generated:" not in page.read_text(), f"{page}: a generated section was not filled"
    assert not (tmp_path / "site" / "hooks").exists()


def code_blocks(page: Path) -> list[tuple[int, str, str | None, str]]:
    """``(line, language, test mode, code)`` for each fenced block of ``page``."""
    text = page.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start("code")), match.group("lang"), match.group("mode"), match.group("code"))
        for match in FENCE.finditer(text)
    ]


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A working folder shaped like a user's project: ``train.py`` and ``code/train.py``."""
    (tmp_path / "code").mkdir()
    for target in (tmp_path / "train.py", tmp_path / "code" / "train.py"):
        shutil.copy(REPO / "examples" / "sst2" / "code" / "train.py", target)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return tmp_path


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_python_code_blocks_run(page, sandbox, capsys):
    """Each page's ``python`` blocks run in order, in one namespace. A block marked
    ``<!-- docs-test: compile-only: REASON -->`` (it needs AWS, SDK v2 or a long job) is compiled only."""
    namespace: dict = {"__name__": "__docs__"}
    for line, language, mode, code in code_blocks(page):
        if language != "python":
            assert mode is None, f"{page.name}:{line}: docs-test markers apply to python blocks"
            continue
        compiled = compile(code, f"{page.name}:{line}", "exec")
        if mode == "compile-only":
            continue
        assert mode is None, f"{page.name}:{line}: unknown docs-test mode {mode!r}"
        exec(compiled, namespace)


def test_every_python_block_that_is_skipped_says_why():
    for page in PAGES:
        for line, language, _mode, _ in code_blocks(page):
            assert language, f"{page.name}:{line}: give every code block a language (python, bash, text)"
    skipped = [(page.name, line) for page in PAGES for line, _, mode, _ in code_blocks(page) if mode]
    assert len(skipped) <= 4, f"most examples should run; compile-only blocks: {skipped}"


def test_config_reference_renders_types_bounds_and_python_defaults():
    """The configuration page as built: the marker is replaced by the table, each default reads
    back in Python as the pydantic default, and types and bounds are written as a reader writes them."""
    from sagemaker_tc.config import TrainingCompilerConfig

    source = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert source.count("<!-- generated: config-reference -->") == 1
    page = load_generator().render(source)
    assert "<!-- generated:" not in page
    rows = {line.split(" | ")[0].strip("| `"): line for line in page.splitlines() if line.startswith("| `")}
    for name, field in TrainingCompilerConfig.model_fields.items():
        stated = ast.literal_eval(rows[name].split(" | ")[2].strip("`"))
        assert (stated, type(stated)) == (field.default, type(field.default)), name
    expected = [
        "| `enabled` | `bool` | `True` | ",
        '| `backend` | `"inductor" \\| "eager" \\| "xla"` | `"inductor"` | ',
        '| `buckets` | `list[int] \\| "auto" \\| None` | `"auto"` | ',
        "| `baseline_steps` | `int (≥ 0, ≤ 100)` | `3` | ",
        "| `memory_budget_gib` | `float \\| None (> 0)` | `None` | ",
        "| `expected_steps` | `int \\| None (≥ 1, ≤ 1000000000)` | `None` | ",
    ]
    for row in expected:
        name = row.split(" | ")[0].strip("| `")
        assert rows[name].startswith(row), rows[name]


def test_supported_matrix_comes_from_the_data():
    from sagemaker_tc.sdk.instances import instance_families

    generator = load_generator()
    page = (DOCS / "supported.md").read_text()
    for name in ("instance-families", "dlc-images", "tested-versions", "container-matrix"):
        assert f"<!-- generated: {name} -->" in page
    families = generator.instance_families()
    for kind, names in instance_families().items():
        assert all(f"`{name}`" in families for name in names), kind
    images = generator.dlc_images()
    matrix = json.loads((REPO / "containers" / "matrix.json").read_text())["images"]
    for entry in matrix:
        assert f"| `{entry['pytorch_version']}` |" in images
        if entry.get("transformers_version"):
            assert f"| `{entry['transformers_version']}` | `{entry['pytorch_version']}` |" in images
        assert f"`{entry['name']}`" in generator.container_matrix()
    assert "`1.13`" not in images  # below the runtime's PyTorch minimum
    from sagemaker_tc.sdk.support import support_matrix

    tested = generator.tested_versions()
    assert "| torch |" in tested and "| status |" in tested
    for stack in support_matrix().stacks:
        assert f"`{stack.name}`" in tested and f"| {stack.torch} |" in tested and f"| {stack.status} |" in tested
    assert f"The floor is PyTorch {support_matrix().floor.torch}: " in tested


def test_known_wrong_plans_come_from_the_table():
    from sagemaker_tc.compiler.known_wrong import KNOWN_WRONG

    assert "<!-- generated: known-wrong -->" in (DOCS / "supported.md").read_text()
    table = load_generator().known_wrong_plans()
    for entry in KNOWN_WRONG:
        assert f"| `{entry.architecture}` |" in table and f"`{entry.repro}`" in table


# The runtime and the workstation's bench commands: both raise errors the page documents.
PACKAGES = (sagemaker_tc, sagemaker_tc_bench)


def package_modules() -> list[str]:
    """Every module of the sagemaker_tc and sagemaker_tc_bench packages, imported."""
    names = []
    for package in PACKAGES:
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(info.name)
            names.append(info.name)
    return names


def error_and_warning_classes() -> set[type]:
    """Every error class (a ``SagemakerTCError``) and warning class defined in sagemaker_tc and its bench."""
    found = set()
    for name in package_modules():
        for value in vars(sys.modules[name]).values():
            if (
                isinstance(value, type)
                and value.__module__.startswith("sagemaker_tc")
                and (issubclass(value, SagemakerTCError) or issubclass(value, Warning))
            ):
                found.add(value)
    return found


def test_troubleshooting_documents_every_error_and_warning_class():
    page = TROUBLESHOOTING.read_text(encoding="utf-8")
    classes = error_and_warning_classes()
    assert {cls.__name__ for cls in classes} >= {"ConfigError", "CompilerFallbackWarning", "ReportNotFoundError"}
    missing = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in classes if f"`{cls.__name__}`" not in page)
    assert not missing, f"document these in docs/troubleshooting.md (cause and fix): {missing}"


def _message_parts(node: ast.AST) -> list[str] | None:
    """The literal text of a message argument, split where values are interpolated."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.split(r"%[sdrf]|%\.\d+[fg]", node.value)
    if isinstance(node, ast.JoinedStr):
        parts, current = [], ""
        for value in node.values:
            if isinstance(value, ast.Constant):
                current += value.value
            else:
                parts.append(current)
                current = ""
        return [*parts, current]
    return None


def raised_messages() -> list[tuple[str, str]]:
    """``(where, fragment)`` for every message sagemaker_tc raises, warns or logs as a warning or error:
    the longest literal stretch of the message (what a reader can search the page for)."""
    builtin_names = {name for name in dir(builtins) if isinstance(getattr(builtins, name), type)}
    repo_root = Path(sagemaker_tc.__file__).parent.parent
    paths = sorted(path for package in PACKAGES for path in Path(package.__file__).parent.rglob("*.py"))
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            call = None
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                name = getattr(node.exc.func, "id", getattr(node.exc.func, "attr", ""))
                if name in INTERNAL_RAISES or (name in builtin_names and not name.endswith("Error")):
                    continue
                call = node.exc
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "warn",
                "warning",
                "error",
                "warn_user",  # sagemaker_tc.warn.warn_user: a warnings.warn that points at the user's line
            ):
                call = node
            if call is None or not call.args:
                continue
            parts = _message_parts(call.args[0])
            if not parts:
                continue
            fragment = max((" ".join(part.split()) for part in parts), key=len)
            if len(fragment) >= 12:
                found.append((f"{path.relative_to(repo_root)}:{node.lineno}", fragment))
    return found


def test_troubleshooting_quotes_every_message():
    page = " ".join(TROUBLESHOOTING.read_text(encoding="utf-8").split())
    messages = raised_messages()
    assert len(messages) > 60
    missing = [f"{where}: {fragment!r}" for where, fragment in messages if fragment not in page]
    assert not missing, "quote these messages in docs/troubleshooting.md, with cause and fix:\n" + "\n".join(missing)


def test_migration_page_covers_what_smtc_users_bring():
    page = (DOCS / "migration.md").read_text(encoding="utf-8")
    for topic in (
        "from sagemaker.huggingface import HuggingFace, TrainingCompilerConfig",
        "from sagemaker_tc import HuggingFace, TrainingCompilerConfig",
        "TrainingCompilerConfig(enabled=False)",
        "TrainingCompilerConfig(debug=True)",
        "sagemaker_training_compiler_enabled",
        "pytorchxla",
        "image_uri=",
        'instance_type="local"',
        "xm.mark_step()",
        'padding="max_length"',
        "GPU_NUM_DEVICES",
        "_mp_fn",
        "disable_profiler",
        "Re-tune batch size and learning rate",
        "Found configuration for Training Compiler",
    ):
        assert topic in page, topic


# SDK v2's (2.2xx) estimator members read after fit(): EstimatorBase's and Framework's methods and
# properties, its _TrainingJob's, and the arguments it kept as attributes.
SDK_V2_AFTER_FIT = (
    "latest_training_job",
    "wait(",
    "logs()",
    "model_data",
    "training_job_analytics",
    "latest_job_debugger_artifacts_path",
    "latest_job_tensorboard_artifacts_path",
    "latest_job_profiler_artifacts_path",
    "rule_job_summary",
    "describe()",
    ".stop()",
    "sagemaker_session",
    "update_profiler",
    "enable_default_profiling",
    "disable_profiling",
    "enable_network_isolation()",
    "get_vpc_config",
    "transformer(",
    "prepare_workflow_for_training",
    "hyperparameters()",
    "set_hyperparameters",
    "training_image_uri",
    "uploaded_code",
    "_current_job_name",
    "jobs",
    "get_remote_debug_config",
    "enable_remote_debug",
    "disable_remote_debug",
    "get_app_url",
    "get_session_chaining_config",
    "register(",
    "compile_model(",
    "deploy(",
    "create_model(",
    "attach(",
    "start_new",
    "output_path",
    "metric_definitions",
    "code_uri",
    "training_image_config",
)
# SDK v2 arguments that took a pipeline variable, and TrainingStep's own.
SDK_V2_PIPELINE = (
    "instance_type",
    "instance_count",
    "max_run",
    "environment",
    "hyperparameters",
    "output_path",
    "TrainingInput(s3_data=",
    "role",
    "volume_size",
    "volume_kms_key",
    "output_kms_key",
    "max_wait",
    "max_retry_attempts",
    "use_spot_instances",
    "subnets",
    "checkpoint_s3_uri",
    "model_uri",
    "image_uri",
    "tags",
    "entry_point",
    "source_dir",
    "TrainingCompilerConfig(enabled=",
    "display_name",
    "cache_config",
    "depends_on",
    "retry_policies",
    "estimator=",
)


def _section(page: str, heading: str) -> str:
    start = page.index(heading)
    return page[start : page.index("\n#", start + len(heading))]


def test_migration_after_fit_and_pipelines_list_every_sdk_v2_member_and_argument():
    from sagemaker_tc.sdk.after_fit import NOT_OFFERED
    from sagemaker_tc.sdk.job_settings import SETTING_NAMES

    page = (DOCS / "migration.md").read_text(encoding="utf-8")
    after_fit = _section(page, "### After `fit()`")
    wanted = {*SDK_V2_AFTER_FIT, *NOT_OFFERED, *(f".{name}" for name in SETTING_NAMES if name != "code_location")}
    assert not sorted(name for name in wanted if name not in after_fit)
    pipelines = _section(page, "### Pipelines")
    assert not [name for name in SDK_V2_PIPELINE if name not in pipelines]
