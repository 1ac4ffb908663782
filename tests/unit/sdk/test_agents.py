"""The agent tools without a server: their schemas as each framework reads them, and the
mistakes a model makes answered in one line before anything is sent."""

from __future__ import annotations

from typing import Any

import anthropic.types
import openai.types.chat
import pytest
from langchain_core.messages import ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from bac.agents import SandboxTools, ToolResult
from bac.agents.anthropic_tools import AnthropicDispatcher, tool_definitions
from bac.agents.langchain_tools import langchain_tools
from bac.agents.openai_tools import (
    OpenAIDispatcher,
    chat_tool_definitions,
    response_tool_definitions,
)

# Nothing here reaches a server: the URL is never dialled.
TOOLS = SandboxTools(api_key="unused", api_url="http://127.0.0.1:9")


@pytest.mark.parametrize(("name", "arguments", "said"), [
    ("run_command", {"sandbox_id": "abc", "command": 42},
     "run_command: command must be a string, got 42"),
    ("run_command", {"sandbox_id": "abc"}, "run_command: command is required"),
    ("read_file", {"sandbox_id": "abc", "path": "/x", "colour": "red"},
     "read_file: unknown argument(s) colour"),
    ("create_sandbox", {"timeout": -1}, "create_sandbox: timeout must be a whole number"),
    ("create_sandbox", {"timeout": True}, "create_sandbox: timeout must be a whole number"),
    ("create_sandbox", {"on_timeout": "explode"}, "create_sandbox: on_timeout must be one of"),
    ("create_sandbox", {"metadata": {"a": 1}}, "create_sandbox: metadata must be an object"),
    ("fork_sandbox", {"sandbox_id": "abc", "count": 11},
     "fork_sandbox: count must be a whole number between 1 and 10"),
    ("launch_rockets", {}, "there is no tool 'launch_rockets'"),
])
async def test_a_wrong_call_is_one_clear_line(name: str, arguments: dict[str, Any],
                                              said: str) -> None:
    """A model's mistake names the argument and what was expected."""
    result = await TOOLS.call(name, arguments)
    assert result.is_error and result.text.startswith(said)
    assert "\n" not in result.text


def test_every_tool_schema_is_a_closed_object_whose_required_names_exist() -> None:
    for spec in TOOLS.specs:
        schema = spec.parameters
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"]), spec.name
        assert spec.description and spec.title
        assert not (spec.hints.read_only and spec.hints.destructive), spec.name


def test_openai_definitions_parse_as_openai_tool_params() -> None:
    """Each definition is the Chat Completions and the Responses shape."""
    chat = chat_tool_definitions(TOOLS)
    assert [d["function"]["name"] for d in chat] == [s.name for s in TOOLS.specs]
    assert all(d["type"] == "function" for d in chat)
    responses = response_tool_definitions(TOOLS)
    assert responses[0]["name"] == "create_sandbox" and "parameters" in responses[0]


async def test_openai_tool_calls_from_a_completion_are_answered() -> None:
    """A completion's tool calls (openai's own types): bad JSON and an unknown tool come
    back as tool messages, one per call, in order."""
    completion = openai.types.chat.ChatCompletion.model_validate({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "run_command", "arguments": "{not json"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "nope", "arguments": "{}"}}]}}]})
    calls = completion.choices[0].message.tool_calls or []
    answers = await OpenAIDispatcher(TOOLS).messages_for(calls)
    assert [a["tool_call_id"] for a in answers] == ["call_1", "call_2"]
    assert answers[0]["content"].startswith("run_command: the arguments are not valid JSON")
    assert answers[1]["content"].startswith("there is no tool 'nope'")


async def test_openai_responses_function_calls_are_answered() -> None:
    items = [{"type": "message", "content": []},
             {"type": "function_call", "call_id": "fc_1", "name": "read_file",
              "arguments": '{"path": "/x"}'}]
    answers = await OpenAIDispatcher(TOOLS).outputs_for(items)
    assert answers == [{"type": "function_call_output", "call_id": "fc_1", "output": [
        {"type": "input_text", "text": "read_file: sandbox_id is required (a non-empty "
                                       "string)"}]}]


async def test_anthropic_tool_use_blocks_are_answered_as_tool_results() -> None:
    """A Message (anthropic's own type) with tool_use blocks: one tool_result each, the
    failure flagged is_error."""
    message = anthropic.types.Message.model_validate({
        "id": "m", "type": "message", "role": "assistant", "model": "x",
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [{"type": "text", "text": "let me see"},
                    {"type": "tool_use", "id": "toolu_1", "name": "kill_sandbox",
                     "input": {}}]})
    reply = await AnthropicDispatcher(TOOLS).reply_to(message)
    assert reply == {"role": "user", "content": [{
        "type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
        "content": [{"type": "text",
                     "text": "kill_sandbox: sandbox_id is required (a non-empty string)"}]}]}
    assert [d["name"] for d in tool_definitions(TOOLS)] == [s.name for s in TOOLS.specs]


async def test_langchain_tools_carry_the_schema_and_answer_errors_as_tool_messages() -> None:
    """LangChain reads each tool's schema as given; a failed call is a ToolMessage with
    status error through the tool-call interface."""
    tools = {t.name: t for t in langchain_tools(TOOLS)}
    converted = convert_to_openai_tool(tools["run_command"])
    assert converted["function"]["parameters"]["required"] == ["sandbox_id", "command"]
    answer = await tools["run_command"].ainvoke(
        {"type": "tool_call", "id": "c1", "name": "run_command",
         "args": {"sandbox_id": "abc", "command": 7}})
    assert isinstance(answer, ToolMessage) and answer.status == "error"
    assert answer.content == "run_command: command must be a string, got 7"


def test_a_result_joins_its_text_and_keeps_its_images() -> None:
    failure = ToolResult.failure("no")
    assert failure.text == "no" and failure.images == () and failure.data == {"error": "no"}
