"""The compile cache's byte store: bytes at relative names under a local folder or an S3 prefix.

What the bytes mean (environment keys, ``meta.json``, archives) is :mod:`sagemaker_tc.compiler.cache`'s;
this module only reads, writes, deletes and lists them. A local folder's files are read and written
only inside it: a name whose path passes through a link, or resolves outside the folder, is never
written (:class:`~sagemaker_tc.errors.CacheLocationError`) nor read. An S3 location uses the default
boto3 credentials and region.
"""

from __future__ import annotations

from pathlib import Path

from sagemaker_tc.errors import CacheLocationError
from sagemaker_tc.paths import write_atomic


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
        """The bytes at ``name``; None when nothing is there (or, locally, its path leaves the folder)."""
        if self.s3:
            try:
                return self.client.get_object(Bucket=self.bucket, Key=self._s3_key(name))["Body"].read()
            except self.client.exceptions.NoSuchKey:
                return None
        path = self._local(name)
        return path.read_bytes() if path is not None and path.is_file() else None

    def write(self, name: str, data: bytes) -> None:
        """Write ``data`` at ``name`` atomically (S3 puts are atomic; local files go through a
        temporary file and ``os.replace``)."""
        if self.s3:
            self.client.put_object(Bucket=self.bucket, Key=self._s3_key(name), Body=data)
            return
        path = self._local(name)
        if path is None:
            raise CacheLocationError(f"{name} is not a file of the cache folder {self.root} (a link leads elsewhere)")
        write_atomic(path, data)

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
