"""Who may do what: bearer tokens and the password, roles, the audit trail and the limits.

``Access`` is the one gate every way in passes (Quart's hooks for HTTP, SSE and the
websocket): ``admit`` answers a request's ``Grant`` or the refusal to send. A browser,
which cannot set a header on a websocket, signs in once with a token (``sign_in``): the
answer's cookie names a sign-in record (``SignIn``), and the gate then admits the cookie
as that token (same role, project, revocation and expiry) until ``sign_out``. A ``read``
grant lists and streams, ``write`` also prompts, replies and edits, ``admin`` also changes
configuration, MCP servers, plugins and tokens (``required_role``). Refusals and admin
actions are written to the store as audit records (kind ``audit``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import msgspec
import trio

from gateway.http._tokens import (
    TOKEN_KIND,
    Grant,
    Role,
    TokenCache,
    TokenInfo,
    TokenRecord,
    hash_secret,
    mint,
    now_ms,
    parse_bearer,
    verify_secret,
)
from gateway.http._wire import encode
from runtime import StorageError
from storage import GetRecord, ListRecords, PutRecord, RecordRow

if TYPE_CHECKING:
    from storage import Store

__all__ = [
    "SIGNIN_COOKIE",
    "clear_cookie",
    "signin_cookie",
    "Access",
    "AccessLimits",
    "AuditEntry",
    "Refusal",
    "SignIn",
    "SignedIn",
    "authorized",
    "required_role",
]

_log = logging.getLogger("kittiwake.gateway.access")
AUDIT_KIND: Final = "audit"
_ADMIN_PREFIXES: Final = ("/config", "/global/config", "/mcp", "/api/token", "/api/audit")
_READS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
SIGNIN_KIND: Final = "signin"
SIGNIN_COOKIE: Final = "kittiwake_signin"
"""The cookie a browser's sign-in answers: ``kws_`` and 32 random bytes (base64url)."""
_SIGNIN: Final = re.compile(r"kws_[A-Za-z0-9_-]{43}")


def authorized(header: str | None, password: str) -> bool:
    """Whether an ``Authorization`` header carries HTTP basic auth with *password*."""
    if not header or not header.lower().startswith("basic "):
        return False
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return False
    _, _, given = decoded.partition(":")
    return hmac.compare_digest(given.encode(), password.encode())


def required_role(method: str, path: str) -> Role:
    """The least role a request needs: admin for configuration, MCP and tokens (reading
    tokens and the audit too), write for any other change, read for the rest."""
    admin = any(path == p or path.startswith(p + "/") for p in _ADMIN_PREFIXES)
    if admin and (method not in _READS or path.startswith(("/api/token", "/api/audit"))):
        return "admin"
    return "read" if method in _READS or method == "WEBSOCKET" else "write"


class AccessLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The bounds of authentication.

    Attributes:
        recheck: seconds a verified token is trusted before its record is read again: a
            revocation or expiry reaches every worker and closes open streams within it.
        cache_size: verified tokens remembered per process.
        free_failures: failed authentications an address makes before it is slowed.
        failure_window: seconds after which an address's failures are forgotten.
        first_delay: seconds an address is held off after its first failure past
            ``free_failures``; the delay doubles with each further failure.
        max_delay: the longest an address is held off.
        addresses: client addresses tracked at once (least recent first out).
        admissions_per_second: changes (write requests) one token makes per second, sustained.
        admission_burst: changes one token makes at once before that rate applies.
        hash_threads: token hashes verified at once (each takes tens of ms and 16 MiB).
    """

    recheck: float = 0.5
    cache_size: int = 4096
    free_failures: int = 5
    failure_window: float = 300.0
    first_delay: float = 0.25
    max_delay: float = 30.0
    addresses: int = 4096
    signin_lifetime: int = 7 * 86400
    """seconds a browser's sign-in lasts at most (and never past its token's expiry)."""
    admissions_per_second: float = 10.0
    admission_burst: int = 30
    hash_threads: int = 2


class AuditEntry(msgspec.Struct, frozen=True, kw_only=True, rename={"token_id": "tokenID"}):
    """One audit record: who (user, token), what (action, status), when, from where."""

    id: str
    time: int
    user: str | None
    token_id: str | None
    action: str
    status: int
    address: str
    message: str = ""


class Refusal(msgspec.Struct, frozen=True):
    """A refused request's answer: status, ``{"_tag","message"}`` body, headers."""

    status: int
    body: bytes
    headers: dict[str, str] = {}


def _refusal(status: int, tag: str, message: str, **headers: str) -> Refusal:
    return Refusal(status, encode({"_tag": tag, "message": message}), headers)


class SignIn(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A browser's sign-in as stored (kind ``signin``): its id is the SHA-256 of the
    cookie's value (the value itself is never stored), the token it stands for, and when
    it ends (its expiry; ``time_ended`` once signed out)."""

    id: str
    token_id: str
    time_created: int
    time_expires: int
    time_ended: int | None = None


class SignedIn(msgspec.Struct, frozen=True):
    """A sign-in's answer: the grant, the cookie's value and its lifetime in seconds."""

    grant: Grant
    cookie: str
    max_age: int


def signin_id(cookie: str) -> str:
    """The id of the sign-in record *cookie* names (its SHA-256, hex)."""
    return hashlib.sha256(cookie.encode()).hexdigest()


def clear_cookie() -> str:
    """The ``Set-Cookie`` that removes the sign-in cookie."""
    return f"{SIGNIN_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"


def signin_cookie(value: str, max_age: int, *, secure: bool) -> str:
    """The ``Set-Cookie`` of a sign-in: HttpOnly (no script reads it), SameSite=Strict (no
    other site's page sends it), Secure over TLS, for the whole origin, for *max_age* s."""
    flags = "; Secure" if secure else ""
    return f"{SIGNIN_COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{flags}"


class _Address(msgspec.Struct):
    failures: int
    since: float
    until: float = 0.0
    noted: float = 0.0


class _Bucket(msgspec.Struct):
    tokens: float
    at: float


class Access:
    """The gate of one served app; see the module docstring.

    Args:
        store: where tokens and audit records live (``rt.storage``).
        password: the single-user password (HTTP basic auth): an admin of every project.
        tokens: whether bearer tokens are accepted.
        limits: the bounds (``AccessLimits``).
        clock: seconds, monotonic (the limits' clock).
    """

    def __init__(
        self, store: Store, *, password: str | None, tokens: bool, limits: AccessLimits,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self._store = store
        self.password = password
        self.tokens = tokens
        self.limits = limits
        self._clock = clock
        self._cache = TokenCache(recheck=limits.recheck, size=limits.cache_size)
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._hashing = trio.CapacityLimiter(limits.hash_threads)
        self.streams: dict[trio.CancelScope, str] = {}
        """Open streams by the token they were opened with, closed when it is refused."""

    @property
    def required(self) -> bool:
        """Whether requests must authenticate at all."""
        return self.tokens or self.password is not None

    async def admit(
        self, header: str | None, address: str, method: str, path: str,
        cookie: str | None = None,
    ) -> Grant | Refusal:  # fmt: skip
        """The grant of a request with *header* (``Authorization``) or, without one, the
        sign-in *cookie*, from *address*, or its refusal (401, 403 or 429; refusals are
        audited; a refused cookie's 401 clears it). Cancellation abandons the check; a
        verification already on its thread finishes there."""
        if not self.required:
            return Grant(user="local", project="*", role="admin")
        now = self._clock()
        held = self._held_off(address, now)
        if not header and cookie and self.tokens:
            grant = await self._signed_in(cookie, verified_only=held is not None)
            if grant is None and held is None:
                # A cookie is no guess (its 32 random bytes are not guessed): a stale one
                # (signed out, its token revoked or expired) is refused and cleared.
                refusal = self._challenge(clear=True)
                action = f"{method} {path}"
                await self.audit(None, action, 401, address, "sign-in refused")
                return refusal
        else:
            grant = await self._authenticate(header, verified_only=held is not None)
        if grant is None:
            if held is not None:
                if self._first_hold_refusal(address):
                    await self.audit(None, f"{method} {path}", 429, address, "held off")
                return held
            # A request without credentials is no guess (a browser asks so before it sends
            # the password): refused, not counted.
            refusal = self._failed(address, now) if header else self._challenge()
            message = "authentication failed" if header else "no credentials"
            await self.audit(None, f"{method} {path}", refusal.status, address, message)
            return refusal
        role = required_role(method, path)
        if not grant.allows(role):
            message = f"A {grant.role} token cannot {method} {path}: it needs {role}"
            await self.audit(grant, f"{method} {path}", 403, address, message)
            return _refusal(403, "ForbiddenError", message)
        if (
            role != "read"
            and grant.token_id is not None
            and not self._admitted(grant.token_id, now)
        ):
            message = (
                f"Token {grant.token_id} made more than {self.limits.admission_burst} changes "
                f"at over {self.limits.admissions_per_second:g} per second; retry shortly"
            )
            await self.audit(grant, f"{method} {path}", 429, address, message)
            return _refusal(429, "RateLimitedError", message, **{"Retry-After": "1"})
        return grant

    async def _authenticate(self, header: str | None, *, verified_only: bool) -> Grant | None:
        """The grant *header* carries, or None. *verified_only* (the address is held off):
        only a token this process already verified counts; no password is compared and
        no hash computed."""
        if not verified_only and self.password is not None and authorized(header, self.password):
            return Grant(user="password", project="*", role="admin")
        if not self.tokens:
            return None
        parsed = parse_bearer(header)
        if parsed is None:
            return None
        token, token_id, secret = parsed
        digest = self._cache.digest(token)
        cached = self._cache.get(digest, self._clock())
        if cached is None and verified_only:
            return None
        if cached is not None and not cached[1]:
            record: TokenRecord | None = cached[0]
        else:
            record = await self.token(token_id)
            if record is None:
                self._cache.drop(token_id)
                return None
            if cached is None:
                stored = record.hash
                async with self._hashing:
                    ok = await trio.to_thread.run_sync(verify_secret, secret, stored)
                if not ok:
                    return None
            self._cache.put(digest, record, self._clock())
        assert record is not None
        if record.refusal(now_ms()) is not None:
            self._cache.drop(token_id)
            return None
        return Grant(user=record.user, project=record.project, role=record.role, token_id=record.id)

    async def _signed_in(self, cookie: str, *, verified_only: bool) -> Grant | None:
        """The grant of the sign-in *cookie* names, or None (unknown, signed out, expired,
        or its token refused). Like a token, a verified cookie is trusted for ``recheck``
        seconds before its records are read again."""
        if _SIGNIN.fullmatch(cookie) is None:
            return None
        digest = self._cache.digest(cookie)
        cached = self._cache.get(digest, self._clock())
        if cached is not None and not cached[1]:
            record: TokenRecord | None = cached[0]
        elif cached is None and verified_only:
            return None
        else:
            row = await self._store.read(GetRecord(kind=SIGNIN_KIND, id=signin_id(cookie)))
            signin = None if row is None else msgspec.json.decode(row.data, type=SignIn)
            if signin is None or signin.time_ended is not None or now_ms() >= signin.time_expires:
                self._cache.forget(digest)
                return None
            record = await self.token(signin.token_id)
            if record is None:
                return None
            self._cache.put(digest, record, self._clock())
        assert record is not None
        if record.refusal(now_ms()) is not None:
            self._cache.drop(record.id)
            return None
        return Grant(user=record.user, project=record.project, role=record.role, token_id=record.id)

    async def sign_in(self, token: str, address: str) -> SignedIn | Refusal:
        """Verify *token* (a failure counts against *address* as any failed
        authentication does; a held-off address is refused 429) and store a sign-in for
        it, lasting ``signin_lifetime`` at most and never past the token's expiry. Both
        outcomes are audited. Cancellation before the write stores no sign-in."""
        action = "POST /api/signin"
        if not self.tokens:
            message = "This server takes no bearer tokens: sign in with its password"
            return _refusal(404, "NotFoundError", message)
        now = self._clock()
        held = self._held_off(address, now)
        grant = await self._authenticate("Bearer " + token, verified_only=held is not None)
        if grant is None or grant.token_id is None:
            if held is not None:
                await self.audit(None, action, 429, address, "held off")
                return held
            self._failed(address, now)
            await self.audit(None, action, 401, address, "sign-in failed")
            return _refusal(401, "UnauthorizedError", "Wrong, revoked or expired token")
        record = await self.token(grant.token_id)
        assert record is not None  # _authenticate just read or verified it
        created = now_ms()
        until = created + self.limits.signin_lifetime * 1000
        if record.time_expires is not None:
            until = min(until, record.time_expires)
        cookie = "kws_" + base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        signin = SignIn(
            id=signin_id(cookie), token_id=record.id, time_created=created, time_expires=until
        )
        await self._put_signin(signin)
        await self.audit(grant, action, 200, address, "signed in")
        return SignedIn(grant, cookie, max(0, (until - created) // 1000))

    async def sign_out(self, cookie: str | None, address: str) -> None:
        """End the sign-in *cookie* names (nothing if it names none): every worker refuses
        it within ``recheck``, this one at once. Audited when one ended."""
        if not cookie or _SIGNIN.fullmatch(cookie) is None:
            return
        row = await self._store.read(GetRecord(kind=SIGNIN_KIND, id=signin_id(cookie)))
        if row is None:
            return
        signin = msgspec.json.decode(row.data, type=SignIn)
        self._cache.forget(self._cache.digest(cookie))
        if signin.time_ended is None:
            await self._put_signin(msgspec.structs.replace(signin, time_ended=now_ms()))
            record = await self.token(signin.token_id)
            grant = (
                None if record is None else
                Grant(user=record.user, project=record.project, role=record.role,
                      token_id=record.id)
            )  # fmt: skip
            await self.audit(grant, "POST /api/signout", 204, address, "signed out")

    async def _put_signin(self, signin: SignIn) -> None:
        row = RecordRow(
            SIGNIN_KIND, signin.id, signin.time_created, msgspec.json.encode(signin).decode()
        )
        await self._store.write(PutRecord(row=row))

    # -- limits -------------------------------------------------------------------------

    def _held_off(self, address: str, now: float) -> Refusal | None:
        found = self._addresses.get(address)
        if found is None or found.until <= now:
            return None
        wait = max(1, round(found.until - now))
        message = f"Too many failed authentications from {address}; retry in {wait} s"
        return _refusal(429, "TooManyRequestsError", message, **{"Retry-After": str(wait)})

    def _failed(self, address: str, now: float) -> Refusal:
        """Count a failure from *address*; past ``free_failures`` it is held off for a
        delay that doubles with each further failure, up to ``max_delay``."""
        limits = self.limits
        found = self._addresses.get(address)
        if found is None or now - found.since > limits.failure_window:
            found = self._addresses[address] = _Address(failures=0, since=now)
        self._addresses.move_to_end(address)
        while len(self._addresses) > limits.addresses:
            self._addresses.popitem(last=False)
        found.failures += 1
        over = found.failures - limits.free_failures
        if over > 0:
            delay = limits.first_delay * 2 ** min(over - 1, 16)
            found.until = now + min(limits.max_delay, delay)
        return self._challenge()

    def _first_hold_refusal(self, address: str) -> bool:
        """Whether this is the first refusal of the address's current hold (the one
        audited: a flood of held-off requests writes one record per hold)."""
        found = self._addresses.get(address)
        if found is None:
            return False
        first = found.noted != found.until
        found.noted = found.until
        return first

    def _challenge(self, *, clear: bool = False) -> Refusal:
        """The 401 asking for credentials; *clear*: it also clears the sign-in cookie."""
        challenges = ['Basic realm="kittiwake", charset="UTF-8"'] if self.password else []
        challenges += ['Bearer realm="kittiwake"'] if self.tokens else []
        what = " or ".join(
            (["the password"] if self.password else [])
            + (["a bearer token"] if self.tokens else [])
        )
        headers = {"WWW-Authenticate": ", ".join(challenges)}
        if clear:
            headers["Set-Cookie"] = clear_cookie()
        return _refusal(
            401, "UnauthorizedError", f"Missing or wrong credentials: send {what}", **headers
        )

    def _admitted(self, token_id: str, now: float) -> bool:
        """Take one change from the token's bucket; False when it is empty."""
        limits = self.limits
        bucket = self._buckets.get(token_id)
        if bucket is None:
            bucket = self._buckets[token_id] = _Bucket(float(limits.admission_burst), now)
        self._buckets.move_to_end(token_id)
        while len(self._buckets) > limits.cache_size:
            self._buckets.popitem(last=False)
        refill = (now - bucket.at) * limits.admissions_per_second
        bucket.tokens = min(float(limits.admission_burst), bucket.tokens + refill)
        bucket.at = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    # -- tokens -------------------------------------------------------------------------

    async def token(self, token_id: str) -> TokenRecord | None:
        row = await self._store.read(GetRecord(kind=TOKEN_KIND, id=token_id))
        return None if row is None else msgspec.json.decode(row.data, type=TokenRecord)

    async def create_token(
        self, *, user: str, project: str, role: Role, expires_in: int | None
    ) -> tuple[str, TokenRecord]:
        """Mint and store a token: (the token, shown once; its record). The secret is
        hashed on a worker thread; cancellation before the write stores nothing."""
        token_id, token, secret = mint()
        async with self._hashing:
            hashed = await trio.to_thread.run_sync(hash_secret, secret)
        created = now_ms()
        expires = created + expires_in * 1000 if expires_in is not None else None
        record = TokenRecord(
            id=token_id, user=user, project=project, role=role, hash=hashed,
            time_created=created, time_expires=expires,
        )  # fmt: skip
        await self._put(record)
        return token, record

    async def tokens_listed(self, limit: int) -> list[TokenInfo]:
        rows = await self._store.read(ListRecords(kind=TOKEN_KIND, limit=limit))
        return [msgspec.json.decode(r.data, type=TokenRecord).info() for r in rows]

    async def revoke(self, token_id: str) -> TokenInfo | None:
        """Revoke a token here and now (its open streams close); None if unknown."""
        record = await self.token(token_id)
        if record is None:
            return None
        if record.time_revoked is None:
            record = msgspec.structs.replace(record, time_revoked=now_ms())
            await self._put(record)
        self._refuse(token_id)
        return record.info()

    async def _put(self, record: TokenRecord) -> None:
        row = RecordRow(
            TOKEN_KIND, record.id, record.time_created, msgspec.json.encode(record).decode()
        )
        await self._store.write(PutRecord(row=row))

    def watch(self, scope: trio.CancelScope, grant: Grant | None) -> None:
        """Close *scope* (an open stream) when *grant*'s token is refused; the stream's
        owner removes it from ``streams`` when it ends."""
        if grant is not None and grant.token_id is not None:
            self.streams[scope] = grant.token_id

    def _refuse(self, token_id: str) -> None:
        self._cache.drop(token_id)
        for scope, owner in list(self.streams.items()):
            if owner == token_id:
                scope.cancel()

    async def recheck(self, stop: trio.Event) -> None:
        """Until *stop*: every ``recheck`` seconds, read again the tokens with open
        streams and close what a revoked or expired one holds open (a token without one
        is read again at its next request). A failed read is logged and tried again at
        the next round; cancellation ends it."""
        while not stop.is_set():
            with trio.move_on_after(self.limits.recheck):
                await stop.wait()
            for token_id in sorted(set(self.streams.values())):
                try:
                    record = await self.token(token_id)
                except StorageError as exc:
                    _log.warning("token recheck failed", extra={"error": str(exc)})
                    break
                if record is None or record.refusal(now_ms()) is not None:
                    self._refuse(token_id)

    # -- audit --------------------------------------------------------------------------

    async def audit(
        self, grant: Grant | None, action: str, status: int, address: str, message: str = ""
    ) -> None:
        """Write one audit record (durable before this returns)."""
        at = now_ms()
        entry = AuditEntry(
            id=f"{at:013d}{secrets.token_hex(4)}", time=at, user=grant.user if grant else None,
            token_id=grant.token_id if grant else None, action=action, status=status,
            address=address, message=message,
        )  # fmt: skip
        row = RecordRow(AUDIT_KIND, entry.id, at, msgspec.json.encode(entry).decode())
        await self._store.write(PutRecord(row=row))

    async def audit_listed(self, limit: int, before: int | None) -> list[AuditEntry]:
        rows = await self._store.read(ListRecords(kind=AUDIT_KIND, limit=limit, before=before))
        return [msgspec.json.decode(r.data, type=AuditEntry) for r in rows]
