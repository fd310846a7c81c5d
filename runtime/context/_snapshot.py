"""Context Snapshot: per-key admitted values, stored as one JSON document.

The document shape is ``{"ns/key": {"value": <codec JSON>, "removed"?: "<text>"}}``.
Values are kept as raw JSON so comparing a fresh observation is a byte comparison
and encoding is byte-stable: ``encode_snapshot(decode_snapshot(b)) == b`` for any
``b`` produced by :func:`encode_snapshot`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final, final

import msgspec

from runtime.context._errors import SnapshotDecodeError

__all__ = [
    "EMPTY_SNAPSHOT",
    "Snapshot",
    "SnapshotEntry",
    "decode_snapshot",
    "encode_snapshot",
]


class SnapshotEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The value last admitted for one Context Source.

    ``value`` is the codec-encoded JSON of the admitted value; ``removed`` is the
    pre-rendered removal message of a removable source.
    """

    value: msgspec.Raw
    removed: str | None = None


@final
class Snapshot(Mapping[str, SnapshotEntry]):
    """An immutable Context Snapshot keyed by Context Source key."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[str, SnapshotEntry] | None = None) -> None:
        self._entries: dict[str, SnapshotEntry] = dict(entries or {})

    def __getitem__(self, key: str) -> SnapshotEntry:
        return self._entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Snapshot):
            return self._entries == other._entries
        return NotImplemented

    def __hash__(self) -> int:
        return hash(encode_snapshot(self))

    def __repr__(self) -> str:
        return f"Snapshot({encode_snapshot(self).decode()})"


EMPTY_SNAPSHOT: Final = Snapshot()

_encoder: Final = msgspec.json.Encoder(order="sorted")
_decoder: Final = msgspec.json.Decoder(dict[str, SnapshotEntry])


def encode_snapshot(snapshot: Snapshot) -> bytes:
    """Encode ``snapshot`` as canonical JSON bytes (keys sorted)."""
    return _encoder.encode(snapshot._entries)


def decode_snapshot(data: bytes | str) -> Snapshot:
    """Decode stored snapshot JSON.

    Individual values are not validated here; a value its source can no longer
    decode makes reconciliation report a replacement.

    Raises:
      SnapshotDecodeError: ``data`` is not a snapshot document.
    """
    try:
        return Snapshot(_decoder.decode(data))
    except msgspec.DecodeError as exc:
        raise SnapshotDecodeError(f"invalid context snapshot: {exc}") from exc
