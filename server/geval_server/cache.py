"""Where converted models and generated evaluation steps are kept between runs, and how
they are written there: several servers starting at once on one empty cache each write
their own copy under a name no other process uses, then rename it into place, so none
sees another's half-written file or removes another's work (with one shared temporary
name, two of three servers converting the embedded judge at once failed)."""

import os
import pathlib
import shutil
import tempfile


def cache_dir() -> pathlib.Path:
    root = os.environ.get("GEVAL_REWARD_CACHE") or pathlib.Path.home() / ".cache" / "geval-reward"
    return pathlib.Path(root)


def write_text(path: pathlib.Path, text: str) -> None:
    """Writes `path` whole or not at all: a temporary file of this process beside it, renamed
    over it (atomic; a copy another process renamed first is replaced by the same content)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        pathlib.Path(temporary).unlink(missing_ok=True)
        raise


def staging_dir(target: pathlib.Path) -> pathlib.Path:
    """A new empty folder beside `target`, this process's alone, to build it in (publish_dir)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return pathlib.Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial"))


def publish_dir(staged: pathlib.Path, target: pathlib.Path) -> None:
    """Renames the built folder to `target` (atomic). Where another process published it
    first, its copy stays and this one is removed: a folder is never renamed over another."""
    try:
        staged.rename(target)
    except OSError:
        shutil.rmtree(staged, ignore_errors=True)
        if not target.is_dir():
            raise
