"""docs/development.md maps every module of the server, the client and the audit at its place: a
module added, moved or removed without its line there fails here; so does a client folder that
outgrows a dozen modules, or a client import that runs against the map's order."""

import ast
import pathlib
import re

from tests.unit.test_documented_paths import ENTRY_POINTS

ROOT = pathlib.Path(__file__).parents[2]
CLIENT = ROOT / "client" / "geval_client"
PACKAGES = [ROOT / "server" / "geval_server", CLIENT, ROOT / "client" / "geval_audit", ROOT / "client" / "geval_reward"]
MAX_TOP_LEVEL = 12
# The client's rooms in import order: each imports only from its own room and those after it.
CLIENT_ROOMS = ["trainers", "trainers.shared", "client", "fleet"]


def _layout() -> str:
    text = (ROOT / "docs" / "development.md").read_text()
    return re.search(r"## Layout.*?```\n(.*?)```", text, re.S).group(1)


def _mapped() -> set[str]:
    """Every path the map names (folders end in `/`), each line's names inside the folders above
    it: a line indented two spaces deeper than a folder's is in that folder."""
    folders: list[str] = []
    paths = set()
    for line in _layout().splitlines():
        depth = (len(line) - len(line.lstrip())) // 2
        parent = folders[depth - 1] if depth else ""
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        for name in re.split(r",\s*|\s+", names):
            paths.add(parent + name)
            if name.endswith("/"):
                folders[depth:] = [parent + name]
    return paths


def _modules():
    for package in PACKAGES:
        for path in package.rglob("*.py"):
            if path.name != "__init__.py" and "pb" not in path.relative_to(package).parts:
                yield path


def test_every_module_is_in_the_map_at_its_place():
    mapped = _mapped()
    missing = [str(path.relative_to(ROOT)) for path in _modules() if str(path.relative_to(ROOT)) not in mapped]
    assert not missing, f"not in docs/development.md's layout, or at another place there: {missing}"


def test_the_map_names_no_module_or_folder_that_is_gone():
    inside = tuple(f"{package.relative_to(ROOT)}/" for package in PACKAGES)
    gone = sorted(path for path in _mapped() if path.startswith(inside) and not (ROOT / path).exists())
    assert not gone, f"docs/development.md's layout names what is not there: {gone}"


def test_the_server_package_keeps_its_top_level_small():
    top = [path.name for path in (ROOT / "server" / "geval_server").glob("*.py") if path.name != "__init__.py"]
    assert len(top) <= MAX_TOP_LEVEL, f"{len(top)} modules at the top of geval_server: {sorted(top)}"


def test_no_client_folder_holds_more_than_a_dozen_modules():
    """The documented entry points at the top only re-export (test_documented_paths.py), so they
    are not counted against the top's dozen."""
    entry_files = {CLIENT / f"{module.split('.')[-1]}.py" for module in ENTRY_POINTS}
    for folder in [CLIENT, *(path for path in CLIENT.rglob("*") if path.is_dir() and path.name != "__pycache__")]:
        if folder.name == "pb":
            continue
        modules = sorted(p.name for p in folder.glob("*.py") if p.name != "__init__.py" and p not in entry_files)
        assert len(modules) <= MAX_TOP_LEVEL, f"{len(modules)} modules in {folder.relative_to(ROOT)}: {modules}"


def _room(module: str) -> int:
    """Where a client module (dotted, inside geval_client) stands in the import order: the package
    and the entry points first, then CLIENT_ROOMS, then the wire's modules (transport, types, pb...)."""
    if module in ("", *(entry.removeprefix("geval_client.") for entry in ENTRY_POINTS)):
        return 0
    ranks = [rank for rank, room in enumerate(CLIENT_ROOMS, 1) if module == room or module.startswith(f"{room}.")]
    return max(ranks, default=len(CLIENT_ROOMS) + 1)


def _client_imports():
    """(importer, imported) for every import inside geval_client, both dotted inside it."""
    for path in CLIENT.rglob("*.py"):
        if "pb" in path.relative_to(CLIENT).parts:
            continue
        parts = list(path.relative_to(CLIENT).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = parts[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - node.level + 1]
                yield module, ".".join(base + ([node.module] if node.module else []))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("geval_client"):
                yield module, node.module.removeprefix("geval_client").lstrip(".")


def test_the_client_imports_run_one_way():
    against = [f"{importer or 'geval_client'} imports {imported}" for importer, imported in _client_imports()
               if _room(imported) < _room(importer)]
    assert not against, f"against docs/development.md's order ({CLIENT_ROOMS} after the entry points): {against}"
