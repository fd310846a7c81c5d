"""The gateway's guards and error answers: admission (``gateway.http._access``: the
password, bearer tokens, a browser's sign-in cookie), CORS (Quart-CORS, ``install_cors``) and the ``{"_tag",
"message"}`` bodies, installed as Quart's hooks (``install_guards``, ``install_cors``,
``install_errors``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from quart import Response, g, has_websocket_context, request, websocket
from quart_cors import cors, cors_exempt
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Rule

from gateway._limits import over_limit
from gateway.http._access import SIGNIN_COOKIE, Refusal, required_role
from gateway.http._places import named_directory
from gateway.http._routes import JSON, Route
from gateway.http._tokens import Grant
from gateway.http._wire import GatewayError, encode, error_body, error_for
from runtime import KittiwakeError

if TYPE_CHECKING:
    from gateway.http._app import Gateway

__all__ = [
    "current_grant",
    "error_answer",
    "install_cors",
    "install_errors",
    "install_guards",
    "refusal_response",
]

_log = logging.getLogger("kittiwake.gateway")
_GRANT: Final = "kittiwake_grant"


def install_cors(app: QuartTrio, origins: frozenset[str], routes: Sequence[Route]) -> None:
    """Answer cross-origin requests from *origins* (``"*"`` for any) with Quart-CORS.

    The methods allowed are those *routes* use (with ``HEAD`` and ``OPTIONS``), any request
    header is allowed, and credentials are allowed for listed origins only: a wildcard is
    answered ``Access-Control-Allow-Origin: *`` without them. Without *origins* nothing is
    installed and no answer carries CORS headers. Websocket routes are exempt (browsers do
    not preflight them; their origin is not checked).
    """
    if not origins:
        return
    methods = {r.method for r in routes if r.method != "WEBSOCKET"} | {"HEAD", "OPTIONS"}
    for route in routes:
        if route.method == "WEBSOCKET":
            cors_exempt(route.handler)
    cors(
        app, allow_origin=sorted(origins), allow_methods=sorted(methods),
        allow_credentials="*" not in origins, expose_headers=(),
    )  # fmt: skip


def refusal_response(refusal: Refusal) -> Response:
    """The answer to a request ``Access.admit`` refused."""
    return Response(refusal.body, status=refusal.status, content_type=JSON, headers=refusal.headers)


def current_grant() -> Grant | None:
    """The grant of the request or websocket being served (None before the guard ran)."""
    grant: Grant | None = g.get(_GRANT)
    return grant


def install_guards(app: QuartTrio, gw: Gateway) -> None:
    """Admit each request and websocket through ``gw.access`` (refusals answered as it
    says), remember its grant (``current_grant``), answer what its project does not see
    as absent (``gw.scope``), and audit every admin action (a change needing admin;
    reading tokens or the audit is not one). The ``public`` routes (the reads under a
    shared session's link, which carries its own secret) and ``OPTIONS`` are not admitted.
    Every body is read up front."""
    access = gw.access
    public: set[str] = set()

    def is_public(rule: Rule | None) -> bool:
        if not public:  # the table is complete once the app serves
            public.update(r.operation_id for r in gw.routes if r.public)
            public.add("")  # computed (there may be no public route)
        return rule is not None and rule.endpoint in public

    @app.before_request
    async def _check_request() -> Response | None:
        method = request.method
        if method != "OPTIONS" and not is_public(request.url_rule):
            path = request.path
            found = await access.admit(
                request.headers.get("Authorization"), request.remote_addr or "", method, path,
                request.cookies.get(SIGNIN_COOKIE),
            )  # fmt: skip
            if isinstance(found, Refusal):
                return refusal_response(found)
            g.setdefault(_GRANT, found)
            await gw.scope.check(
                found, method, path, request.view_args or {}, lambda: named_directory(gw)
            )
        # Read (and cache) every body up front, bounded by max_body: a route that answers
        # without reading it would otherwise leave unread bytes on a keep-alive connection,
        # and Hypercorn can then wait for them forever before the next request.
        await request.get_data(cache=True)
        return None

    @app.after_request
    async def _audit(response: Response) -> Response:
        grant = current_grant()
        method = request.method
        if grant is None or method in ("GET", "HEAD", "OPTIONS"):
            return response
        path = request.path
        if required_role(method, path) == "admin":
            action = f"{method} {path}"
            await access.audit(grant, action, response.status_code, request.remote_addr or "")
        return response

    @app.before_websocket
    async def _check_websocket() -> Response | None:
        found = await access.admit(
            websocket.headers.get("Authorization"), websocket.remote_addr or "", "WEBSOCKET",
            websocket.path, websocket.cookies.get(SIGNIN_COOKIE),
        )  # fmt: skip
        if isinstance(found, Refusal):
            return refusal_response(found)
        g.setdefault(_GRANT, found)
        await gw.scope.check(
            found, "WEBSOCKET", websocket.path, websocket.view_args or {}, gw.directory.resolve
        )
        return None


_HTTP_TAGS: Final = {
    401: "UnauthorizedError", 404: "NotFoundError", 405: "MethodNotAllowedError",
    413: "PayloadTooLargeError",
}  # fmt: skip


def error_answer(
    exc: GatewayError | KittiwakeError | HTTPException, *, max_body: int | None = None
) -> tuple[int, bytes]:
    """The status and ``{"_tag","message",...}`` body answering *exc*; 5xx runtime errors
    are logged. A 413's message names *max_body*, the limit the body went over."""
    if isinstance(exc, HTTPException):
        code = exc.code or 500
        tag = _HTTP_TAGS.get(code, "InvalidRequestError" if code < 500 else "UnknownError")
        message = exc.description or exc.name
        if code == 413 and max_body is not None:
            message = over_limit(max_body)
        return code, encode({"_tag": tag, "message": message})
    if isinstance(exc, KittiwakeError):
        error = error_for(exc)
        if error.status >= 500:
            _log.error("request failed", extra={"tag": exc.tag, "error": exc.message})
        exc = error
    return exc.status, encode(error_body(exc))


def _no_route(exc: NotFound | MethodNotAllowed, method: str, path: str) -> GatewayError:
    """The error naming the route a request asked for that none serves: in OpenCode's V1
    shape (``{"name", "data": {"message"}}``, what its clients read) outside ``/api/``."""
    named = not path.startswith("/api/")
    if isinstance(exc, MethodNotAllowed):
        allowed = ", ".join(sorted(exc.valid_methods or ()))
        message = f"{method} is not allowed on {path}; allowed: {allowed}"
        return GatewayError("MethodNotAllowedError", message, named=named)
    return GatewayError("NotFoundError", f"No route: {method} {path}", named=named)


def install_errors(app: QuartTrio, max_body: int) -> None:
    """Answer every error of *app*'s routes with ``error_answer``; a body over *max_body*
    (Quart's ``MAX_CONTENT_LENGTH``) gets a 413 naming it, V1 and V2 routes alike."""

    @app.errorhandler(GatewayError)
    @app.errorhandler(KittiwakeError)
    @app.errorhandler(HTTPException)
    async def _error(exc: GatewayError | KittiwakeError | HTTPException) -> Response:
        status, body = error_answer(exc, max_body=max_body)
        return Response(body, status=status, content_type=JSON)

    @app.errorhandler(NotFound)
    @app.errorhandler(MethodNotAllowed)
    async def _routing(exc: NotFound | MethodNotAllowed) -> Response:
        """No route matched (else as ``_error``: a handler's own ``NotFound``)."""
        asked = websocket if has_websocket_context() else request
        if asked.routing_exception is not exc:
            return await _error(exc)
        status, body = error_answer(_no_route(exc, asked.method, asked.path))
        allow = exc.valid_methods if isinstance(exc, MethodNotAllowed) else None
        headers = {"Allow": ", ".join(sorted(allow))} if allow else None
        return Response(body, status=status, content_type=JSON, headers=headers)
