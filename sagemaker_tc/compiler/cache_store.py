"""The compile cache's byte store: bytes at relative names under a local folder or an S3 prefix.

What the bytes mean (environment keys, ``meta.json``, archives) is :mod:`sagemaker_tc.compiler.cache`'s;
this module only reads, writes, deletes and lists them. A local folder's files are read and written
only inside it: a name whose path passes through a link, or resolves outside the folder, is never
written (:class:`~sagemaker_tc.errors.CacheLocationError`) nor read. An S3 location uses the default
boto3 credentials and region, and moves its bytes with boto3's managed transfer
(``upload_fileobj`` / ``download_fileobj``): above :data:`PART_BYTES` in parts of that size, sent and
fetched in parallel, each retried, streamed from and to a file without a copy in memory.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any, BinaryIO

from sagemaker_tc.errors import CacheLocationError
from sagemaker_tc.paths import mark_own_folder, write_atomic

PART_BYTES = 8 << 20
"""S3 transfers above this many bytes go in parts of this size (boto3's default; S3's smallest part
is 5 MiB): a 400 MB archive is 48 parts, each retried alone."""
_CHUNK = 1 << 20


def _transfer_config() -> Any:
    """boto3's ``TransferConfig`` for the cache: :data:`PART_BYTES` parts, 4 at a time, a part's
    download tried up to 5 times (each request also retried by botocore's retry mode)."""
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(
        multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES, max_concurrency=4, num_download_attempts=5
    )


class CacheStore:
    """Bytes at relative names under a local folder or an S3 prefix."""

    def __init__(self, uri: str) -> None:
        self.uri = uri.rstrip("/")
        self.s3 = uri.startswith("s3://")
        if self.s3:
            import boto3

            bucket, _, prefix = self.uri[len("s3://") :].partition("/")
            self.bucket, self.prefix = bucket, prefix
            self.client = boto3.client("s3")
        else:
            self.root = Path(uri).expanduser()

    def _s3_key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def _local(self, name: str) -> Path | None:
        """``root / name`` when it stays in the cache folder: no part of it a link (an entry folder
        linked elsewhere would have the cache write there), nothing resolving outside; else None."""
        path = self.root / name
        if any(part.is_symlink() for part in (path, *path.parents) if part != self.root and self.root in part.parents):
            return None
        root = self.root.resolve()
        resolved = path.resolve()
        return path if resolved == root or root in resolved.parents else None

    def read(self, name: str) -> bytes | None:
        """The bytes at ``name`` (a small file: held in memory); None when nothing is there (or,
        locally, its path leaves the folder)."""
        buffer = io.BytesIO()
        return buffer.getvalue() if self.download(name, buffer) else None

    def download(self, name: str, into: BinaryIO) -> bool:
        """Stream the bytes at ``name`` into ``into`` (a seekable binary file, written from its
        position); False, writing nothing, when nothing is there (or, locally, its path leaves the
        folder). Raises what boto3 raises for anything else (``ClientError``, ``BotoCoreError``)."""
        if self.s3:
            from botocore.exceptions import ClientError

            try:
                self.client.download_fileobj(self.bucket, self._s3_key(name), into, Config=_transfer_config())
            except ClientError as error:  # a missing key is a 404 on the transfer's HeadObject
                if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey"):
                    return False
                raise
            return True
        path = self._local(name)
        if path is None or not path.is_file():
            return False
        with path.open("rb") as source:
            shutil.copyfileobj(source, into, _CHUNK)
        return True

    def write(self, name: str, data: bytes) -> None:
        """Write ``data`` at ``name`` atomically (:meth:`upload`)."""
        self.upload(name, io.BytesIO(data))

    def upload(self, name: str, source: BinaryIO) -> None:
        """Stream ``source`` (a binary file, read from its position to its end) to ``name``
        atomically: an S3 object appears whole when its upload (multipart or not) completes; a local
        file goes through a temporary file and ``os.replace``.

        Raises:
            CacheLocationError: a local ``name`` whose path passes through a link or leaves the folder.
        """
        if self.s3:
            self.client.upload_fileobj(source, self.bucket, self._s3_key(name), Config=_transfer_config())
            return
        path = self._local(name)
        if path is None:
            raise CacheLocationError(f"{name} is not a file of the cache folder {self.root} (a link leads elsewhere)")
        mark_own_folder(self.root, "a local compile cache")  # never shipped as a later job's code
        write_atomic(path, source)

    def delete(self, name: str) -> None:
        """Remove ``name`` (nothing there is no error; a local path leaving the folder is left alone)."""
        if self.s3:
            self.client.delete_object(Bucket=self.bucket, Key=self._s3_key(name))
        elif (path := self._local(name)) is not None:
            path.unlink(missing_ok=True)

    def keys(self, marker: str) -> list[str]:
        """The first path parts of the names ending in ``/<marker>`` (locally: the folders directly
        under the location holding a file ``marker``, a link left out), sorted."""
        if self.s3:
            prefix = f"{self.prefix}/" if self.prefix else ""
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            names = [item["Key"][len(prefix) :] for page in pages for item in page.get("Contents", [])]
            return sorted({n.split("/")[0] for n in names if n.endswith(f"/{marker}")})
        if not self.root.is_dir():
            return []
        return sorted(p.parent.name for p in self.root.glob(f"*/{marker}") if not p.parent.is_symlink())
