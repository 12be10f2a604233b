"""One vLLM version's Python files, read with `ast` and never imported: does a name exist, does a
class have a member, does a callable take the arguments the server passes.

A name is followed through vLLM's re-exports (`from .model import ModelConfig`), its lazily loaded
attributes (vllm/__init__.py's `MODULE_ATTRS`) and annotated module attributes
(`current_platform: Platform`). A class's members are what its body defines and what its methods
set on `self`, through its vLLM base classes; its constructor's arguments are its `__init__`'s or,
without one (a dataclass, msgspec struct or TypedDict), its annotated fields.
"""

from __future__ import annotations

import ast
import functools
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass

from tests.vllm_versions.uses import Use

Definition = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.AnnAssign | ast.Assign


@dataclass(frozen=True)
class Found:
    module: str  # the module that defines it
    node: Definition | None  # None: `module` itself
    owner: ast.ClassDef | None = None  # a method's or attribute's class


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's or class's statements, those under `if`, `try` and `with` included."""
    for statement in body:
        yield statement
        if isinstance(statement, (ast.If, ast.Try, ast.With)):
            yield from _statements(statement.body)
            yield from _statements(getattr(statement, "orelse", []))
            for handler in getattr(statement, "handlers", []):
                yield from _statements(handler.body)
            yield from _statements(getattr(statement, "finalbody", []))


def _targets(statement: ast.stmt) -> list[str]:
    if isinstance(statement, ast.Assign):
        return [n.id for t in statement.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return [statement.target.id]
    return []


class VllmSource:
    """The .py files of one vLLM version under `root` (which holds the `vllm` folder)."""

    def __init__(self, root: pathlib.Path, version: str) -> None:
        self.root, self.version = root, version

    @functools.cache  # noqa: B019 (one instance per version, kept for the session)
    def module(self, name: str) -> ast.Module | None:
        base = self.root.joinpath(*name.split("."))
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return ast.parse(path.read_text(encoding="utf-8"), str(path))
        return None

    def _is_package(self, name: str) -> bool:
        return self.root.joinpath(*name.split("."), "__init__.py").is_file()

    def find(self, dotted: str) -> Found | None:
        """The definition `dotted` names: a module, then attributes of it, class members last."""
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            if self.module(module) is not None:
                found: Found | None = Found(module, None)
                for attr in parts[cut:]:
                    found = self.attribute(found, attr)
                    if found is None:
                        return None
                return found
        return None

    def attribute(self, found: Found, name: str) -> Found | None:
        if found.node is None:
            return self.binding(found.module, name)
        cls = self.class_of(found)
        return None if cls is None else self.member(cls, name)

    @functools.cache  # noqa: B019
    def binding(self, module: str, name: str, depth: int = 0) -> Found | None:
        """What `name` is bound to at the top of `module`, followed through imports."""
        tree = self.module(module)
        if tree is None or depth > 20:
            return None
        lazy = None
        for statement in _statements(tree.body):
            if isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == name:
                return Found(module, statement)
            if name in _targets(statement):
                return Found(module, statement)
            if isinstance(statement, ast.ImportFrom):
                for alias in statement.names:
                    if (alias.asname or alias.name) == name:
                        source = self._absolute(module, statement)
                        return (self.binding(source, alias.name, depth + 1)
                                or (Found(f"{source}.{alias.name}", None)
                                    if self.module(f"{source}.{alias.name}") is not None else None))
            if isinstance(statement, ast.Import):
                for alias in statement.names:
                    if alias.asname == name:
                        return Found(alias.name, None)
            if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Dict):
                lazy = lazy or self._lazy(module, statement.value, name)
        if lazy is not None:
            return self.binding(*lazy, depth + 1)
        return Found(f"{module}.{name}", None) if self.module(f"{module}.{name}") is not None else None

    def _absolute(self, module: str, statement: ast.ImportFrom) -> str:
        if not statement.level:
            return statement.module or ""
        package = module.split(".") if self._is_package(module) else module.split(".")[:-1]
        base = package[: len(package) - statement.level + 1]
        return ".".join(base + ([statement.module] if statement.module else []))

    def _lazy(self, module: str, table: ast.Dict, name: str) -> tuple[str, str] | None:
        """A module `__getattr__`'s table entry: {"Name": ".module:Name"}."""
        for key, value in zip(table.keys, table.values):
            if isinstance(key, ast.Constant) and key.value == name and isinstance(value, ast.Constant) \
                    and isinstance(value.value, str) and ":" in value.value:
                target, attr = value.value.split(":")
                if target.startswith("."):
                    target = (module if self._is_package(module) else module.rsplit(".", 1)[0]) + target
                return target, attr
        return None

    def class_of(self, found: Found) -> Found | None:
        """The class a definition is, or is an instance of (a module attribute annotated with its class)."""
        if isinstance(found.node, ast.ClassDef):
            return found
        if isinstance(found.node, ast.AnnAssign):
            return self._resolve_expr(found.module, found.node.annotation)
        return None

    def _resolve_expr(self, module: str, expr: ast.expr) -> Found | None:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            expr = ast.parse(expr.value, mode="eval").body
        if isinstance(expr, ast.Name):
            found = self.binding(module, expr.id)
        elif isinstance(expr, ast.Attribute):
            owner = self._resolve_expr(module, expr.value)
            found = None if owner is None else self.attribute(owner, expr.attr)
        elif isinstance(expr, ast.Subscript):  # Generic[T], list[...]: the class subscripted
            found = self._resolve_expr(module, expr.value)
        else:
            found = None
        return found if found is not None and isinstance(found.node, ast.ClassDef) else None

    def bases(self, cls: Found) -> list[Found]:
        """The class's base classes that vLLM defines, nearest first (mro-like, depth first)."""
        found = []
        for base in cls.node.bases:
            resolved = self._resolve_expr(cls.module, base)
            if resolved is not None:
                found += [resolved, *self.bases(resolved)]
        return found

    def member(self, cls: Found, name: str) -> Found | None:
        """The definition of attribute `name` of the class or its instances."""
        for klass in [cls, *self.bases(cls)]:
            for statement in klass.node.body:
                if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                        and statement.name == name:
                    return Found(klass.module, statement, klass.node)
                if name in _targets(statement):
                    return Found(klass.module, statement, klass.node)
            for method in klass.node.body:
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for node in ast.walk(method):
                        target = node.target if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else None
                        targets = node.targets if isinstance(node, ast.Assign) else [target] if target else []
                        for t in targets:
                            if isinstance(t, ast.Attribute) and t.attr == name and isinstance(t.value, ast.Name) \
                                    and t.value.id == "self":
                                return Found(klass.module, node, klass.node)
        return None

    def fields(self, cls: Found) -> set[str]:
        """The annotated fields of a class and its vLLM bases (ClassVar excepted)."""
        names = set()
        for klass in [cls, *self.bases(cls)]:
            for statement in klass.node.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) \
                        and "ClassVar" not in ast.unparse(statement.annotation):
                    names.add(statement.target.id)
        return names

    # ---- the checks ----------------------------------------------------------------------

    def problem(self, use: Use) -> str | None:
        """Why `use` fails in this version; None where it holds."""
        if use.kind == "import":
            return None if self.binding(use.owner, use.name) else f"{use.owner} has no {use.name}"
        if use.kind == "env":
            return None if use.name in self.environment_variables() else f"vllm.envs has no {use.name}"
        owner = self.find(use.owner)
        if owner is None:
            return f"no {use.owner}"
        if use.kind == "member":
            cls = self.class_of(owner)
            if cls is None:
                return f"{use.owner} is not a class or an instance of one"
            return None if self.member(cls, use.name) else f"{use.owner} has no {use.name}"
        if use.kind == "call":
            return self._call_problem(use, owner)
        return f"{use}: a use no table types"

    def _call_problem(self, use: Use, target: Found) -> str | None:
        if isinstance(target.node, ast.ClassDef):
            init = self.member(target, "__init__")
            if init is None or not isinstance(init.node, ast.FunctionDef):
                fields = self.fields(target)
                missing = [k for k in use.keywords if k not in fields]
                return f"{use.owner} has no field {', '.join(missing)}" if missing else None
            return self._signature_problem(use, init.node, method=True)
        if isinstance(target.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = {ast.unparse(d) for d in target.node.decorator_list}
            return self._signature_problem(use, target.node, method=target.owner is not None
                                           and "staticmethod" not in decorators)
        return f"{use.owner} is not callable here"

    @staticmethod
    def _signature_problem(use: Use, function: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> str | None:
        args = function.args
        positional = [a.arg for a in args.posonlyargs + args.args][1 if method else 0:]
        named = positional[len(args.posonlyargs) - (1 if method and args.posonlyargs else 0):] \
            + [a.arg for a in args.kwonlyargs]
        problems = []
        if use.positional > len(positional) and args.vararg is None:
            problems.append(f"takes {len(positional)} positional arguments, given {use.positional}")
        unknown = [k for k in use.keywords if k not in named]
        if unknown and args.kwarg is None:
            problems.append(f"takes no {', '.join(unknown)}")
        required = positional[use.positional: len(positional) - len(args.defaults)]
        required += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
        missing = [r for r in required if r not in use.keywords]
        if missing:
            problems.append(f"needs {', '.join(missing)}")
        return f"{use.owner}: {'; '.join(problems)}" if problems else None

    @functools.cache  # noqa: B019
    def environment_variables(self) -> set[str]:
        """The keys of vllm/envs.py's `environment_variables`: every variable vLLM reads."""
        found = self.binding("vllm.envs", "environment_variables")
        if found is None or not isinstance(found.node.value, ast.Dict):
            return set()
        return {key.value for key in found.node.value.keys if isinstance(key, ast.Constant)}

    def problems(self, uses: list[Use]) -> list[str]:
        return [f"vLLM {self.version}: {problem}" for use in uses if (problem := self.problem(use))]
