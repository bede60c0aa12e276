"""A local stand-in for the Hugging Face Hub, answering as the Hub does the requests huggingface_hub makes for a
file (HEAD and GET on /{repo}/resolve/{revision}/{path}, with Range, X-Repo-Commit, ETag and the X-Error-Code
headers of a gated, missing or private repository, a missing file or revision). Tests point HF_ENDPOINT at it;
every request is recorded with its Range, so a test can check that no weight was ever read.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

from serving.safetensors_count import header_bytes

WEIGHT_PADDING = 1_000_000  # bytes after each header, standing for the weights: never to be read


@dataclass
class Repo:
    files: dict[str, bytes]  # path -> content
    gated: bool = False
    revisions: tuple[str, ...] = ("main",)


@dataclass
class FakeHub:
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # (method, path, Range)
    gate: threading.Event | None = None  # set: a GET of a *.safetensors file waits for it before answering
    send_length: bool = True  # False: no Content-Length, the body runs until the connection closes
    redirect_to: str | None = None  # a base URL every GET of a *.safetensors file is redirected to
    latency_s: float = 0.0  # how long a GET of a *.safetensors file takes to be answered (a far or busy Hub)

    def add(self, repo: str, config: dict | None, shards: dict[str, dict] | None = None, **kw) -> None:
        """A repository with a config.json and safetensors files {file: {tensor: (dtype, shape)}}: one file is
        model.safetensors, several get an index."""
        files = {} if config is None else {"config.json": json.dumps(config).encode()}
        shards = shards or {}
        for name, tensors in shards.items():
            files[name] = header_bytes(tensors) + b"\0" * WEIGHT_PADDING
        if len(shards) > 1:
            weight_map = {t: name for name, tensors in shards.items() for t in tensors}
            files["model.safetensors.index.json"] = json.dumps({"metadata": {}, "weight_map": weight_map}).encode()
        self.repos[repo] = Repo(files, **kw)

    def bytes_served(self, path_part: str) -> list[str | None]:
        """The Range of every GET whose path contains path_part."""
        return [r for m, p, r in self.requests if m == "GET" and path_part in p]


RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


def serve(hub: FakeHub) -> tuple[ThreadingHTTPServer, str]:
    """Start the server on 127.0.0.1 (a free port) in a daemon thread; (server, its URL)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def do_HEAD(self):
            self._answer(head=True)

        def do_GET(self):
            try:
                self._answer(head=False)
            except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: as a bounded read does
                pass

        def _error(self, status: int, code: str, message: str, head: bool):
            body = json.dumps({"error": message}).encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _answer(self, head: bool):
            hub.requests.append((self.command, self.path, self.headers.get("Range")))
            match = RESOLVE.match(self.path.split("?")[0])
            if not match:
                return self._error(404, "EntryNotFound", "no such route", head)
            repo_id, revision, path = match.group(1), unquote(match.group(2)), unquote(match.group(3))
            repo = hub.repos.get(repo_id)
            if repo is None:
                return self._error(401, "RepoNotFound", "Repository not found", head)
            if repo.gated and not (self.headers.get("Authorization") or "").startswith("Bearer hf_ok"):
                return self._error(401, "GatedRepo", "Access to model is restricted", head)
            commit = hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()
            if revision not in repo.revisions and revision != commit:
                return self._error(404, "RevisionNotFound", "Invalid rev id", head)
            if path not in repo.files:
                return self._error(404, "EntryNotFound", "Entry not found", head)
            data = repo.files[path]
            if not head and path.endswith(".safetensors") and hub.redirect_to:
                self.send_response(302)
                self.send_header("Location", f"{hub.redirect_to}/{repo_id}/{path}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if not head and path.endswith(".safetensors") and hub.gate is not None:
                hub.gate.wait()
            if not head and path.endswith(".safetensors") and hub.latency_s:
                time.sleep(hub.latency_s)
            status, body = 200, data
            wanted = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
            if wanted and not head:
                start = int(wanted.group(1))
                end = min(int(wanted.group(2)) if wanted.group(2) else len(data) - 1, len(data) - 1)
                status, body = 206, data[start : end + 1]
            self.send_response(status)
            self.send_header("X-Repo-Commit", commit)
            self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
            if hub.send_length:
                self.send_header("Content-Length", str(len(body) if not head else len(data)))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            self.end_headers()
            if not head:
                self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def checkpoint_of(arch, dtype: str = "BF16", shards: int = 1, extra: dict | None = None) -> dict[str, dict]:
    """Safetensors files holding a Decoder's tensors (parameters.param_inventory, split over `shards` files) and
    `extra` ones {name: (dtype, shape)}: the headers a checkpoint of that model would have."""
    from serving.parameters import param_inventory

    tensors = {t.name: (dtype, t.shape) for t in param_inventory(arch)} | (extra or {})
    names = list(tensors)
    if shards == 1:
        return {"model.safetensors": tensors}
    step = -(-len(names) // shards)
    return {
        f"model-{i + 1:05d}-of-{shards:05d}.safetensors": {n: tensors[n] for n in names[i * step : (i + 1) * step]}
        for i in range(shards)
    }
