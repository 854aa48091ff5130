"""Build (and push) the sagemaker-tc training images listed in ``containers/matrix.json``.

Each image is an AWS training DLC (resolved for ``--region`` through sagemaker-core's image tables,
as the estimators do) plus ``sagemaker-tc[runtime]`` from this checkout. Needs the docker CLI and,
to pull the DLC base and to push, AWS credentials (boto3). See ``containers/README.md``.

Examples::

    python containers/build.py --list
    python containers/build.py --only pytorch-2.8 --dry-run
    python containers/build.py --only pytorch-2.8 --push --region us-west-2
"""

from __future__ import annotations

import argparse
import base64
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MATRIX = HERE / "matrix.json"
DEFAULT_REPOSITORY = "sagemaker-tc"
GPU_INSTANCE_TYPE = "ml.g5.2xlarge"  # picks the GPU flavour of the DLC tables
# What the Dockerfiles COPY: enough to pip install the package, plus the image's entry files.
CONTEXT_FILES = ("pyproject.toml", "README.md", "sagemaker_tc", "containers/entry")


@dataclass(frozen=True)
class ImagePlan:
    """One image to build.

    Attributes:
        name: the matrix entry's name, e.g. ``pytorch-2.8``.
        dockerfile: path of the Dockerfile relative to ``containers/``.
        base_image: the DLC the image is built FROM.
        tag: the image's full name and tag (``<registry>/<repository>:<tag>``).
    """

    name: str
    dockerfile: str
    base_image: str
    tag: str


def load_matrix(path: Path = MATRIX) -> list[dict]:
    """The image entries of the matrix file."""
    return json.loads(path.read_text(encoding="utf-8"))["images"]


def base_image(entry: dict, region: str) -> str:
    """The DLC an entry builds on, from sagemaker-core's tables (as the estimators pick images).

    Raises:
        sagemaker_tc.errors.UnsupportedImageError: the tables have no such DLC.
    """
    from sagemaker_tc.sdk.images import training_image

    return training_image(
        framework=entry["framework"],
        region=region,
        instance_type=GPU_INSTANCE_TYPE,
        py_version=entry["py_version"],
        pytorch_version=entry["pytorch_version"],
        transformers_version=entry.get("transformers_version"),
    )


def image_tag(entry: dict, *, version: str, registry: str, repository: str) -> str:
    """``<registry>/<repository>:<version>-<name>-gpu-<py_version>``, e.g. ``...:0.1.0-pytorch-2.8-gpu-py312``."""
    return f"{registry}/{repository}:{version}-{entry['name']}-gpu-{entry['py_version']}"


def plan(entries: list[dict], *, region: str, registry: str, repository: str, version: str) -> list[ImagePlan]:
    """The images to build for ``entries``."""
    return [
        ImagePlan(
            name=entry["name"],
            dockerfile=entry["dockerfile"],
            base_image=base_image(entry, region),
            tag=image_tag(entry, version=version, registry=registry, repository=repository),
        )
        for entry in entries
    ]


def stage_context(destination: Path, dockerfile: str) -> Path:
    """Copy what the image needs into ``destination`` (the docker build context); returns the
    Dockerfile's path there. Caches and build leftovers stay out."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in CONTEXT_FILES:
        source = REPO / name
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=ignore)
        else:
            shutil.copy2(source, target)
    staged = destination / "containers" / dockerfile
    staged.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(HERE / dockerfile, staged)
    return staged


def build_command(image: ImagePlan, context: Path, dockerfile: Path, version: str) -> list[str]:
    """The ``docker build`` command for ``image``."""
    return [
        "docker",
        "build",
        "--file",
        str(dockerfile),
        "--build-arg",
        f"BASE_IMAGE={image.base_image}",
        "--build-arg",
        f"SAGEMAKER_TC_VERSION={version}",
        "--tag",
        image.tag,
        str(context),
    ]


def _registry_of(image: str) -> str:
    return image.split("/", 1)[0]


def _docker_login(registry: str, region: str, *, dry_run: bool) -> None:
    """Log docker in to an ECR registry with a token from boto3 (no AWS CLI needed)."""
    print(f"$ docker login --username AWS --password-stdin {registry}  # token from ECR GetAuthorizationToken")
    if dry_run:
        return
    import boto3

    account = registry.split(".", 1)[0]
    token = boto3.client("ecr", region_name=region).get_authorization_token(registryIds=[account])
    user, _, password = base64.b64decode(token["authorizationData"][0]["authorizationToken"]).decode().partition(":")
    subprocess.run(
        ["docker", "login", "--username", user, "--password-stdin", registry], input=password, text=True, check=True
    )


def _ensure_repository(repository: str, region: str, *, dry_run: bool) -> None:
    print(f"# ensure ECR repository {repository} exists in {region}")
    if dry_run:
        return
    import boto3

    ecr = boto3.client("ecr", region_name=region)
    try:
        ecr.describe_repositories(repositoryNames=[repository])
    except ecr.exceptions.RepositoryNotFoundException:
        ecr.create_repository(repositoryName=repository)


def _run(command: list[str], *, dry_run: bool) -> None:
    print("$ " + shlex.join(command))
    if not dry_run:
        subprocess.run(command, check=True)


def _default_region() -> str:
    import boto3

    return boto3.session.Session().region_name or "us-east-1"


def _account(dry_run: bool) -> str:
    if dry_run:
        return "<account>"
    import boto3

    return boto3.client("sts").get_caller_identity()["Account"]


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--region", help="AWS region of the DLC base images and of the push (default: boto3's)")
    parser.add_argument("--only", action="append", metavar="NAME", help="build only this matrix entry (repeatable)")
    parser.add_argument("--repository", default=DEFAULT_REPOSITORY, help="ECR repository name (default: sagemaker-tc)")
    parser.add_argument("--account", help="AWS account of the ECR repository (default: the caller's, from STS)")
    parser.add_argument("--push", action="store_true", help="push to ECR after building")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing, call no AWS API")
    parser.add_argument("--list", action="store_true", help="print the matrix with base images and tags, then stop")
    options = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from sagemaker_tc import __version__

    region = options.region or _default_region()
    entries = load_matrix()
    if options.only:
        unknown = set(options.only) - {entry["name"] for entry in entries}
        if unknown:
            parser.error(f"not in {MATRIX.name}: {', '.join(sorted(unknown))}")
        entries = [entry for entry in entries if entry["name"] in options.only]
    account = options.account or _account(options.dry_run or options.list)
    registry = f"{account}.dkr.ecr.{region}.amazonaws.com"
    images = plan(entries, region=region, registry=registry, repository=options.repository, version=__version__)
    if options.list:
        for image in images:
            print(f"{image.name}\n  FROM {image.base_image}\n  tag  {image.tag}")
        return 0
    for base_registry in sorted({_registry_of(image.base_image) for image in images}):
        _docker_login(base_registry, region, dry_run=options.dry_run)
    if options.push:
        _ensure_repository(options.repository, region, dry_run=options.dry_run)
        _docker_login(registry, region, dry_run=options.dry_run)
    for image in images:
        with tempfile.TemporaryDirectory(prefix="sagemaker-tc-image-") as staging:
            context = Path(staging)
            dockerfile = stage_context(context, image.dockerfile)
            print(f"# {image.name}: context {context} ({', '.join(CONTEXT_FILES)})")
            _run(build_command(image, context, dockerfile, __version__), dry_run=options.dry_run)
        if options.push:
            _run(["docker", "push", image.tag], dry_run=options.dry_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
