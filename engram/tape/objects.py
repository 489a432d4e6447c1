"""Content-addressed blobs under `.engram/objects/<ab>/<rest>`: large tool outputs and texts.

A tape refers to a blob as `{"$obj": <sha256 of the UTF-8 text>, "len": <characters>}`.
Blobs are zstd-compressed, written atomically, and deduplicated by their address.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import zstandard

from engram.errors import CorruptTape
from engram.fsutil import atomic_write, read_in_store

OBJ_KEY = "$obj"


def object_path(objects_dir: Path, digest: str) -> Path:
    return objects_dir / digest[:2] / digest[2:]


def put_text(objects_dir: Path, text: str) -> dict[str, Any]:
    """Store `text` (if not already stored) and return the reference that replaces it."""
    import hashlib  # noqa: PLC0415 - OpenSSL's start-up (~3.5 ms) only where hashes are taken

    data = text.encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(data).hexdigest()
    path = object_path(objects_dir, digest)
    if not path.exists():
        atomic_write(path, zstandard.ZstdCompressor(level=3).compress(data))
    return {OBJ_KEY: digest, "len": len(text)}


def get_text(objects_dir: Path, ref: dict[str, Any]) -> str:
    import hashlib  # noqa: PLC0415 - OpenSSL's start-up (~3.5 ms) only where hashes are taken

    digest = ref[OBJ_KEY]
    path = object_path(objects_dir, digest)
    try:
        if os.path.islink(path.parent):  # (read_in_store refuses a linked file, not a linked directory)
            raise OSError(f"{path.parent} is a symbolic link out of the store")
        data = zstandard.ZstdDecompressor().decompress(read_in_store(path))
    except FileNotFoundError as exc:
        raise CorruptTape(f"object {digest} is missing from {objects_dir}; run `engram reindex` or re-ingest") from exc
    except (OSError, zstandard.ZstdError) as exc:  # a link (ELOOP), a directory, bytes that are not zstd
        raise CorruptTape(f"object {path} cannot be read ({exc}); remove it and ingest its session again") from exc
    if hashlib.sha256(data).hexdigest() != digest:
        raise CorruptTape(f"object {digest} does not match its hash")
    return data.decode("utf-8", "surrogatepass")


def is_ref(value: Any) -> bool:
    return isinstance(value, dict) and OBJ_KEY in value


def externalize(value: Any, objects_dir: Path, threshold: int) -> Any:
    """Replace strings longer than `threshold` with object references, recursively."""
    if isinstance(value, str):
        return put_text(objects_dir, value) if len(value) > threshold else value
    if isinstance(value, dict):
        return {k: externalize(v, objects_dir, threshold) for k, v in value.items()}
    if isinstance(value, list):
        return [externalize(v, objects_dir, threshold) for v in value]
    return value


def resolve(value: Any, objects_dir: Path) -> Any:
    """The inverse of `externalize`: object references replaced by their text."""
    if isinstance(value, dict):
        if OBJ_KEY in value:
            return get_text(objects_dir, value)
        return {k: resolve(v, objects_dir) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, objects_dir) for v in value]
    return value


def referenced_objects(value: Any, out: set[str]) -> None:
    if isinstance(value, dict):
        if OBJ_KEY in value:
            out.add(value[OBJ_KEY])
            return
        for v in value.values():
            referenced_objects(v, out)
    elif isinstance(value, list):
        for v in value:
            referenced_objects(v, out)
