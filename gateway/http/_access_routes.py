"""The admin routes of access: ``/api/token`` (create, list, revoke) and ``/api/audit``.

Each needs an admin grant (``required_role``); a token is shown once, in the answer that
created it, and never listed with its hash.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import msgspec
from quart import Response, request

from gateway.http._access import AuditEntry
from gateway.http._routes import JSON, Answer, RouteTable
from gateway.http._tokens import Role, TokenInfo, parse_duration
from gateway.http._wire import GatewayError, encode

if TYPE_CHECKING:
    from gateway.http._app import Gateway

__all__ = ["TokenCreateBody", "access_routes"]

_MAX_LISTED: Final = 1000
_NAME: Final = r"^[A-Za-z0-9._@-]{1,64}$"


class TokenCreateBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``POST /api/token``: whose token, for which project (``*``: all), what role, and
    how long it lasts (``30d``, ``12h``; none: until revoked)."""

    user: str
    project: str
    role: Role
    expires: str | None = None


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
