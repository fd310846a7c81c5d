"""The HTTP core: the Quart-Trio app and its state, the route table, wire shapes, guards and
error answers, the V2 session routes, SSE streams, the websocket, the OpenAPI document, and
serving with Hypercorn.

It knows none of the surfaces built on it: each installs its routes on the core's table.
"""

from gateway._limits import DEFAULT_MAX_BODY as DEFAULT_MAX_BODY
from gateway.http._access import AccessLimits as AccessLimits
from gateway.http._app import DEFAULT_HEARTBEAT as DEFAULT_HEARTBEAT
from gateway.http._app import DEFAULT_KNOWN_SESSIONS as DEFAULT_KNOWN_SESSIONS
from gateway.http._app import DEFAULT_SSE_BUFFER as DEFAULT_SSE_BUFFER
from gateway.http._app import Gateway as Gateway
from gateway.http._app import Room as Room
from gateway.http._app import create_core as create_core
from gateway.http._app import gateway_of as gateway_of
from gateway.http._export import EXPORT_FORMAT as EXPORT_FORMAT
from gateway.http._export import SessionExport as SessionExport
from gateway.http._export import decode_export as decode_export
from gateway.http._export import session_export as session_export
from gateway.http._export import stored_events as stored_events
from gateway.http._guards import current_grant as current_grant
from gateway.http._openapi import openapi_document as openapi_document
from gateway.http._openapi import server_version as server_version
from gateway.http._opencode import agent_json as agent_json
from gateway.http._opencode import agent_v2_json as agent_v2_json
from gateway.http._opencode import assistant_json as assistant_json
from gateway.http._opencode import content_json as content_json
from gateway.http._opencode import message_error as message_error
from gateway.http._opencode import message_projections as message_projections
from gateway.http._opencode import model_v2_json as model_v2_json
from gateway.http._opencode import part_id as part_id
from gateway.http._opencode import project_json as project_json
from gateway.http._opencode import provider_json as provider_json
from gateway.http._opencode import provider_v2_json as provider_v2_json
from gateway.http._opencode import session_json as session_json
from gateway.http._opencode import step_finish_json as step_finish_json
from gateway.http._opencode import tokens_json as tokens_json
from gateway.http._opencode import tool_input_json as tool_input_json
from gateway.http._opencode import tool_name_json as tool_name_json
from gateway.http._opencode import tool_state_json as tool_state_json
from gateway.http._opencode import turn_agent_model as turn_agent_model
from gateway.http._opencode import user_json as user_json
from gateway.http._places import named_directory as named_directory
from gateway.http._places import request_directory as request_directory
from gateway.http._routes import HTML as HTML
from gateway.http._routes import JSON as JSON
from gateway.http._routes import NO_CONTENT as NO_CONTENT
from gateway.http._routes import SSE as SSE
from gateway.http._routes import Answer as Answer
from gateway.http._routes import Named as Named
from gateway.http._routes import Route as Route
from gateway.http._routes import RouteTable as RouteTable
from gateway.http._routes import quart_path as quart_path
from gateway.http._scope import project_filter as project_filter
from gateway.http._serve import DEFAULT_HOST as DEFAULT_HOST
from gateway.http._serve import DEFAULT_PORT as DEFAULT_PORT
from gateway.http._serve import Server as Server
from gateway.http._serve import bind as bind
from gateway.http._serve import serve_app as serve_app
from gateway.http._share import SHARING_DISABLED as SHARING_DISABLED
from gateway.http._share import share_if_auto as share_if_auto
from gateway.http._share import share_session as share_session
from gateway.http._share import share_setting as share_setting
from gateway.http._share import shared_session as shared_session
from gateway.http._share import unshare_session as unshare_session
from gateway.http._streams import Producer as Producer
from gateway.http._streams import sse_frame as sse_frame
from gateway.http._streams import sse_response as sse_response
from gateway.http._transcript import Usage as Usage
from gateway.http._transcript import transcript as transcript
from gateway.http._transcript import usage_of as usage_of
from gateway.http._wire import GatewayError as GatewayError
from gateway.http._wire import PermissionReplyBody as PermissionReplyBody
from gateway.http._wire import QuestionReplyBody as QuestionReplyBody
from gateway.http._wire import encode as encode
from gateway.http._wire import permission_json as permission_json
from gateway.http._wire import reply_permission as reply_permission
from gateway.http._ws import WebsocketLimits as WebsocketLimits

__all__ = [
    "AccessLimits",
    "Answer",
    "DEFAULT_HEARTBEAT",
    "DEFAULT_HOST",
    "DEFAULT_KNOWN_SESSIONS",
    "DEFAULT_MAX_BODY",
    "DEFAULT_PORT",
    "DEFAULT_SSE_BUFFER",
    "EXPORT_FORMAT",
    "Gateway",
    "GatewayError",
    "HTML",
    "JSON",
    "NO_CONTENT",
    "Named",
    "PermissionReplyBody",
    "Producer",
    "QuestionReplyBody",
    "Room",
    "Route",
    "RouteTable",
    "SHARING_DISABLED",
    "SSE",
    "Server",
    "SessionExport",
    "Usage",
    "WebsocketLimits",
    "agent_json",
    "agent_v2_json",
    "assistant_json",
    "bind",
    "content_json",
    "create_core",
    "decode_export",
    "encode",
    "gateway_of",
    "message_error",
    "message_projections",
    "model_v2_json",
    "openapi_document",
    "part_id",
    "permission_json",
    "project_filter",
    "project_json",
    "provider_json",
    "provider_v2_json",
    "quart_path",
    "reply_permission",
    "current_grant",
    "named_directory",
    "request_directory",
    "serve_app",
    "session_export",
    "server_version",
    "session_json",
    "share_if_auto",
    "share_session",
    "share_setting",
    "shared_session",
    "sse_frame",
    "sse_response",
    "step_finish_json",
    "stored_events",
    "tokens_json",
    "tool_input_json",
    "tool_name_json",
    "tool_state_json",
    "transcript",
    "turn_agent_model",
    "usage_of",
    "unshare_session",
    "user_json",
]
