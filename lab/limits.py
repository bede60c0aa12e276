"""The operator's limits read one way by every process (the pages, their training workers, the command line).

A setting `name` is ATTNLAB_<NAME> in the environment, else `name` under [limits] in .streamlit/secrets.toml,
else its default. The secrets files are Streamlit's defaults (~/.streamlit/secrets.toml, then the working
folder's .streamlit/secrets.toml, the later one winning) or those STREAMLIT_SECRETS_FILES names, read with
tomllib and re-read when they change.
The dashboard's pages pass Streamlit's own st.secrets (ui.limits to lab.jobs.limits), which reads the same files.
A page declares the caps only it reads where it lives (`declare(Cap(...))` in the module that does its work), and
lab.jobs.limits reads every declared cap by name like the central ones.
Standard library only: the bottom of lab, importable by the store and by ui.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ENV_PREFIX = "ATTNLAB_"
SECTION = "limits"
MAX_SECRETS_BYTES = 2**20  # a secrets file is a few lines
_files: dict[Path, tuple[tuple, dict]] = {}  # path -> (file identity, its [limits] table)


def env_var(name: str) -> str:
    """The environment variable of a setting: max_store_mb -> ATTNLAB_MAX_STORE_MB."""
    return ENV_PREFIX + name.upper()


SECRETS_FILES_VAR = "STREAMLIT_SECRETS_FILES"  # Streamlit's own setting (secrets.files), paths apart by spaces


def secrets_files(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The secrets files, in the order Streamlit merges them (the later one wins): those STREAMLIT_SECRETS_FILES
    names (as `streamlit run` takes it), else Streamlit's defaults."""
    named = (os.environ if environ is None else environ).get(SECRETS_FILES_VAR, "").split()
    if named:
        return [Path(p) for p in named]
    return [Path.home() / ".streamlit" / "secrets.toml", Path.cwd() / ".streamlit" / "secrets.toml"]


def _limits_table(path: Path) -> dict:
    """The [limits] table of one secrets file ({} when absent, unreadable, too large or not TOML)."""
    try:
        st = path.stat()
    except OSError:
        return {}
    ident = (st.st_ino, st.st_mtime_ns, st.st_size)
    cached = _files.get(path)
    if cached is not None and cached[0] == ident:
        return cached[1]
    table = {}
    try:
        if st.st_size <= MAX_SECRETS_BYTES:
            section = tomllib.loads(path.read_text()).get(SECTION)
            table = dict(section) if isinstance(section, dict) else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        pass
    _files[path] = (ident, table)
    return table


def file_secrets() -> dict:
    """The [limits] settings of the secrets files, merged as Streamlit merges them."""
    merged: dict = {}
    for path in secrets_files():
        merged |= _limits_table(path)
    return merged


def raw_setting(name: str, environ: Mapping[str, str] | None = None, secrets: Mapping | None = None):
    """The unparsed value of setting `name`: the environment's, else the secrets' (the files', if not given), else
    None. Each caller parses it with its own rule and default (lab.jobs.limits.parse_limits,
    lab.store.max_store_bytes)."""
    environ = os.environ if environ is None else environ
    secrets = file_secrets() if secrets is None else secrets
    return environ.get(env_var(name), secrets.get(name))


def source(name: str, environ: Mapping[str, str] | None = None) -> str:
    """Where raw_setting found `name`, for a message: 'ATTNLAB_MAX_STORE_MB' or 'max_store_mb in secrets.toml'."""
    environ = os.environ if environ is None else environ
    return env_var(name) if env_var(name) in environ else f"{name} in .streamlit/secrets.toml"


def parse_store_mb(raw) -> float:
    """A store size in MB from text or a number: finite, above 0 and below 10^9; ValueError otherwise."""
    if isinstance(raw, bool):
        raise ValueError(raw)
    try:
        mb = float(raw)
    except (TypeError, ValueError):
        raise ValueError(raw) from None
    if not (0 < mb < 1e9):
        raise ValueError(raw)
    return mb


@dataclass(frozen=True)
class Cap:
    """An operator limit a page declares where it lives (its view or its experiment's module): read by name like the
    central caps (ATTNLAB_<NAME>, `name` under [limits], else `default`), `lim.<name>` on the page."""

    name: str
    default: int  # a whole number from 1 to 10^9, as every cap
    meaning: str  # what it bounds, the page first: docs/hosting.md's table says it ("Cost: longest sequence timed")


_DECLARED: dict[str, Cap] = {}


def declare(*caps: Cap) -> tuple[Cap, ...]:
    """Declare a page's caps (once per name: a module imported again declares the same records); ValueError for a
    name declared with another record."""
    for cap in caps:
        if not cap.name.isidentifier() or _DECLARED.get(cap.name, cap) != cap:
            raise ValueError(f"a cap named {cap.name!r} is declared already with another record, or is no name")
        _DECLARED[cap.name] = cap
    return caps


def declared() -> dict[str, Cap]:
    """{name: record} of the caps the pages' modules imported so far declare."""
    return dict(_DECLARED)
