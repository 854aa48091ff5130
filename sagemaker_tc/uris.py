"""``s3://bucket/prefix`` URIs, checked the same way wherever the user gives one.

Imports only the standard library: the config (:mod:`sagemaker_tc.config`) and the SDK both use it.
"""

from __future__ import annotations

import re

S3_SCHEME = "s3://"
# Amazon S3 bucket naming rules (general purpose buckets): 3-63 characters of lowercase letters,
# digits, '.' and '-', starting and ending with a letter or digit, no '..', not an IPv4 address.
# \Z, never $ (which also matches before a final newline: "bucket\n" would pass).
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")
_IPV4_RE = re.compile(r"^\d+\.\d+\.\d+\.\d+$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def has_control_character(value: str) -> bool:
    """True when ``value`` holds a control character (a newline, a tab, NUL, DEL...): no name, path or
    URI a job takes has one, and a trailing newline is easy to miss in an error message."""
    return bool(_CONTROL_RE.search(value))


def looks_like_s3(value: str) -> bool:
    """True for anything meant as an S3 URI, well formed or not (``s3://``, ``s3:/``, ``S3://``)."""
    return value[:3].lower() == "s3:"


def s3_uri_problem(uri: str) -> str | None:
    """What is wrong with ``uri`` as an ``s3://bucket[/prefix]`` URI, or None when it is well formed."""
    if not uri.startswith(S3_SCHEME):
        return "it must start with 's3://' (lowercase, two slashes)"
    if has_control_character(uri):
        return "it holds a control character (a newline, a tab...), which no S3 key a job reads or writes should have"
    bucket = uri.removeprefix(S3_SCHEME).split("/", 1)[0]
    if not _BUCKET_RE.match(bucket) or ".." in bucket or _IPV4_RE.match(bucket):
        return (
            f"the bucket name {bucket!r} breaks S3's naming rules (3-63 lowercase letters, digits, '.' and '-', "
            "starting and ending with a letter or digit)"
        )
    return None
