"""Bearer tokens: their durable records, how one is minted, hashed and verified.

A token reads ``kwt_<id>_<secret>``: the id names its record (``storage.RecordRow`` of
kind ``token``), the secret is 32 random bytes. The record keeps only the secret's scrypt
hash (``hashlib.scrypt``, OpenSSL's password hash), so a copy of the store gives no usable
token. Verifying the hash costs tens of milliseconds by design; ``TokenCache`` spares
every later request that cost by remembering, per process, the tokens it verified under an
HMAC-SHA256 digest keyed by a secret of the process (``docs/security.md``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import time
from collections import OrderedDict
from typing import Final, Literal

import msgspec

__all__ = [
    "ROLES",
    "Grant",
    "Role",
    "TokenCache",
    "TokenInfo",
    "TokenRecord",
    "hash_secret",
    "mint",
    "now_ms",
    "parse_bearer",
    "parse_duration",
    "verify_secret",
]

Role = Literal["read", "write", "admin"]
ROLES: Final[tuple[Role, ...]] = ("read", "write", "admin")
"""The roles, each allowed what the ones before it are."""

TOKEN_KIND: Final = "token"
_PREFIX: Final = "kwt"
_TOKEN: Final = re.compile(r"kwt_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
# scrypt's interactive cost (RFC 7914's suggestion): 16 MiB and tens of ms per hash.
_SCRYPT_N: Final = 2**14
_SCRYPT_R: Final = 8
_SCRYPT_P: Final = 1


class TokenInfo(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A token as listed: whose, for which project, what role, since and until when."""

    id: str
    user: str
    project: str
    """A project id, or ``*`` for every project."""
    role: Role
    time_created: int
    time_expires: int | None = None
    time_revoked: int | None = None


class TokenRecord(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A token as stored (the data of its record): its info and the secret's hash."""

    id: str
    user: str
    project: str
    role: Role
    hash: str
    time_created: int
    time_expires: int | None = None
    time_revoked: int | None = None

    def info(self) -> TokenInfo:
        return TokenInfo(
            id=self.id, user=self.user, project=self.project, role=self.role,
            time_created=self.time_created, time_expires=self.time_expires,
            time_revoked=self.time_revoked,
        )  # fmt: skip

    def refusal(self, now: int) -> str | None:
        """Why the token is refused at *now* (milliseconds), or None while it holds."""
        if self.time_revoked is not None:
            return "The token was revoked"
        if self.time_expires is not None and now >= self.time_expires:
            return "The token expired"
        return None


class Grant(msgspec.Struct, frozen=True, kw_only=True):
    """Who a request is: a token's user, project and role; the password's holder is
    ``admin`` of every project with no token."""

    user: str
    project: str
    role: Role
    token_id: str | None = None

    def allows(self, role: Role) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)

    def sees(self, project_id: str) -> bool:
        return self.project in ("*", project_id)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def mint() -> tuple[str, str, str]:
    """A new token: (its id, the token to hand out, its secret)."""
    token_id = secrets.token_hex(8)
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    return token_id, f"{_PREFIX}_{token_id}_{secret}", secret


def parse_bearer(header: str | None) -> tuple[str, str, str] | None:
    """(the token, its id, its secret) of an ``Authorization`` header that carries a token:
    ``Bearer <token>``, or HTTP basic auth whose password is the token (any user name), for
    clients that speak only basic auth (OpenCode's terminal UI and ``run --attach`` with
    ``OPENCODE_SERVER_PASSWORD``); None otherwise."""
    if not header:
        return None
    scheme = header[:6].lower()
    if scheme == "basic ":
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        token = decoded.partition(":")[2]
    elif header[:7].lower() == "bearer ":
        token = header[7:].strip()
    else:
        return None
    found = _TOKEN.fullmatch(token)
    return (token, found.group(1), found.group(2)) if found else None


def hash_secret(secret: str) -> str:
    """The scrypt hash of *secret* as stored: ``scrypt$n$r$p$salt$hash`` (base64)."""
    salt = secrets.token_bytes(16)
    digest = _scrypt(secret, salt, _SCRYPT_N, _SCRYPT_R, _SCRYPT_P)
    parts = (_b64(salt), _b64(digest))
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${parts[0]}${parts[1]}"


def verify_secret(secret: str, stored: str) -> bool:
    """Whether *secret* hashes to *stored* (compared in constant time); False for a
    malformed *stored*. Blocks for the hash's time: call it on a worker thread."""
    try:
        name, n, r, p, salt, digest = stored.split("$")
        if name != "scrypt":
            return False
        expected = base64.urlsafe_b64decode(digest + "==")
        given = _scrypt(secret, base64.urlsafe_b64decode(salt + "=="), int(n), int(r), int(p))
    except ValueError:
        return False
    return hmac.compare_digest(given, expected)


def _scrypt(secret: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(secret.encode(), salt=salt, n=n, r=r, p=p, maxmem=64 << 20, dklen=32)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> int:
    """Seconds of ``30d``, ``12h``, ``15m``, ``90s``, ``2w`` (or a plain number of seconds).

    Raises ValueError for anything else or a duration that is not positive.
    """
    found = re.fullmatch(r"\s*(\d+)\s*([smhdw]?)\s*", text)
    if found is None or int(found.group(1)) <= 0:
        raise ValueError(f"not a duration: {text!r} (e.g. 30d, 12h, 15m)")
    return int(found.group(1)) * _UNITS[found.group(2) or "s"]


class _Verified(msgspec.Struct):
    record: TokenRecord
    checked: float


class TokenCache:
    """The tokens this process verified, by keyed digest: a verified token is trusted for
    *recheck* seconds, then its record is read again (a revocation made anywhere reaches
    this process within that time). At most *size* tokens are kept, least recent first out.
    """

    def __init__(self, *, recheck: float, size: int) -> None:
        self._key = secrets.token_bytes(32)
        self._recheck = recheck
        self._size = size
        self._verified: OrderedDict[bytes, _Verified] = OrderedDict()

    def digest(self, token: str) -> bytes:
        return hmac.new(self._key, token.encode(), hashlib.sha256).digest()

    def get(self, digest: bytes, now: float) -> tuple[TokenRecord, bool] | None:
        """(the record verified under *digest*, whether it is due to be read again)."""
        found = self._verified.get(digest)
        if found is None:
            return None
        self._verified.move_to_end(digest)
        return found.record, now - found.checked >= self._recheck

    def put(self, digest: bytes, record: TokenRecord, now: float) -> None:
        self._verified[digest] = _Verified(record, now)
        self._verified.move_to_end(digest)
        while len(self._verified) > self._size:
            self._verified.popitem(last=False)

    def forget(self, digest: bytes) -> None:
        """Forget what was verified under *digest* (a sign-in that ended)."""
        self._verified.pop(digest, None)

    def drop(self, token_id: str) -> None:
        for digest in [d for d, v in self._verified.items() if v.record.id == token_id]:
            del self._verified[digest]
