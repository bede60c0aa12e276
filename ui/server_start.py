"""What a server installs when it starts, before it answers any request: the bounds on what visitors' uploads may
hold (ui.uploads) and the guard on the static folder (ui.static_files). dashboard.py hands lifespan() to the
st.App that `streamlit run` serves (Streamlit runs an App's lifespan after its runtime starts, before serving)."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from ui import static_files, uploads

_LOG = logging.getLogger(__name__)


def install() -> None:
    """Both installs (each idempotent); a failure to guard the static folder is said in the server log."""
    uploads.install()
    if not static_files.install():
        _LOG.warning("the static folder's guard was not installed: static serving is off, or its route not found")


@asynccontextmanager
async def lifespan(_app):
    install()
    yield
