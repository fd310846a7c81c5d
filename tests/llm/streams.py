"""Recorded-shape provider streams (field layout as in vercel/ai fixtures)."""

import json


def sse(*objs, event_names: bool = False, done: bool = False) -> bytes:
    out = []
    for obj in objs:
        if event_names:
            out.append(f"event: {obj['type']}\n")
        out.append(f"data: {json.dumps(obj)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def _chunk(delta, finish=None, usage=None):
    return {
        "id": "chatcmpl-AZ",
        "object": "chat.completion.chunk",
        "created": 1750000000,
        "model": "deepseek-reasoner",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        "usage": usage,
    }


CHAT_TOOLS = sse(
    _chunk({"role": "assistant", "content": "", "refusal": None}),
    _chunk({"reasoning_content": "User wants"}),
    _chunk({"reasoning_content": " weather."}),
    _chunk({"content": "Checking"}),
    _chunk({"content": " now."}),
    _chunk(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_A",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ],
        }
    ),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
    _chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_B",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": ""},
                }
            ]
        }
    ),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Paris"}'}}]}),
    _chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"tz": "CET"}'}}]}),
    _chunk({}, finish="tool_calls"),
    {
        "id": "chatcmpl-AZ",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {
            "prompt_tokens": 16,
            "completion_tokens": 300,
            "total_tokens": 316,
            "prompt_tokens_details": {"cached_tokens": 4},
            "completion_tokens_details": {"reasoning_tokens": 120},
        },
    },
    done=True,
)

CHAT_ERROR_MIDSTREAM = sse(
    _chunk({"role": "assistant", "content": "Par"}),
    {
        "error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
            "code": "server_error",
        }
    },
)

RESPONSES = b"".join(
    sse(e)
    for e in [
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": {"id": "resp_1", "status": "in_progress", "output": []},
        },
        {"type": "response.in_progress", "sequence_number": 1, "response": {"id": "resp_1"}},
        {
            "type": "response.output_item.added",
            "sequence_number": 2,
            "output_index": 0,
            "item": {
                "id": "rs_1",
                "type": "reasoning",
                "encrypted_content": "gAAAA-start",
                "summary": [],
            },
        },
        {
            "type": "response.reasoning_summary_part.added",
            "sequence_number": 3,
            "item_id": "rs_1",
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "sequence_number": 4,
            "item_id": "rs_1",
            "summary_index": 0,
            "delta": "**Calcul",
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "sequence_number": 5,
            "item_id": "rs_1",
            "summary_index": 0,
            "delta": "ating**",
        },
        {
            "type": "response.output_item.done",
            "sequence_number": 6,
            "output_index": 0,
            "item": {
                "id": "rs_1",
                "type": "reasoning",
                "encrypted_content": "gAAAA-final",
                "summary": [{"type": "summary_text", "text": "**Calculating**"}],
            },
        },
        {
            "type": "response.output_item.added",
            "sequence_number": 7,
            "output_index": 1,
            "item": {
                "id": "fc_1",
                "type": "function_call",
                "status": "in_progress",
                "arguments": "",
                "call_id": "call_AB6",
                "name": "calculator",
            },
        },
        {
            "type": "response.function_call_arguments.delta",
            "sequence_number": 8,
            "item_id": "fc_1",
            "output_index": 1,
            "delta": '{"',
        },
        {
            "type": "response.function_call_arguments.delta",
            "sequence_number": 9,
            "item_id": "fc_1",
            "output_index": 1,
            "delta": 'a":12,"b":7,"op":"add"}',
        },
        {
            "type": "response.function_call_arguments.done",
            "sequence_number": 10,
            "item_id": "fc_1",
            "arguments": '{"a":12,"b":7,"op":"add"}',
        },
        {
            "type": "response.output_item.done",
            "sequence_number": 11,
            "output_index": 1,
            "item": {
                "id": "fc_1",
                "type": "function_call",
                "status": "completed",
                "arguments": '{"a":12,"b":7,"op":"add"}',
                "call_id": "call_AB6",
                "name": "calculator",
            },
        },
        {
            "type": "response.output_item.added",
            "sequence_number": 12,
            "output_index": 2,
            "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []},
        },
        {
            "type": "response.content_part.added",
            "sequence_number": 13,
            "item_id": "msg_1",
            "content_index": 0,
            "part": {"type": "output_text", "text": ""},
        },
        {
            "type": "response.output_text.delta",
            "sequence_number": 14,
            "item_id": "msg_1",
            "output_index": 2,
            "content_index": 0,
            "delta": "The",
            "logprobs": [],
        },
        {
            "type": "response.output_text.delta",
            "sequence_number": 15,
            "item_id": "msg_1",
            "output_index": 2,
            "content_index": 0,
            "delta": " sum",
            "logprobs": [],
        },
        {
            "type": "response.output_item.done",
            "sequence_number": 16,
            "output_index": 2,
            "item": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "The sum"}],
            },
        },
        {
            "type": "response.completed",
            "sequence_number": 17,
            "response": {
                "id": "resp_1",
                "status": "completed",
                "output": [],
                "usage": {
                    "input_tokens": 299,
                    "input_tokens_details": {"cached_tokens": 100},
                    "output_tokens": 12,
                    "output_tokens_details": {"reasoning_tokens": 5},
                    "total_tokens": 311,
                },
            },
        },
    ]
)

RESPONSES_QUOTA_ERROR = sse(
    {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_2"}},
    {
        "type": "error",
        "sequence_number": 1,
        "error": {
            "type": "insufficient_quota",
            "code": "insufficient_quota",
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "param": None,
        },
    },
    {
        "type": "response.failed",
        "sequence_number": 2,
        "response": {
            "id": "resp_2",
            "status": "failed",
            "error": {"code": "insufficient_quota", "message": "quota"},
        },
    },
)

ANTHROPIC = sse(
    {
        "type": "message_start",
        "message": {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-sonnet-4-5",
            "stop_reason": None,
            "usage": {
                "input_tokens": 69,
                "cache_creation_input_tokens": 10,
                "cache_read_input_tokens": 20,
                "output_tokens": 2,
            },
        },
    },
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
    },
    {"type": "ping"},
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "The previous"},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "thinking_delta", "thinking": " result"},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "signature_delta", "signature": "EvQBCkYI"},
    },
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "925"}},
    {"type": "content_block_stop", "index": 1},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "id": "toolu_01", "name": "json", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": ""},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": '{"elements": '},
    },
    {
        "type": "content_block_start",
        "index": 3,
        "content_block": {"type": "tool_use", "id": "toolu_02", "name": "noop", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": "[1, 2]}"},
    },
    {"type": "content_block_stop", "index": 3},
    {"type": "content_block_stop", "index": 2},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {
            "input_tokens": 849,
            "cache_creation_input_tokens": 10,
            "cache_read_input_tokens": 20,
            "output_tokens": 47,
        },
    },
    {"type": "message_stop"},
    event_names=True,
)

ANTHROPIC_OVERLOADED_MIDSTREAM = sse(
    {
        "type": "message_start",
        "message": {
            "id": "msg_02",
            "role": "assistant",
            "content": [],
            "usage": {"input_tokens": 5, "output_tokens": 1},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    event_names=True,
)

GEMINI = sse(
    {
        "candidates": [
            {
                "content": {
                    "parts": [{"text": "Weighing options", "thought": True}],
                    "role": "model",
                },
                "index": 0,
            }
        ]
    },
    {
        "candidates": [
            {"content": {"parts": [{"text": "Let me check"}], "role": "model"}, "index": 0}
        ]
    },
    {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {
                            "functionCall": {
                                "name": "weather",
                                "args": {"location": "San Francisco"},
                            },
                            "thoughtSignature": "EpEgCo4g",
                        },
                        {"functionCall": {"name": "weather", "args": {"location": "Boston"}}},
                    ],
                    "role": "model",
                },
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 29,
            "candidatesTokenCount": 15,
            "totalTokenCount": 848,
            "thoughtsTokenCount": 804,
        },
    },
    {
        "candidates": [
            {
                "content": {"parts": [{"text": ""}], "role": "model"},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 29,
            "candidatesTokenCount": 15,
            "totalTokenCount": 848,
            "thoughtsTokenCount": 804,
            "cachedContentTokenCount": 9,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r1",
    },
)

GEMINI_TEXT_SIGNATURE = sse(
    {"candidates": [{"content": {"parts": [{"text": "Hi"}], "role": "model"}, "index": 0}]},
    {
        "candidates": [
            {
                "content": {
                    "parts": [{"text": "", "thoughtSignature": "EpAICo0I"}],
                    "role": "model",
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1},
    },
)
