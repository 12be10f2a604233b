"""OpenAI-style chat prompts: a `developer` message is a system turn and a `tool`
message is text the judge reads, so prompts from such data are scored instead of
failing every item."""

from __future__ import annotations

from geval_client import make_item
from geval_client.pb import reward_pb2
from geval_server.api.wire import validate
from geval_server.scorers.base import JudgeInput, render_chat
from geval_server.scorers.geval.rubrics import load_rubrics

RUBRICS = {name: rubric.uses_reference for name, rubric in load_rubrics().items()}
TOOL_CHAT = [
    {"role": "developer", "content": "Answer with the weather tool."},
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "Calling get_weather(city='Oslo')."},
    {"role": "tool", "content": '{"temp_c": 4, "sky": "rain"}'},
]


def test_developer_renders_as_a_system_turn_and_tool_as_its_own_text():
    developer = render_chat([("developer", "Be brief."), ("user", "Hi")])
    assert developer == render_chat([("system", "Be brief."), ("user", "Hi")])
    assert render_chat([("tool", '{"temp_c": 4}')]) == 'Tool: {"temp_c": 4}'


def test_a_prompt_with_developer_and_tool_messages_is_valid_and_keeps_every_message():
    valid = validate(
        reward_pb2.ScoreRequest(items=[make_item(TOOL_CHAT, "It is 4 degrees and raining in Oslo.")]),
        RUBRICS, "overall-quality",
    )
    item = valid.items[0]
    assert isinstance(item, JudgeInput)
    assert item.prompt == (
        "System: Answer with the weather tool.\n\nUser: Weather in Oslo?\n\n"
        "Assistant: Calling get_weather(city='Oslo').\n\n" 'Tool: {"temp_c": 4, "sky": "rain"}'
    )


def test_an_unknown_role_still_fails_its_item_naming_every_accepted_role():
    item = reward_pb2.Item(completion="ok")
    item.chat.messages.add(role="robot", content="hi")
    failure = validate(reward_pb2.ScoreRequest(items=[item]), RUBRICS, "overall-quality").items[0]
    assert failure.field == "items[0].chat.messages[0].role"
    assert "['system', 'developer', 'user', 'assistant', 'tool'], got 'robot'" in str(failure)
