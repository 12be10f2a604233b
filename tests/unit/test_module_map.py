"""docs/development.md maps every module of the server, the client and the audit: a module
added without a line there fails here."""

import pathlib
import re

ROOT = pathlib.Path(__file__).parents[2]
PACKAGES = [ROOT / "server" / "geval_server", ROOT / "client" / "geval_client", ROOT / "client" / "geval_audit",
            ROOT / "client" / "geval_reward"]
MAX_TOP_LEVEL = 12


def _layout() -> str:
    text = (ROOT / "docs" / "development.md").read_text()
    return re.search(r"## Layout.*?```\n(.*?)```", text, re.S).group(1)


def _modules():
    for package in PACKAGES:
        for path in package.rglob("*.py"):
            if path.name != "__init__.py" and "pb" not in path.relative_to(package).parts:
                yield package, path


def test_every_module_and_folder_is_in_the_map():
    layout = _layout()
    words = set(re.findall(r"[\w./]+", layout))
    names = {word.rstrip(",/") for word in words} | {word.split("/")[-1] for word in words}
    missing = [str(path.relative_to(ROOT)) for package, path in _modules()
               if path.name not in names
               or any(f"{folder}/" not in layout for folder in path.relative_to(package).parts[:-1])]
    assert not missing, f"not in docs/development.md's layout: {missing}"


def test_the_server_package_keeps_its_top_level_small():
    top = [path.name for path in (ROOT / "server" / "geval_server").glob("*.py") if path.name != "__init__.py"]
    assert len(top) <= MAX_TOP_LEVEL, f"{len(top)} modules at the top of geval_server: {sorted(top)}"
