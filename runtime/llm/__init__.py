"""Provider-neutral LLM streaming: schemas, protocol adapters, catalog, auth, retries.

Standalone: imports nothing else from this repository. See ``docs/llm.md``.
"""

import typing

from ._anthropic import ANTHROPIC_VERSION as ANTHROPIC_VERSION
from ._anthropic import AnthropicDecoder as AnthropicDecoder
from ._anthropic import encode_anthropic as encode_anthropic
from ._auth import COPILOT_CLIENT_ID as COPILOT_CLIENT_ID
from ._auth import OPENAI_CLIENT_ID as OPENAI_CLIENT_ID
from ._auth import OPENAI_ISSUER as OPENAI_ISSUER
from ._auth import ApiKeyCredential as ApiKeyCredential
from ._auth import Auth as Auth
from ._auth import Credential as Credential
from ._auth import CredentialStore as CredentialStore
from ._auth import DeviceCode as DeviceCode
from ._auth import OAuthCredential as OAuthCredential
from ._auth import Pkce as Pkce
from ._auth import copilot_device_login as copilot_device_login
from ._auth import copilot_poll_token as copilot_poll_token
from ._auth import copilot_request_device_code as copilot_request_device_code
from ._auth import jwt_account_id as jwt_account_id
from ._auth import new_pkce as new_pkce
from ._auth import openai_authorize_url as openai_authorize_url
from ._auth import openai_exchange_code as openai_exchange_code
from ._auth import openai_refresh as openai_refresh
from ._catalog import DEFAULT_BASE_URLS as DEFAULT_BASE_URLS
from ._catalog import NPM_PROTOCOLS as NPM_PROTOCOLS
from ._catalog import Catalog as Catalog
from ._catalog import CatalogModel as CatalogModel
from ._catalog import CatalogProvider as CatalogProvider
from ._catalog import ModelCost as ModelCost
from ._catalog import ModelLimit as ModelLimit
from ._catalog import ModelStatus as ModelStatus
from ._catalog import ModelVariant as ModelVariant
from ._catalog import ResolvedModel as ResolvedModel
from ._catalog import partition_options as partition_options
from ._catalog_source import BUNDLED_SNAPSHOT as BUNDLED_SNAPSHOT
from ._catalog_source import MODELS_DEV_URL as MODELS_DEV_URL
from ._catalog_source import load_catalog as load_catalog
from ._catalog_source import load_models_dev as load_models_dev
from ._client import LLMClient as LLMClient
from ._client import ModelLimits as ModelLimits
from ._client import ModelResolver as ModelResolver
from ._cost import LONG_CONTEXT_THRESHOLD as LONG_CONTEXT_THRESHOLD
from ._cost import step_cost as step_cost
from ._defaults import DEFAULT_PREFERENCES as DEFAULT_PREFERENCES
from ._defaults import PROVIDER_ORDER as PROVIDER_ORDER
from ._defaults import choose_default_model as choose_default_model
from ._defaults import choose_small_model as choose_small_model
from ._defaults import parse_model as parse_model
from ._defaults import provider_default_model as provider_default_model
from ._defaults import providers_with_credentials as providers_with_credentials
from ._defaults import resolve_model as resolve_model
from ._defaults import usable_providers as usable_providers
from ._errors import OVERFLOW_PATTERNS as OVERFLOW_PATTERNS
from ._errors import AuthError as AuthError
from ._errors import CatalogError as CatalogError
from ._errors import LLMError as LLMError
from ._errors import classify_http_error as classify_http_error
from ._errors import classify_message as classify_message
from ._errors import classify_transport_error as classify_transport_error
from ._errors import is_context_overflow as is_context_overflow
from ._errors import parse_retry_after as parse_retry_after
from ._events import ErrorKind as ErrorKind
from ._events import HostedToolResult as HostedToolResult
from ._events import LLMEvent as LLMEvent
from ._events import ProviderError as ProviderError
from ._events import ReasoningDelta as ReasoningDelta
from ._events import ReasoningEnd as ReasoningEnd
from ._events import ReasoningStart as ReasoningStart
from ._events import StepFinish as StepFinish
from ._events import StepStart as StepStart
from ._events import TextDelta as TextDelta
from ._events import TextEnd as TextEnd
from ._events import TextStart as TextStart
from ._events import ToolCall as ToolCall
from ._events import ToolInputDelta as ToolInputDelta
from ._events import ToolInputEnd as ToolInputEnd
from ._events import ToolInputStart as ToolInputStart
from ._gemini import SKIP_SIGNATURE as SKIP_SIGNATURE
from ._gemini import GeminiDecoder as GeminiDecoder
from ._gemini import encode_gemini as encode_gemini
from ._lowering import MAX_PROMPT_CACHE_KEY as MAX_PROMPT_CACHE_KEY
from ._lowering import LoweringCache as LoweringCache
from ._lowering import prompt_cache_key as prompt_cache_key
from ._lowering import wrap_system_update as wrap_system_update
from ._openai_chat import ChatDecoder as ChatDecoder
from ._openai_chat import encode_chat as encode_chat
from ._openai_responses import ResponsesDecoder as ResponsesDecoder
from ._openai_responses import encode_responses as encode_responses
from ._protocols import ADAPTERS as ADAPTERS
from ._protocols import ProtocolAdapter as ProtocolAdapter
from ._protocols import StreamDecoder as StreamDecoder
from ._provider_client import PreparedRequest as PreparedRequest
from ._provider_client import ProviderClient as ProviderClient
from ._replay import render_stream as render_stream
from ._replay import replay_transport as replay_transport
from ._retry import RetryPolicy as RetryPolicy
from ._retry import stream_with_retry as stream_with_retry
from ._route import ProtocolName as ProtocolName
from ._route import Route as Route
from ._route import WireRequest as WireRequest
from ._schema import AssistantMessage as AssistantMessage
from ._schema import FilePart as FilePart
from ._schema import GenerationControls as GenerationControls
from ._schema import LLMRequest as LLMRequest
from ._schema import Message as Message
from ._schema import ModelRef as ModelRef
from ._schema import ReasoningPart as ReasoningPart
from ._schema import SystemMessage as SystemMessage
from ._schema import TextPart as TextPart
from ._schema import ToolCallPart as ToolCallPart
from ._schema import ToolDefinition as ToolDefinition
from ._schema import ToolMessage as ToolMessage
from ._schema import ToolResultPart as ToolResultPart
from ._schema import Usage as Usage
from ._schema import UserMessage as UserMessage
from ._scripted import ScriptedLLM as ScriptedLLM
from ._scripted import ScriptExhaustedError as ScriptExhaustedError
from ._sse import FrameTooLargeError as FrameTooLargeError
from ._sse import SSEDecoder as SSEDecoder
from ._sse import SSEFrame as SSEFrame
from ._sse import encode_sse as encode_sse
from ._transport import stream_wire as stream_wire

if typing.TYPE_CHECKING:
    from ._http11 import HTTP11Transport as HTTP11Transport
    from ._http11 import provider_http_client as provider_http_client

_LAZY: typing.Final = frozenset({"HTTP11Transport", "provider_http_client"})


def __getattr__(name: str) -> object:
    """httpx loads with the provider transport, on first use, to keep start-up light."""
    if name in _LAZY:
        from . import _http11

        return getattr(_http11, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ADAPTERS",
    "ANTHROPIC_VERSION",
    "AnthropicDecoder",
    "ApiKeyCredential",
    "AssistantMessage",
    "Auth",
    "AuthError",
    "BUNDLED_SNAPSHOT",
    "COPILOT_CLIENT_ID",
    "Catalog",
    "CatalogError",
    "CatalogModel",
    "CatalogProvider",
    "ChatDecoder",
    "Credential",
    "CredentialStore",
    "DEFAULT_BASE_URLS",
    "DEFAULT_PREFERENCES",
    "DeviceCode",
    "ErrorKind",
    "FilePart",
    "FrameTooLargeError",
    "GeminiDecoder",
    "GenerationControls",
    "HTTP11Transport",
    "HostedToolResult",
    "LLMClient",
    "LLMError",
    "LLMEvent",
    "LLMRequest",
    "LONG_CONTEXT_THRESHOLD",
    "LoweringCache",
    "MAX_PROMPT_CACHE_KEY",
    "MODELS_DEV_URL",
    "Message",
    "ModelCost",
    "ModelLimit",
    "ModelLimits",
    "ModelRef",
    "ModelResolver",
    "ModelStatus",
    "ModelVariant",
    "NPM_PROTOCOLS",
    "OAuthCredential",
    "OPENAI_CLIENT_ID",
    "OPENAI_ISSUER",
    "OVERFLOW_PATTERNS",
    "PROVIDER_ORDER",
    "Pkce",
    "PreparedRequest",
    "ProtocolAdapter",
    "ProtocolName",
    "ProviderClient",
    "ProviderError",
    "ReasoningDelta",
    "ReasoningEnd",
    "ReasoningPart",
    "ReasoningStart",
    "ResolvedModel",
    "ResponsesDecoder",
    "RetryPolicy",
    "Route",
    "SKIP_SIGNATURE",
    "SSEDecoder",
    "SSEFrame",
    "ScriptExhaustedError",
    "ScriptedLLM",
    "StepFinish",
    "StepStart",
    "StreamDecoder",
    "SystemMessage",
    "TextDelta",
    "TextEnd",
    "TextPart",
    "TextStart",
    "ToolCall",
    "ToolCallPart",
    "ToolDefinition",
    "ToolInputDelta",
    "ToolInputEnd",
    "ToolInputStart",
    "ToolMessage",
    "ToolResultPart",
    "Usage",
    "UserMessage",
    "WireRequest",
    "choose_default_model",
    "choose_small_model",
    "classify_http_error",
    "classify_message",
    "classify_transport_error",
    "copilot_device_login",
    "copilot_poll_token",
    "copilot_request_device_code",
    "encode_anthropic",
    "encode_chat",
    "encode_gemini",
    "encode_responses",
    "encode_sse",
    "is_context_overflow",
    "jwt_account_id",
    "load_catalog",
    "load_models_dev",
    "new_pkce",
    "openai_authorize_url",
    "openai_exchange_code",
    "openai_refresh",
    "parse_model",
    "parse_retry_after",
    "partition_options",
    "prompt_cache_key",
    "provider_default_model",
    "provider_http_client",
    "providers_with_credentials",
    "render_stream",
    "replay_transport",
    "resolve_model",
    "step_cost",
    "stream_wire",
    "stream_with_retry",
    "usable_providers",
    "wrap_system_update",
]
