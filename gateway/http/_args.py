"""The query arguments the HTTP routes read (numbers, order, a seq to follow after) and the
page envelope they answer."""

from __future__ import annotations

from typing import Any, Literal

from quart import request

from gateway.http._wire import GatewayError

__all__ = ["after_arg", "int_arg", "order_arg", "page_json"]


def after_arg() -> int | None:
    raw = request.args.get("after") or request.headers.get("Last-Event-ID")
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise GatewayError("InvalidRequestError", "after must be an integer seq") from None


def int_arg(name: str, default: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        return int(float(raw)) if float(raw).is_integer() else int(raw)
    except ValueError:
        raise GatewayError("InvalidRequestError", f"{name} must be a number") from None


def order_arg() -> Literal["asc", "desc"] | None:
    order = request.args.get("order")
    if order is None:
        return None
    if order not in ("asc", "desc"):
        raise GatewayError("InvalidRequestError", "order must be 'asc' or 'desc'")
    return order  # type: ignore[return-value]


def page_json(data: Any, previous: str | None, next_: str | None) -> dict[str, Any]:
    cursor = {k: v for k, v in (("previous", previous), ("next", next_)) if v is not None}
    return {"data": data, "cursor": cursor}
