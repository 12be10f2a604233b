"""The vLLM engine driver answers a slot read made before from its read memo (the memo's
own logic is tested in tests/unit/test_read_memo.py); constructing the driver asks vLLM
which platform it runs on."""

import asyncio

import pytest
from geval_server.engine.vllm_engine import VllmEngine


class _CountingEngine(VllmEngine):
    """The engine driver with vLLM's request replaced by an answer that changes every time, as
    a batch of another shape would change it."""

    def __init__(self, size: int) -> None:
        super().__init__("judge", {"dtype": "float32"}, read_memo_size=size)
        self.requests = 0

    async def _chunk_logprobs(self, prompt_ids, token_ids, affinity=None):
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
