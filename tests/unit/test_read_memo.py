"""The read memo (read_memo.py): the same prompt read again gets the same answer, the
engine is asked once, and the memo forgets its least recently used reads first."""

import asyncio

import pytest
from geval_server.engine.read_memo import ReadMemo
from geval_server.engine.vllm_engine import VllmEngine


def test_keys_tell_prompts_and_labels_apart():
    key = ReadMemo.key
    assert key([1, 2, 3], [7]) == key((1, 2, 3), (7,))
    assert len({key([1, 2, 3], [7]), key([1, 2], [3, 7]), key([1, 2, 3], [8]), key([1, 2, 3, 7], [])}) == 4


def test_the_first_answer_wins_and_the_oldest_is_forgotten():
    memo = ReadMemo(size=2)
    first = memo.keep(1, {1: -0.5})
    assert memo.keep(1, {1: -0.7}) is first  # a second read of the same prompt finished later
    memo.keep(2, {1: -1.0})
    assert memo.get(1) is first  # used: now the most recent
    memo.keep(3, {1: -2.0})
    assert memo.get(2) is None and memo.get(1) is first and memo.get(3) == {1: -2.0}


def test_size_zero_keeps_nothing_and_a_negative_size_is_refused():
    memo = ReadMemo(size=0)
    assert memo.keep(1, {1: -0.5}) == {1: -0.5} and memo.get(1) is None
    with pytest.raises(ValueError, match="read memo size"):
        ReadMemo(size=-1)


class _CountingEngine(VllmEngine):
    """The engine driver with vLLM's request replaced by an answer that changes every time, as
    a batch of another shape would change it."""

    def __init__(self, size: int) -> None:
        super().__init__("judge", {"dtype": "float32"}, read_memo_size=size)
        self.requests = 0

    async def _chunk_logprobs(self, prompt_ids, token_ids):
        self.requests += 1
        await asyncio.sleep(0)
        return {token_id: -1.0 - self.requests / 1000 for token_id in token_ids}


@pytest.mark.parametrize("size", [4, 0])
def test_the_engine_driver_answers_a_read_again_from_the_memo(size):
    engine = _CountingEngine(size)

    async def reads():
        first = await engine.token_logprobs([5, 6, 7], [1, 2])
        again = await engine.token_logprobs([5, 6, 7], [1, 2])
        other = await engine.token_logprobs([5, 6, 8], [1, 2])
        return first, again, other

    first, again, other = asyncio.run(reads())
    if size:
        assert again == first and engine.requests == 2 and other != first
    else:
        assert again != first and engine.requests == 3
