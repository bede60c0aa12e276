"""What this server serves from the app's static folder (app/static/, server.enableStaticServing): Streamlit serves any
file under static/, so every store's bundle that a server of this checkout ever built, and any file left beside
one, would be served by every server. install() puts a guard before Streamlit's own handler, once per process:
under downloads/ only this server's store's current bundle name is served, no hidden file anywhere, and a path the
file system refuses (a name too long) is a plain 404, not a 500.
"""

from __future__ import annotations

import functools
import gc
import re

from ui import bundles

BUNDLE_NAME = re.compile(re.escape(bundles.BUNDLE_PREFIX) + r"[0-9a-f]{24}\.zip")
ENDPOINT = "_app_static_endpoint"  # Streamlit's handler of app/static/{path} (its starlette routes)


def allowed(relative: str) -> bool:
    """Whether app/static/<relative> may be served: no hidden part, and under downloads/ this store's bundle only."""
    parts = relative.split("/")
    if any(p.startswith(".") for p in parts):
        return False
    if parts[0] != "downloads":
        return True
    return len(parts) == 3 and parts[1] == bundles.downloads_dir().name and bool(BUNDLE_NAME.fullmatch(parts[2]))


def guarded(endpoint):
    """Streamlit's static endpoint behind allowed(), with an OSError (a name too long) answered 404."""
    from starlette.responses import PlainTextResponse

    async def guarded_endpoint(request):
        if not allowed(request.path_params.get("path", "")):
            return PlainTextResponse("File not found", status_code=404)
        try:
            return await endpoint(request)
        except OSError:
            return PlainTextResponse("File not found", status_code=404)

    guarded_endpoint.guarded = True
    return guarded_endpoint


@functools.cache  # once per process: the server's routes are made before the first script run
def install() -> bool:
    """Guard the running server's static route; False where there is none (AppTest, static serving off, or a
    Streamlit whose route is not found)."""
    try:
        from starlette.routing import Route, request_response
    except ImportError:
        return False
    found = False
    # type(o), not isinstance: isinstance would read o.__class__, which some objects compute (with warnings)
    for route in [o for o in gc.get_objects() if issubclass(type(o), Route)]:
        endpoint = route.endpoint
        if getattr(endpoint, "__name__", "") == ENDPOINT:
            route.endpoint = guarded(endpoint)
            route.app = request_response(route.endpoint)
            found = True
        found = found or getattr(endpoint, "guarded", False)
    return found
