"""The suite's fence around the user's run stores: whatever the environment holds, no test reaches them.

`isolate()` runs once, when tests/conftest.py is imported, before any test module imports the lab:
- it notes the stores a user may have: $ATTNCORE_CACHE_DIR as the shell gave it, and the repository's cache/
  (the store when no variable is set);
- it points ATTNCORE_CACHE_DIR at an empty store in a folder of the session's own, so every test, its
  subprocesses (CLI runs, `streamlit run`, loky and Dask workers) and any `monkeypatch.undo()` fall back to
  that store, never to the user's;
- it drops what would make a test read the user's settings: the store key (ATTNCORE_CACHE_KEY), every
  operator setting (ATTNLAB_*, but the test knobs below), Streamlit's own settings (STREAMLIT_*), and it
  points STREAMLIT_SECRETS_FILES (honoured by Streamlit and by lab.limits) at a file of the session's;
- it installs an audit hook (sys.addaudithook) that refuses, in the test process, every open, listing,
  creation, rename or deletion of a path inside a user store, and records it, so a test that swallows the
  error still fails (the `_store_fence` fixture in conftest.py). Subprocesses are covered by the environment,
  and in CI by `.ci/run`'s canary store, compared byte for byte after the suite.
"""

from __future__ import annotations

import getpass
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORE_VAR = "ATTNCORE_CACHE_DIR"
KEY_VAR = "ATTNCORE_CACHE_KEY"
TEST_KNOBS = {"ATTNLAB_TEST_PORTS", "ATTNLAB_BROWSER_STEPS"}  # the suite's own settings, not the lab's
# audit events that name a path as their first (and, for renames and copies, second) argument
ONE_PATH = {"open", "os.listdir", "os.scandir", "os.mkdir", "os.remove", "os.rmdir", "os.truncate", "os.chmod"}
ONE_PATH |= {"os.chown", "os.utime", "shutil.rmtree", "os.chdir", "os.mkfifo", "os.mknod"}
TWO_PATHS = {"os.rename", "shutil.copyfile", "shutil.copytree", "shutil.move", "os.link", "os.symlink"}


class StoreGuardError(RuntimeError):
    """A test reached a user's run store."""


user_stores: list[str] = []  # absolute paths, each with and without symbolic links resolved
allowed: list[str] = []  # the session's own folders: never fenced, even inside a user store (one at /tmp, say)
touched: list[str] = []  # what was refused, in order: "event path"
session_dir: Path | None = None
active = False  # from isolate() to the session's end (pytest tidies its folders at exit, beside a user store)


def _variants(path: str | Path) -> set[str]:
    absolute = os.path.abspath(os.fspath(path))
    return {absolute, os.path.realpath(absolute)}


def _store_of(path: str) -> str | None:
    """The user store holding `path`, or None; a folder of the session's own inside that store (the session's
    folder where a user store holds /tmp, say) does not count, but a user store inside the session's folders
    (a test's canary under pytest's temporary folder) does."""
    for root in user_stores:
        if path == root or path.startswith(root + os.sep):
            own = [a for a in allowed if a.startswith(root + os.sep)]
            if not any(path == a or path.startswith(a + os.sep) for a in own):
                return root
    return None


def is_user_store_path(path) -> bool:
    """True if `path` (str, bytes or PathLike; not a file descriptor) lies in a user store."""
    if isinstance(path, int):
        return False
    try:
        raw = os.fsdecode(os.fspath(path))
    except TypeError:
        return False
    if os.sep not in raw:
        return False  # a bare name: relative to a folder descriptor (rmtree's walk) as often as to the cwd
    absolute = os.path.abspath(raw)
    if _store_of(absolute):
        return True
    # a link or a relative detour into a store shows only when resolved; resolve only what could be one
    return (os.path.islink(absolute) or ".." in raw) and _store_of(os.path.realpath(absolute)) is not None


def _audit(event: str, args: tuple) -> None:
    if not active:
        return
    if event in ONE_PATH:
        paths = args[:1]
    elif event in TWO_PATHS:
        paths = args[:2]
    else:
        return
    for path in paths:
        if is_user_store_path(path):
            entry = f"{event} {os.fsdecode(os.fspath(path))}"
            touched.append(entry)
            raise StoreGuardError(f"a test reached a user's run store: {entry}")


def isolate() -> Path:
    """Fence the user's stores off and give the session a store of its own; returns that store. Idempotent."""
    global session_dir, active
    if session_dir is not None:
        return Path(os.environ[STORE_VAR])
    stores = {ROOT / "cache"}
    if os.environ.get(STORE_VAR):
        stores.add(Path(os.environ[STORE_VAR]))
    for store in stores:
        user_stores.extend(sorted(_variants(store)))
    session_dir = Path(tempfile.mkdtemp(prefix="attnlab-tests-"))
    # the session's folder and pytest's temporary folders are its own, even inside a user store (one at /tmp)
    for own in (session_dir, Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}"):
        allowed.extend(sorted(_variants(own)))
    for name in list(os.environ):
        if name == KEY_VAR or name.startswith("STREAMLIT_") or (name.startswith("ATTNLAB_") and name not in TEST_KNOBS):
            del os.environ[name]
    os.environ[STORE_VAR] = str(session_dir / "store")
    os.environ["ATTNLAB_HOSTED"] = "1"  # the caps tested as a public server has them, display or not; tests of a
    # local server set 0 themselves
    os.environ["STREAMLIT_SECRETS_FILES"] = str(session_dir / "secrets.toml")  # absent: no secrets
    sys.addaudithook(_audit)
    active = True
    return session_dir / "store"


def end_session() -> None:
    """Stop fencing (audit hooks cannot be removed) and delete the session's folder."""
    global active
    active = False
    if session_dir is not None:
        shutil.rmtree(session_dir, ignore_errors=True)
