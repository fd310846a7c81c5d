"""Provider login methods from plugins (the ``auth`` hook): what a plugin offers, and a
Location's flows through them.

A plugin's ``auth`` answers :class:`ProviderAuth` values: a provider id, its login methods
(OpenCode's shapes: ``oauth`` or ``api``, each with prompts asked first), and optionally a
``loader`` turning the provider's stored credential into provider options (``baseURL``,
``headers``, ``apiKey``, ...) laid over its configuration entry for each request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias

import msgspec

from runtime.llm import ApiKeyCredential, Credential, OAuthCredential

__all__ = [
    "AuthCondition",
    "AuthFailed",
    "AuthMethod",
    "AuthOption",
    "AuthPrompt",
    "Credentials",
    "OAuthAuthorization",
    "ProviderAuth",
    "ProviderAuthAuthorization",
    "ProviderAuthMethod",
    "auth_shape",
    "is_credential",
]

AuthFailure: TypeAlias = Literal[
    "ProviderAuthOauthMissing",
    "ProviderAuthOauthCodeMissing",
    "ProviderAuthOauthCallbackFailed",
    "ProviderAuthValidationFailed",
]


class AuthOption(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One choice of a ``select`` prompt."""

    label: str
    value: str
    hint: str | None = None


class AuthCondition(msgspec.Struct, frozen=True, kw_only=True):
    """Ask a prompt only when the answer to prompt *key* is (``eq``) or is not (``neq``)
    *value*."""

    key: str
    op: Literal["eq", "neq"]
    value: str


class AuthPrompt(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A question asked before a login method runs; the answers (``inputs``) go to the
    method by *key*."""

    type: Literal["text", "select"]
    key: str
    message: str
    placeholder: str | None = None
    options: list[AuthOption] = []
    when: AuthCondition | None = None

    def applies(self, answers: Mapping[str, str]) -> bool:
        """Whether this prompt is asked, given the answers so far."""
        if self.when is None:
            return True
        equal = answers.get(self.when.key) == self.when.value
        return equal if self.when.op == "eq" else not equal


class OAuthAuthorization(msgspec.Struct, frozen=True, kw_only=True):
    """What an ``oauth`` method's ``authorize`` answers: the URL to open, what to tell the
    user, and how the flow ends: ``code`` (the user pastes a code: ``callback(code)``) or
    ``auto`` (the plugin learns of the sign-in itself: ``callback()``). ``callback`` (async
    or not) answers the provider's credential (``ApiKeyCredential`` or ``OAuthCredential``)
    or raises :class:`AuthFailed`."""

    url: str
    instructions: str
    method: Literal["auto", "code"]
    callback: Any = msgspec.field(default=None)


class AuthMethod(msgspec.Struct, frozen=True, kw_only=True):
    """One way to log in to a provider. ``api``: the user gives a key, stored with the
    prompts' answers as its ``metadata``. ``oauth``: ``authorize(inputs)`` (async or not)
    answers an :class:`OAuthAuthorization`."""

    type: Literal["oauth", "api"]
    label: str
    prompts: list[AuthPrompt] = []
    authorize: Any = msgspec.field(default=None)


class ProviderAuth(msgspec.Struct, frozen=True, kw_only=True):
    """A provider's login methods, and its ``loader(credential)`` (async or not): provider
    options (the configuration's ``options`` shape) for requests made with the stored
    credential, or ``None``."""

    provider: str
    methods: list[AuthMethod]
    loader: Callable[..., Any] | None = None


class AuthFailed(Exception):
    """A login through a plugin's method failed: *name* is OpenCode's error name
    (``ProviderAuthOauthMissing``, ``ProviderAuthOauthCodeMissing``,
    ``ProviderAuthOauthCallbackFailed``, ``ProviderAuthValidationFailed``)."""

    def __init__(self, message: str, name: AuthFailure = "ProviderAuthOauthCallbackFailed"):
        super().__init__(message)
        self.name: AuthFailure = name


class ProviderAuthMethod(msgspec.Struct, frozen=True, kw_only=True):
    """A login method as ``GET /provider/auth`` shows it (OpenCode's shape)."""

    type: Literal["oauth", "api"]
    label: str
    prompts: list[AuthPrompt] = []


class ProviderAuthAuthorization(msgspec.Struct, frozen=True, kw_only=True):
    """A started ``oauth`` login as ``POST /provider/{id}/oauth/authorize`` answers it."""

    url: str
    method: Literal["auto", "code"]
    instructions: str


def auth_shape(methods: list[AuthMethod]) -> list[ProviderAuthMethod]:
    """*methods* as ``GET /provider/auth`` shows them."""
    return [ProviderAuthMethod(type=m.type, label=m.label, prompts=m.prompts) for m in methods]


def is_credential(value: object) -> bool:
    """Whether *value* is a credential the store keeps."""
    return isinstance(value, ApiKeyCredential | OAuthCredential)


Credentials: TypeAlias = Callable[[str], Credential | None]
"""The stored credential of a provider id (None: none stored)."""
