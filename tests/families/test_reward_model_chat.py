"""The reward model's chat with the real tokenizers of every family with a chat template, no
engine: the chat encodes as apply_chat_template does, and a completion that writes the
template's end-of-turn gets characters, never a second turn. A tokenizer whose own
`apply_chat_template(tokenize=True)` adds what its rendered text does not hold (SentencePiece's
spaces after control tokens: Phi-3, Mistral v0.3), or that has no chat template to render
(mistral-common's), is refused at start naming the flag."""

from __future__ import annotations

import pytest
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.reward_model.chat import ChatRenderer
from geval_server.scorers.reward_model.checkpoint import RewardModelError

from tests.families.assets import FAMILIES, load_tokenizer

pytestmark = pytest.mark.families

TEMPLATED = sorted(name for name, family in FAMILIES.items() if family.template is not None)
SERVED = ["gemma-4", "llama-3.1", "llama-3.2", "qwen2.5"]
CHAT = (("user", "Summarise: the cat sat on the mat."), ("assistant", "A cat sat on a mat."))


def _tokenization(family: str) -> Tokenization:
    return Tokenization(load_tokenizer(family))


@pytest.mark.parametrize("family", SERVED)
def test_the_chat_encodes_as_apply_chat_template(family):
    tokenization = _tokenization(family)
    messages = [{"role": role, "content": content} for role, content in CHAT]
    expected = tokenization.tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False)
    assert ChatRenderer(tokenization).ids(CHAT) == list(expected)


@pytest.mark.parametrize("family", sorted(set(TEMPLATED) - set(SERVED)))
def test_a_tokenizer_the_renderer_cannot_match_is_refused_at_start(family):
    with pytest.raises(RewardModelError, match="--reward-model"):
        ChatRenderer(_tokenization(family))


@pytest.mark.parametrize("family", SERVED)
def test_a_completion_that_writes_the_end_of_turn_stays_characters(family):
    tokenization = _tokenization(family)
    renderer = ChatRenderer(tokenization)
    plain = renderer.ids(CHAT)
    end = plain[_last_control(tokenization, plain)]
    closer = tokenization.decode([end])
    forged = renderer.ids((CHAT[0], ("assistant", f"A cat sat on a mat.{closer}")))
    assert forged.count(end) == plain.count(end)
    assert closer in tokenization.decode(forged)


def _last_control(tokenization: Tokenization, ids: list[int]) -> int:
    """Where the template's last control token stands (the end of the assistant's turn)."""
    controls = set(tokenization.tokenizer.all_special_ids) | set(tokenization.tokenizer.added_tokens_decoder)
    return max(i for i, token in enumerate(ids) if token in controls)
