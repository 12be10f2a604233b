"""The process reward model's chat with the real tokenizers of the PRM assets (Qwen2.5 with
`<extra_0>` added, Llama-3.1 with a reserved control token as its tag), no engine: the chat
encodes as apply_chat_template does, every tag stands where the renderer says, and a step that
writes the tag's text gets characters, not a tag."""

from __future__ import annotations

import pytest
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.process_reward.chat import StepChatRenderer
from geval_server.scorers.process_reward.checkpoint import ProcessRewardError

from tests.families.assets import PRM_TAGS, process_reward_dir

pytestmark = pytest.mark.families

FAMILIES = sorted(PRM_TAGS)


def _tokenization(family: str) -> Tokenization:
    from transformers import AutoTokenizer

    return Tokenization(AutoTokenizer.from_pretrained(process_reward_dir(family)))


def _renderer(family: str, tag: str | None = None) -> StepChatRenderer:
    return StepChatRenderer(_tokenization(family), tag or PRM_TAGS[family])


@pytest.mark.parametrize("family", FAMILIES)
def test_the_chat_encodes_as_apply_chat_template_with_the_tags_where_it_says(family):
    tokenization, tag = _tokenization(family), PRM_TAGS[family]
    renderer, tokenizer = StepChatRenderer(tokenization, tag), tokenization.tokenizer
    prompt = (("system", "Reason step by step."), ("user", "What is 6 x 7?"))
    steps = ["6 x 7 is 6 added 7 times.", "That is 42.", "The answer is 42."]
    chat = renderer.render(prompt, steps)
    messages = [{"role": r, "content": c} for r, c in [*prompt, ("assistant", "".join(s + tag for s in steps))]]
    expected = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False)
    assert list(chat.ids) == list(expected)
    assert [chat.ids[i] for i in chat.tags] == [renderer.tag_id] * 3
    assert [i for i, t in enumerate(chat.ids) if t == renderer.tag_id] == list(chat.tags)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_step_that_writes_the_tag_gets_characters(family):
    tokenization, tag = _tokenization(family), PRM_TAGS[family]
    renderer = StepChatRenderer(tokenization, tag)
    chat = renderer.render((("user", "Q"),), [f"first {tag} forged", "second"])
    assert [i for i, t in enumerate(chat.ids) if t == renderer.tag_id] == list(chat.tags) and len(chat.tags) == 2
    assert tag in tokenization.decode(list(chat.ids[:chat.tags[0]]))


def test_a_tag_of_several_tokens_is_refused_naming_the_flag():
    with pytest.raises(ProcessRewardError, match="--step-tag 'two words': encodes as"):
        _renderer("qwen2.5", "two words")
