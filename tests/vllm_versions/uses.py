"""What the server uses of vLLM, read from its code: the one list each vLLM version is checked against.

Every `from vllm... import` in server/ is a use; so is every attribute read or written, and every
call made, on what those names give: `SamplingParams(logprob_token_ids=...)` is a call with that
keyword, `self._engine.generate(prompt, params, request_id=...)` a member of AsyncLLM and a call,
`output.outputs[0].logprobs` a member of RequestOutput, then of CompletionOutput. The code cannot
show every type, so two tables name them: HELD, the names that hold a vLLM object the code got
from elsewhere (a parameter), and THROUGH, the vLLM class an attribute, an element or a call's
result holds. An attribute reached through a type neither table names is an `unknown` use, which
tests/unit/test_vllm_uses.py refuses: a new use of vLLM is either checked or fails there. The
engine arguments and vLLM environment variables come from engine/defaults.py, run for every
platform.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
from dataclasses import KW_ONLY, dataclass

from geval_server.engine.defaults import (
    CPU,
    GPU,
    OTHER,
    REWARD_MODEL_MEMORY_FRACTION,
    classifier_defaults,
    engine_defaults,
    split_memory,
)
from geval_server.engine.dtype import DtypeChoice

SERVER = pathlib.Path(__file__).resolve().parents[2] / "server" / "geval_server"
ENGINE_ARGS = "vllm.engine.arg_utils.AsyncEngineArgs"

# Names that hold a vLLM object the code cannot show the origin of, per file under server/geval_server
# (`f()`: what calling f returns).
HELD = {
    "engine/vllm_engine.py": {"params": "vllm.SamplingParams", "self._final_output()": "vllm.outputs.RequestOutput"},
    "engine/data_parallel.py": {"parallel_config": "vllm.config.ParallelConfig"},
    # its AsyncLLM is started by the driver it extends (vllm_engine.AsyncLLMDriver)
    "engine/vllm_classifier.py": {"_raw_logits()": "vllm.PoolingParams",
                                  "self._engine": "vllm.v1.engine.async_llm.AsyncLLM"},
}
# The class an attribute of a vLLM object holds (`[]`: an element of it, `()`: what calling it returns);
# None: not a vLLM object, its members are not vLLM's to check.
THROUGH = {
    "vllm.v1.engine.async_llm.AsyncLLM.from_engine_args()": "vllm.v1.engine.async_llm.AsyncLLM",
    "vllm.v1.engine.async_llm.AsyncLLM.generate()[]": "vllm.outputs.RequestOutput",
    "vllm.v1.engine.async_llm.AsyncLLM.encode()[]": "vllm.outputs.PoolingRequestOutput",
    "vllm.outputs.PoolingRequestOutput.outputs": "vllm.outputs.PoolingOutput",
    "vllm.outputs.PoolingOutput.data": None,  # a torch tensor
    "vllm.v1.engine.async_llm.AsyncLLM.model_config": "vllm.config.ModelConfig",
    "vllm.v1.engine.async_llm.AsyncLLM.vllm_config": "vllm.config.VllmConfig",
    "vllm.v1.engine.async_llm.AsyncLLM.output_processor": "vllm.v1.engine.output_processor.OutputProcessor",
    "vllm.config.VllmConfig.cache_config": "vllm.config.CacheConfig",
    "vllm.config.VllmConfig.parallel_config": "vllm.config.ParallelConfig",
    "vllm.outputs.RequestOutput.outputs[]": "vllm.outputs.CompletionOutput",
    "vllm.outputs.RequestOutput.prompt_logprobs[][]": "vllm.logprobs.Logprob",
    "vllm.outputs.CompletionOutput.logprobs[][]": "vllm.logprobs.Logprob",
    "vllm.v1.metrics.prometheus.get_prometheus_registry()": None,  # prometheus_client's registry
}
# vLLM classes built on a standard-library class: members of that class are the library's.
STDLIB_BASES = {"vllm.utils.argparse_utils.FlexibleArgumentParser": argparse.ArgumentParser}


@dataclass(frozen=True, order=True)
class Use:
    """One thing the server needs of vLLM. kind: `import` (owner a module, name a name in it),
    `member` (owner a class, name an attribute of its instances or of it), `call` (owner a class
    or function, or class.method: it must take `positional` arguments and `keywords`), `env` (name
    a vLLM environment variable), `unknown` (owner a path no table types: refused)."""

    kind: str
    owner: str
    name: str = ""
    _: KW_ONLY
    positional: int = 0
    keywords: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == "call":
            return f"call {self.owner}({', '.join(['_'] * self.positional + [f'{k}=' for k in self.keywords])})"
        return f"{self.kind} {self.owner}{'.' + self.name if self.name else ''}"


@dataclass(frozen=True)
class Ref:
    """What an expression holds: an instance of the vLLM class `path` (a class object where `cls`),
    or, `opaque`, something reached by `path` that no table types."""

    path: str
    cls: bool = False
    opaque: bool = False


class _FileUses(ast.NodeVisitor):
    """The uses of one server file, its statements visited in order so names bound get their type."""

    def __init__(self, relative: str, tree: ast.Module, attributes: dict[str, Ref]) -> None:
        """attributes: what `self.x` holds, wherever in the file it is set (a first pass finds them)."""
        self.relative = relative
        self.held = HELD.get(relative, {})
        self.uses: set[Use] = set()
        self.consulted: set[str] = set()  # the HELD and THROUGH entries that typed something
        self.imported: dict[str, str] = {}  # local name -> the vLLM path it was imported as
        self.names: dict[str, Ref] = dict(attributes)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "vllm":
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    self.uses.add(Use("import", node.module, alias.name))
            elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "vllm" for a in node.names):
                raise ValueError(f"{relative}: `import vllm...`: import the names used, so each is checked")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.names = self.names, {k: v for k, v in self.names.items() if k.startswith("self.")}
        self.generic_visit(node)
        self.names = {**outer, **{k: v for k, v in self.names.items() if k.startswith("self.")}}

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        ref = self.ref(node.value)
        for target in node.targets:
            self.bind(target, ref)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.bind(node.target, self.ref(node.value))

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.bind(node.target, self.element(self.ref(node.iter)))
        for statement in [*node.body, *node.orelse]:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def generic_visit(self, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.ref(child)
            else:
                self.visit(child)

    def bind(self, target: ast.expr, ref: Ref | None) -> None:
        key = ast.unparse(target)
        if isinstance(target, ast.Name) or key.startswith("self.") and isinstance(target, ast.Attribute):
            if ref is not None:
                self.names[key] = ref
            elif not key.startswith("self."):  # `self._engine = None` at shutdown: its type stays
                self.names.pop(key, None)
        else:
            self.ref(target)  # a store into an attribute of a vLLM object is a use of it

    # ---- expressions --------------------------------------------------------------------

    def ref(self, node: ast.expr) -> Ref | None:
        """What `node` holds, recording the uses on the way; None where it holds nothing of vLLM's."""
        if isinstance(node, ast.Await):
            return self.ref(node.value)
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute):
            key = ast.unparse(node)
            if key in self.names or key in self.held:
                return self.name(key)
            return self.attribute(self.ref(node.value), node.attr)
        if isinstance(node, ast.Subscript):
            self.ref(node.slice)
            return self.element(self.ref(node.value))
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            for generator in node.generators:  # bound before the element that reads them
                self.bind(generator.target, self.element(self.ref(generator.iter)))
                for condition in generator.ifs:
                    self.ref(condition)
            for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
                self.ref(part)
            return None
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.ref(child)
            elif isinstance(child, ast.keyword):
                self.ref(child.value)
        return None

    def name(self, key: str) -> Ref | None:
        if key in self.names:
            return self.names[key]
        if key in self.held:
            self.consulted.add(f"{self.relative}:{key}")
            return Ref(self.held[key])
        if key in self.imported:
            return Ref(self.imported[key], cls=True)
        return None

    def attribute(self, owner: Ref | None, attr: str) -> Ref | None:
        if owner is None:  # `_vllm().SamplingParams`: a name imported from vLLM, handed on
            return Ref(self.imported[attr], cls=True) if attr in self.imported else None
        if owner.opaque:
            self.uses.add(Use("unknown", f"{owner.path}.{attr}"))
            return None
        base = STDLIB_BASES.get(owner.path)
        if base is not None and hasattr(base, attr):
            return None
        self.uses.add(Use("member", owner.path, attr))
        return self.through(f"{owner.path}.{attr}")

    def element(self, owner: Ref | None) -> Ref | None:
        return None if owner is None else self.through(f"{owner.path}[]")

    def call(self, node: ast.Call) -> Ref | None:
        func = node.func
        held = self.held.get(f"{ast.unparse(func)}()")
        if held:
            self.consulted.add(f"{self.relative}:{ast.unparse(func)}()")
        callee = None if held else self.ref(func)
        for argument in node.args:
            self.ref(argument.value if isinstance(argument, ast.Starred) else argument)
        for keyword in node.keywords:
            self.ref(keyword.value)
        if held:
            return Ref(held)
        if callee is None:
            return None
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise ValueError(f"{ast.unparse(node)}: *args into vLLM: write the arguments out, so each is checked")
        if callee.opaque and ("[]" in callee.path or "()" in callee.path):
            self.uses.add(Use("unknown", f"{callee.path}()"))
            return None
        keywords = tuple(sorted(k.arg for k in node.keywords if k.arg is not None))
        self.uses.add(Use("call", callee.path, positional=len(node.args), keywords=keywords))
        if callee.cls and f"{callee.path}()" not in THROUGH:
            return Ref(callee.path)  # a class called: an instance of it
        return self.through(f"{callee.path}()")

    def through(self, path: str) -> Ref | None:
        if path in THROUGH:
            self.consulted.add(path)
            held = THROUGH[path]
            return None if held is None else Ref(held)
        return Ref(path, opaque=True)


def file_uses(relative: str, text: str, consulted: set[str] | None = None) -> set[Use]:
    """The uses of one file's text; `consulted` collects the table entries that typed something."""
    tree = ast.parse(text)
    first = _FileUses(relative, tree, {})
    first.visit(tree)
    visitor = _FileUses(relative, tree, {k: v for k, v in first.names.items() if k.startswith("self.")})
    visitor.visit(tree)
    if consulted is not None:
        consulted |= visitor.consulted
    return visitor.uses


def vllm_files() -> list[pathlib.Path]:
    """The server's files that name vLLM's code (import from it, or hold its objects: HELD)."""
    return sorted(path for path in SERVER.rglob("*.py")
                  if "from vllm" in path.read_text(encoding="utf-8")
                  or path.relative_to(SERVER).as_posix() in HELD)


def engine_setting_uses() -> set[Use]:
    """AsyncEngineArgs fields and vLLM environment variables our defaults set, on every platform."""
    uses: set[Use] = set()
    for platform in (CPU, GPU, OTHER):
        chosen = engine_defaults({}, platform, lambda: DtypeChoice("float32", "any"))
        uses.add(Use("call", ENGINE_ARGS, keywords=tuple(sorted(chosen.settings))))
        uses.update(Use("env", "vllm.envs", name) for name in chosen.environment)
        _, engines = split_memory({}, platform, {"--reward-model": REWARD_MODEL_MEMORY_FRACTION}, judge=True)
        classifier = classifier_defaults(engines["--reward-model"], platform, lambda: DtypeChoice("float32", "any"))
        uses.add(Use("call", ENGINE_ARGS, keywords=tuple(sorted(classifier.settings))))
    return uses


def env_names(path: pathlib.Path) -> set[Use]:
    """vLLM environment variables the file names (`VLLM_API_KEY`, read as `vllm serve` reads it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {Use("env", "vllm.envs", node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.startswith("VLLM_") and node.value.replace("_", "").isalnum() and node.value.isupper()}


def server_uses(consulted: set[str] | None = None) -> list[Use]:
    """Everything the server uses of vLLM, sorted; `consulted` collects the table entries used."""
    uses = engine_setting_uses()
    for path in vllm_files():
        uses |= file_uses(path.relative_to(SERVER).as_posix(), path.read_text(encoding="utf-8"), consulted)
    for path in SERVER.rglob("*.py"):
        uses |= env_names(path)
    return sorted(uses)


if __name__ == "__main__":
    for use in server_uses():
        print(use)
