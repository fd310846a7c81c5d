"""Failure classification and the package's exception tree.

Exceptions::

    LLMError
    ├── CatalogError        unknown provider/model, unsupported protocol, bad catalog data
    └── AuthError           missing credentials or a failed login/refresh exchange

Provider failures are not raised: streams end with a ``ProviderError`` event whose
``kind`` is ``retryable``, ``context_overflow``, ``auth`` or ``terminal``.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from ._events import ErrorKind, ProviderError

__all__ = [
    "OVERFLOW_PATTERNS",
    "AuthError",
    "CatalogError",
    "LLMError",
    "classify_http_error",
    "classify_message",
    "classify_transport_error",
    "is_context_overflow",
    "parse_retry_after",
]


class LLMError(Exception):
    """Base of every exception this package raises."""


class CatalogError(LLMError):
    """The catalog cannot resolve or route a model."""


class AuthError(LLMError):
    """Credentials are missing or a login/refresh exchange failed."""


OVERFLOW_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"prompt is too long",
        r"input length and .?max_tokens.? exceed context limit",
        r"input is too long for requested model",
        r"exceeds the context window",
        r"input token count.*exceeds the maximum",
        r"maximum prompt length is \d+",
        r"reduce the length of the messages",
        r"maximum context length is \d+ tokens",
        r"exceeds the limit of \d+",
        r"exceeds the available context size",
        r"greater than the context length",
        r"context window exceeds limit",
        r"exceeded model token limit",
        r"context[_ ]length[_ ]exceeded",
        r"request entity too large",
        r"request_too_large",
        r"context length is only \d+ tokens",
        r"input length.*exceeds.*context length",
        r"prompt too long; exceeded (?:max )?context length",
        r"too large for model with \d+ maximum context length",
        r"model_context_window_exceeded",
        r"exceeds (?:the )?(?:model's )?maximum context length",
        r"prompt has \d+ tokens, but the configured context size",
        r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)",
    )
)
_NOT_OVERFLOW = re.compile(
    r"^(?:throttling error|service unavailable):|rate limit|too many requests", re.IGNORECASE
)
_QUOTA = re.compile(
    r"insufficient[_ ]quota|quota exceeded|insufficient (?:credits|balance)|billing|"
    r"usage_not_included|invalid_prompt",
    re.IGNORECASE,
)
_AUTH = re.compile(
    r"authentication|unauthori[sz]ed|invalid[_ ]api[_ ]key|api_key_invalid|permission[_ ]denied|"
    r"forbidden|access[_ ]?denied|unrecognizedclient|api key not valid",
    re.IGNORECASE,
)
_RETRYABLE = re.compile(
    r"rate[_ ]limit|too[_ ]many[_ ]requests|throttl|resource[_ ]exhausted|exhausted|"
    r"unavailable|overload|api_error|internal|server[_ ]error|model ?stream ?error|temporar|"
    r"timeout|timed out|connection|network|socket|stream (?:disconnected|closed)|"
    r"rate increased too quickly",
    re.IGNORECASE,
)
_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def is_context_overflow(message: str) -> bool:
    """Tell whether a provider message reports a context-window overflow."""
    if _NOT_OVERFLOW.search(message):
        return False
    return any(p.search(message) for p in OVERFLOW_PATTERNS)


def classify_message(
    message: str,
    *,
    code: str | None = None,
    status: int | None = None,
    retry_after: float | None = None,
) -> ProviderError:
    """Classify a failure from its text and optional code/status (no HTTP status rules)."""
    text = " ".join(x for x in (code, message) if x)
    kind: ErrorKind
    if code == "context_length_exceeded" or is_context_overflow(text) or status == 413:
        kind = "context_overflow"
    elif _QUOTA.search(text):
        kind = "terminal"
    elif status in (401, 403) or _AUTH.search(text):
        kind = "auth"
    elif _RETRYABLE.search(text) or (status is not None and status in _RETRY_STATUS):
        kind = "retryable"
    else:
        kind = "terminal"
    return ProviderError(
        kind=kind,
        message=message or (code or "unknown provider error"),
        status=status,
        retry_after=retry_after if kind == "retryable" else None,
        code=code,
    )


def classify_http_error(
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    *,
    now: Callable[[], float] | None = None,
) -> ProviderError:
    """Classify an HTTP error response (status >= 400) from any supported provider.

    Overflow wins over everything (413, ``context_length_exceeded``, overflow texts);
    429 with quota or billing text is terminal; 401/403 are auth; 408, 409, 429, 5xx
    and 529 are retryable; other statuses are terminal.
    """
    message, code = _error_text(body)
    text = f"{code or ''} {message}"
    raw = body[:4000].decode("utf-8", errors="replace")
    kind: ErrorKind
    if status == 413 or code == "context_length_exceeded" or is_context_overflow(text):
        kind = "context_overflow"
    elif _QUOTA.search(text):
        kind = "terminal"
    elif status in (401, 403) or _AUTH.search(raw):
        kind = "auth"
    elif status in _RETRY_STATUS or status >= 500:
        kind = "retryable"
    else:
        kind = "terminal"
    retry_after = parse_retry_after(headers, body, now=now) if kind == "retryable" else None
    return ProviderError(
        kind=kind,
        message=message or f"HTTP {status}",
        status=status,
        retry_after=retry_after,
        code=code,
    )


def classify_transport_error(exc: BaseException) -> ProviderError:
    """Connection resets, refused connections and timeouts are retryable."""
    return ProviderError(kind="retryable", message=f"{type(exc).__name__}: {exc}".rstrip(": "))


def parse_retry_after(
    headers: Mapping[str, str], body: bytes = b"", *, now: Callable[[], float] | None = None
) -> float | None:
    """Seconds to wait: ``retry-after-ms``, ``retry-after`` (seconds or HTTP date),
    else Gemini's ``RetryInfo.retryDelay`` in the body; ``None`` when absent."""
    lower = {k.lower(): v for k, v in headers.items()}
    if (ms := lower.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    if (ra := lower.get("retry-after")) is not None:
        try:
            return max(0.0, float(ra))
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(ra) if ra else None
            if parsed is not None and now is not None:
                return max(0.0, parsed.timestamp() - now())
    return _gemini_retry_delay(body)


def _gemini_retry_delay(body: bytes) -> float | None:
    match = re.search(rb'"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"', body)
    return float(match.group(1)) if match else None


def _error_text(body: bytes) -> tuple[str, str | None]:
    """Pull (message, code) out of any provider's error body."""
    try:
        data: Any = msgspec.json.decode(body) if body else None
    except msgspec.DecodeError:
        return body.decode("utf-8", errors="replace").strip()[:2000], None
    if isinstance(data, list) and data:
        data = data[0]
    if not isinstance(data, dict):
        return (str(data) if data is not None else ""), None
    err = data.get("error", data)
    if isinstance(err, str):
        return err, None
    if not isinstance(err, dict):
        return str(data.get("message", "")), None
    message = str(err.get("message") or data.get("message") or "")
    code = err.get("code") or err.get("status") or err.get("type")
    if isinstance(code, int):
        code = err.get("status") or err.get("type")
    etype = err.get("type")
    if isinstance(etype, str) and etype and not message.startswith(etype):
        message = f"{etype}: {message}"
    return message, (str(code) if code else None)
