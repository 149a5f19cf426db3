"""Versioned records: the one envelope every contract uses on the wire.

Data-plane records (frames, requests, replies, rows) are msgpack lists ``[version, kind, *fields]``;
control-plane documents (plans, stats, app reports) are JSON objects ``{"v": version, "kind": …}``,
readable with any Kafka tool. An unknown version, another kind or a malformed record raises
:class:`~vidnexus.errors.CodecError`, which consumers turn into a dead-letter record.

Example:
    >>> unpack(pack("req", 1, ["r1", 2.5]), "req", 1, 2)
    ['r1', 2.5]
    >>> from_json(to_json("plan", 1, {"epoch": 3}), "plan", 1)["epoch"]
    3
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import msgpack

from vidnexus.errors import CodecError

__all__ = ["pack", "pack_blob", "unpack", "unpack_versions", "to_json", "from_json"]


def pack(kind: str, version: int, fields: Sequence[Any]) -> bytes:
    """``[version, kind, *fields]`` as msgpack."""
    raw: bytes = msgpack.packb([version, kind, *fields], use_bin_type=True)
    return raw


def pack_blob(kind: str, version: int, head: Sequence[Any], blob: Sequence[Any], tail: Sequence[Any]) -> bytes:
    """``pack(kind, version, [*head, b"".join(blob), *tail])``, with the parts of ``blob`` (bytes or
    C-contiguous buffers such as a decoder's planes) copied once, straight into the record; msgpack
    would copy a large blob twice, and the parts would first have to be joined.

    Example:
        >>> parts = [b"ab", memoryview(b"cd"), bytearray(300)]
        >>> pack_blob("frame", 2, ["cam", 7], parts, [{}]) == pack("frame", 2, ["cam", 7, b"".join(parts), {}])
        True
    """
    packer = msgpack.Packer(use_bin_type=True)
    views = [b if isinstance(b, bytes) else memoryview(b).cast("B") for b in blob]
    n = sum(len(v) for v in views)
    if n < 1 << 8:
        bin_header = b"\xc4" + n.to_bytes(1, "big")
    elif n < 1 << 16:
        bin_header = b"\xc5" + n.to_bytes(2, "big")
    else:
        bin_header = b"\xc6" + n.to_bytes(4, "big")
    return b"".join([packer.pack_array_header(3 + len(head) + len(tail)),
                     *(packer.pack(x) for x in (version, kind, *head)), bin_header, *views,
                     *(packer.pack(x) for x in tail)])


def unpack(raw: bytes, kind: str, version: int, n_fields: int) -> list[Any]:
    """The fields of a :func:`pack` record of ``kind``.

    Raises:
        CodecError: not msgpack, another kind, another version, or not ``n_fields`` fields.
    """
    return unpack_versions(raw, kind, {version: n_fields})[1]


def unpack_versions(raw: bytes, kind: str, fields: dict[int, int], *, use_list: bool = True) -> tuple[int, list[Any]]:
    """(version, fields) of a :func:`pack` record of ``kind`` in any of the versions this build
    reads, ``fields`` mapping each version to its number of fields.

    Raises:
        CodecError: not msgpack, another kind, a version not in ``fields``, or a wrong field count.
    """
    try:
        v = msgpack.unpackb(raw, raw=False, use_list=use_list)
    except Exception as e:
        raise CodecError(f"malformed {kind} message: {e}") from None
    if not isinstance(v, (list, tuple)) or len(v) < 2:
        raise CodecError(f"malformed {kind} message: not a versioned record")
    if not isinstance(v[0], int) or v[0] not in fields:
        reads = " and ".join(str(k) for k in sorted(fields, reverse=True))
        raise CodecError(f"unknown {kind} message version {v[0]!r} (this build reads {reads})")
    n_fields = fields[v[0]]
    if v[1] != kind or len(v) != n_fields + 2:
        raise CodecError(f"malformed {kind} message: kind {v[1]!r} with {len(v) - 2} fields, expected {n_fields}")
    return v[0], list(v[2:])


def to_json(kind: str, version: int, doc: dict[str, Any]) -> bytes:
    """``{"v": version, "kind": kind, **doc}`` as UTF-8 JSON."""
    return json.dumps({"v": version, "kind": kind, **doc}, separators=(",", ":")).encode()


def from_json(raw: bytes, kind: str, version: int) -> dict[str, Any]:
    """The document of a :func:`to_json` record of ``kind`` (``v`` and ``kind`` removed).

    Raises:
        CodecError: not JSON, not an object, another kind or version.
    """
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise CodecError(f"malformed {kind} document: {e}") from None
    if not isinstance(doc, dict):
        raise CodecError(f"malformed {kind} document: not an object")
    if doc.get("kind") != kind:
        raise CodecError(f"malformed {kind} document: kind {doc.get('kind')!r}")
    if doc.get("v") != version:
        raise CodecError(f"unknown {kind} document version {doc.get('v')!r} (this build reads {version})")
    return {k: v for k, v in doc.items() if k not in ("v", "kind")}
