"""The routes of access: ``/api/token`` (create, list, revoke) and ``/api/audit``, each
needing an admin grant (``required_role``); and a browser's ``/api/signin`` and
``/api/signout``, open to all (the sign-in verifies its token through the gate).

A token is shown once, in the answer that created it, and never listed with its hash.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import msgspec
from quart import Response, request

from gateway.http._access import (
    SIGNIN_COOKIE,
    AuditEntry,
    Refusal,
    clear_cookie,
    signin_cookie,
)
from gateway.http._guards import current_grant, refusal_response
from gateway.http._routes import JSON, Answer, RouteTable
from gateway.http._tokens import Role, TokenInfo, parse_duration
from gateway.http._wire import GatewayError, encode

if TYPE_CHECKING:
    from gateway.http._app import Gateway

__all__ = ["SignInBody", "TokenCreateBody", "access_routes"]

_MAX_LISTED: Final = 1000
_NAME: Final = r"^[A-Za-z0-9._@-]{1,64}$"


class TokenCreateBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``POST /api/token``: whose token, for which project (``*``: all), what role, and
    how long it lasts (``30d``, ``12h``; none: until revoked)."""

    user: str
    project: str
    role: Role
    expires: str | None = None


class SignInBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``POST /api/signin``: the bearer token a browser signs in with."""

    token: str


class SignInAnswer(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Who signed in: the token's user, project and role, and the sign-in's lifetime."""

    user: str
    project: str
    role: Role
    expires_in: int
    """Seconds until the sign-in (its cookie) ends."""


class SignInWho(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Who a request is: its user, project and role, and whether a sign-in cookie (not an
    ``Authorization`` header) made it so."""

    user: str
    project: str
    role: Role
    signed_in: bool


class TokenCreated(msgspec.Struct, frozen=True, kw_only=True):
    token: str
    """The bearer token: shown here once, never again."""
    info: TokenInfo


def _json(body: object, status: int = 200) -> Response:
    return Response(encode(body), status=status, content_type=JSON)


def _limit() -> int:
    raw = request.args.get("limit", "100")
    if not raw.isdigit() or not 1 <= int(raw) <= _MAX_LISTED:
        raise GatewayError("InvalidRequestError", f"limit must be 1 to {_MAX_LISTED}")
    return int(raw)


def access_routes(table: RouteTable, gw: Gateway) -> None:
    """Install the token and audit routes on *table*."""
    access = gw.access

    @table.post(
        "/api/token", "kittiwake.token.create", "Create a bearer token (shown once)",
        body=TokenCreateBody, answer=Answer(type=TokenCreated, envelope="data"),
    )  # fmt: skip
    async def create_token(body: TokenCreateBody) -> Response:
        if not re.match(_NAME, body.user):
            raise GatewayError("InvalidRequestError", "user is 1-64 of A-Z a-z 0-9 . _ @ -")
        if body.project != "*" and not body.project.strip():
            raise GatewayError("InvalidRequestError", "project is a project id or *")
        try:
            expires = parse_duration(body.expires) if body.expires is not None else None
        except ValueError as exc:
            raise GatewayError("InvalidRequestError", str(exc)) from None
        token, record = await access.create_token(
            user=body.user, project=body.project, role=body.role, expires_in=expires
        )
        return _json({"data": TokenCreated(token=token, info=record.info())}, 201)

    @table.get(
        "/api/token", "kittiwake.token.list", "List tokens (newest first, without secrets)",
        answer=Answer(type=list[TokenInfo], envelope="data"), query=("limit",),
    )  # fmt: skip
    async def list_tokens() -> Response:
        return _json({"data": await access.tokens_listed(_limit())})

    @table.delete(
        "/api/token/{tokenID}", "kittiwake.token.revoke", "Revoke a token at once",
        answer=Answer(type=TokenInfo, envelope="data"), errors=("NotFoundError",),
    )  # fmt: skip
    async def revoke_token(token_id: str) -> Response:
        record = await access.revoke(token_id)
        if record is None:
            raise GatewayError("NotFoundError", f"No token {token_id}")
        return _json({"data": record})

    @table.post(
        "/api/signin", "kittiwake.signin",
        "Sign a browser in with a bearer token: answers an HttpOnly cookie standing for it",
        body=SignInBody, answer=Answer(type=SignInAnswer, envelope="data"),
        errors=("UnauthorizedError", "TooManyRequestsError", "NotFoundError"), public=True,
    )  # fmt: skip
    async def sign_in(body: SignInBody) -> Response:
        found = await access.sign_in(body.token.strip(), request.remote_addr or "")
        if isinstance(found, Refusal):
            return refusal_response(found)
        g = found.grant
        info = SignInAnswer(user=g.user, project=g.project, role=g.role, expires_in=found.max_age)
        answer = _json({"data": info})
        secure = request.scheme in ("https", "wss")
        answer.headers["Set-Cookie"] = signin_cookie(found.cookie, found.max_age, secure=secure)
        answer.headers["Cache-Control"] = "no-store"
        return answer

    @table.get(
        "/api/signin", "kittiwake.signin.who",
        "Who this request is (a page reloaded while signed in shows it)",
        answer=Answer(type=SignInWho, envelope="data"),
    )  # fmt: skip
    async def who() -> Response:
        g = current_grant()
        if g is None:  # admitted without a guard: none is installed
            raise GatewayError("UnauthorizedError", "No grant")
        cookie = not request.headers.get("Authorization") and SIGNIN_COOKIE in request.cookies
        signed_in = cookie and g.token_id is not None
        return _json(
            {"data": SignInWho(user=g.user, project=g.project, role=g.role, signed_in=signed_in)}
        )

    @table.post(
        "/api/signout", "kittiwake.signout", "Sign a browser out: its sign-in cookie ends",
        public=True,
    )  # fmt: skip
    async def sign_out() -> Response:
        await access.sign_out(request.cookies.get(SIGNIN_COOKIE), request.remote_addr or "")
        return Response(b"", status=204, headers={"Set-Cookie": clear_cookie()})

    @table.get(
        "/api/audit", "kittiwake.audit.list",
        "Admin actions and refused requests, newest first (before: milliseconds)",
        answer=Answer(type=list[AuditEntry], envelope="data"), query=("limit", "before"),
    )  # fmt: skip
    async def list_audit() -> Response:
        raw = request.args.get("before")
        if raw is not None and not raw.isdigit():
            raise GatewayError("InvalidRequestError", "before is a time in milliseconds")
        before = int(raw) if raw is not None else None
        return _json({"data": await access.audit_listed(_limit(), before)})
