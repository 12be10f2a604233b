"""The list of what the server uses of vLLM (tests/vllm_versions/uses.py) is complete and checks
what it claims: every use in server/ is typed (none `unknown`), every table entry types
something, a new use in the code joins the list, and the reader of a release's code
(source.py) finds names, members and signatures the way vLLM's code spells them. The releases
themselves are checked in tests/vllm_versions/ (network, cached); nothing here imports vLLM."""

from __future__ import annotations

import ast
import pathlib
import textwrap

import pytest

from tests.vllm_versions import releases
from tests.vllm_versions.source import VllmSource
from tests.vllm_versions.uses import HELD, SERVER, THROUGH, Use, file_uses, server_uses, vllm_files

ASYNC_LLM = "vllm.v1.engine.async_llm.AsyncLLM"


@pytest.fixture(scope="module")
def derived():
    consulted: set[str] = set()
    return server_uses(consulted), consulted


def test_every_use_is_typed_and_every_table_entry_types_one(derived):
    uses, consulted = derived
    assert [str(u) for u in uses if u.kind == "unknown"] == []
    entries = {f"{file}:{key}" for file, held in HELD.items() for key in held} | set(THROUGH)
    assert entries - consulted == set(), "a table entry no code reaches: remove it"


def test_every_server_file_that_imports_vllm_is_read():
    importing = {path for path in SERVER.rglob("*.py")
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "vllm"}
    assert importing <= set(vllm_files())


def test_the_drivers_core_uses_are_listed(derived):
    uses = set(derived[0])
    assert Use("call", f"{ASYNC_LLM}.generate", positional=2, keywords=("data_parallel_rank", "request_id")) in uses
    assert Use("call", "vllm.SamplingParams",
               keywords=("detokenize", "logprob_token_ids", "max_tokens", "temperature")) in uses
    assert {Use("member", "vllm.outputs.RequestOutput", "num_cached_tokens"),
            Use("member", "vllm.logprobs.Logprob", "logprob"), Use("member", "vllm.SamplingParams", "skip_clone"),
            Use("member", "vllm.platforms.current_platform", "is_cuda_alike"),
            Use("env", "vllm.envs", "VLLM_CPU_OMP_THREADS_BIND")} <= uses
    engine_args = {k for u in uses if u.kind == "call" and u.owner.endswith("AsyncEngineArgs") for k in u.keywords}
    assert {"max_num_batched_tokens", "max_num_seqs", "block_size", "kv_cache_memory_bytes", "model"} <= engine_args


def test_a_new_use_in_the_code_joins_the_list():
    code = textwrap.dedent("""
        from vllm import SamplingParams
        from vllm.v1.engine.async_llm import AsyncLLM

        class Engine:
            def start(self, args):
                self._engine = AsyncLLM.from_engine_args(args)

            async def read(self):
                params = SamplingParams(new_field=1)
                params.other = 2
                async for output in self._engine.generate_more(1, params, request_id="a"):
                    output.outputs[0].new_member
                return self._engine.stats.total
    """)
    uses = {str(u) for u in file_uses("engine/new.py", code)}
    assert {"call vllm.SamplingParams(new_field=)", "member vllm.SamplingParams.other",
            f"call {ASYNC_LLM}.generate_more(_, _, request_id=)", f"member {ASYNC_LLM}.stats",
            f"unknown {ASYNC_LLM}.stats.total", f"unknown {ASYNC_LLM}.generate_more()[].outputs"} <= uses


# A release's code in miniature: a lazy table, re-exports, dataclass fields through a base, an
# attribute set in __init__, an annotated module attribute, and signatures to check.
MINI_VLLM = {
    "vllm/__init__.py": """
        import typing
        MODULE_ATTRS = {"Params": ".params:Params"}
        if typing.TYPE_CHECKING:
            from vllm.params import Params
        else:
            def __getattr__(name):
                ...
    """,
    "vllm/params.py": """
        import msgspec
        class Params(msgspec.Struct):
            max_tokens: int = 16
            kind: "Kind" = None
    """,
    "vllm/config/__init__.py": "from vllm.config.model import ModelConfig as ModelConfig\n",
    "vllm/config/model.py": """
        from dataclasses import dataclass
        @dataclass
        class Base:
            dtype: str = "auto"
        @dataclass
        class ModelConfig(Base):
            max_model_len: int = 0
            LIMIT: typing.ClassVar[int] = 1
    """,
    "vllm/engine.py": """
        class Engine:
            def __init__(self, config, *, log=False):
                self.model_config = config
            @classmethod
            def from_args(cls, args, usage=None):
                ...
            async def generate(self, prompt, params, request_id, *, rank=None):
                ...
            @property
            def errored(self):
                ...
    """,
    "vllm/platforms/__init__.py": """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from vllm.platforms.interface import Platform
            current_platform: Platform
    """,
    "vllm/platforms/interface.py": """
        class Platform:
            def is_cpu(self):
                ...
    """,
    "vllm/envs.py": 'environment_variables = {"VLLM_ONE": lambda: 1}\n',
}


@pytest.fixture
def mini(tmp_path) -> VllmSource:
    for name, text in MINI_VLLM.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return VllmSource(tmp_path, "mini")


@pytest.mark.parametrize("use", [
    Use("import", "vllm", "Params"), Use("import", "vllm.config", "ModelConfig"),
    Use("call", "vllm.Params", keywords=("kind", "max_tokens")), Use("member", "vllm.Params", "kind"),
    Use("call", "vllm.config.ModelConfig", keywords=("dtype", "max_model_len")),
    Use("member", "vllm.engine.Engine", "model_config"), Use("member", "vllm.engine.Engine", "errored"),
    Use("call", "vllm.engine.Engine.from_args", positional=1),
    Use("call", "vllm.engine.Engine", positional=1, keywords=("log",)),
    Use("call", "vllm.engine.Engine.generate", positional=2, keywords=("rank", "request_id")),
    Use("member", "vllm.platforms.current_platform", "is_cpu"), Use("env", "vllm.envs", "VLLM_ONE"),
])
def test_the_reader_finds_what_a_release_defines(mini, use):
    assert mini.problem(use) is None


@pytest.mark.parametrize(("use", "problem"), [
    (Use("import", "vllm", "Nothing"), "vllm has no Nothing"),
    (Use("call", "vllm.Params", keywords=("stop",)), "vllm.Params has no field stop"),
    (Use("call", "vllm.config.ModelConfig", keywords=("LIMIT",)), "vllm.config.ModelConfig has no field LIMIT"),
    (Use("member", "vllm.engine.Engine", "output_processor"), "vllm.engine.Engine has no output_processor"),
    (Use("call", "vllm.engine.Engine.generate", positional=2, keywords=("priority", "request_id")),
     "vllm.engine.Engine.generate: takes no priority"),
    (Use("call", "vllm.engine.Engine.generate", positional=2), "vllm.engine.Engine.generate: needs request_id"),
    (Use("call", "vllm.engine.Engine.from_args", positional=3),
     "vllm.engine.Engine.from_args: takes 2 positional arguments, given 3"),
    (Use("member", "vllm.platforms.current_platform", "is_tpu"), "vllm.platforms.current_platform has no is_tpu"),
    (Use("env", "vllm.envs", "VLLM_TWO"), "vllm.envs has no VLLM_TWO"),
    (Use("member", "vllm.sampling", "x"), "no vllm.sampling"),
])
def test_the_reader_names_what_a_release_lacks(mini, use, problem):
    assert mini.problem(use) == problem


def test_the_accepted_range_is_pyprojects():
    assert releases.lowest_accepted() == "0.26.0"
    assert releases.accepted(["0.34.0", "0.33.0", "0.26.1", "0.26.0", "0.25.1"]) == ["0.33.0", "0.26.1", "0.26.0"]
    setup = (pathlib.Path(releases.REPO) / "scripts" / "setup.sh").read_text()
    assert '".[gpu,' in setup  # the GPU machines' install takes the extra, so the range
