"""The Hub id box of the Parameters and KV cache pages (ui.hub_input) against the local stand-in Hub: what was read
shown as for an uploaded file with the checkpoint's count beside the formula's, one sentence for what cannot be
had, the id in the link, and in hosted mode a memo per id and a rate limit per session."""

from __future__ import annotations

import pytest
from apptest_helpers import page, texts
from fake_hub import serve
from test_hub import stand_in_hub


@pytest.fixture
def fake(monkeypatch, tmp_path):
    from ui.hub_input import _rate

    _rate.clear()  # the server's rate limit: this test's own (AppTests share one process)
    h = stand_in_hub()
    server, url = serve(h)
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("ATTNLAB_HUB_FETCH", "1")  # an AppTest runs headless: hosted, where fetching is off unless set
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    yield h
    server.shutdown()


def test_parameters_page_reads_a_model_by_its_id_from_the_link(fake):
    at = page("parameters", par_hub="org/llama-open")
    assert "Read from config.json of org/llama-open" in texts(at.success)
    assert "the formula gives 8,030,261,248: exact" in texts(at.caption)
    assert at.query_params["par_hub"] in ("org/llama-open", ["org/llama-open"])  # the id stays in the link
    assert at.session_state["par_preset"] == "config.json"
    assert at.session_state["par_d_model"] == 4096
    assert [m.value for m in at.metric if m.label == "Published (its safetensors)"] == ["8,030,261,248"]


def test_kv_page_sizes_an_architecture_without_a_formula_from_its_attention_fields(fake):
    at = page("kv_cache", kv_hub="org/new-arch")
    warning = texts(at.warning)
    assert "no formula for this architecture: the checkpoint's count is the total" in warning
    assert at.session_state["kv_kv_heads"] == 4 and at.session_state["kv_head_dim"] == 128


@pytest.mark.parametrize(
    "model_id, said",
    [("meta-llama/Meta-Llama-3-8B", "is gated"), ("org/missing", "was not found"),
     ("org/new-arch-no-weights", "'brandnew' is not one the lab reads")],
)  # fmt: skip
def test_what_cannot_be_had_leaves_the_fields_and_says_why(fake, model_id, said):
    at = page("parameters", par_hub=model_id)
    error = texts(at.error)
    assert "Not read, nothing changed" in error and said in error and at.session_state["par_preset"] == "gpt2"


def test_a_malformed_id_in_the_link_is_refused_before_any_request(fake):
    at = page("parameters", par_hub="org/a b")
    assert not [r for r in fake.requests if "resolve" in r[1]]
    assert at.session_state["par_preset"] == "gpt2"


def test_hosted_a_session_is_rate_limited_and_a_fetched_id_is_memoised(fake, monkeypatch):
    monkeypatch.setenv("ATTNLAB_HOSTED", "1")
    monkeypatch.setenv("ATTNLAB_HUB_FETCH", "1")  # the operator's switch: a hosted server fetches nothing without it
    monkeypatch.setenv("ATTNLAB_MAX_HUB_FETCHES_SESSION", "1")
    at = page("parameters", par_hub="org/llama-config-only")
    assert "Read from config.json of org/llama-config-only" in texts(at.success)
    at.text_input(key="par_hub").set_value("org/llama-vision").run()
    assert "this visitor made 1 of them in the last 60 minutes, the most one may" in texts(at.error)
    asked = len(fake.requests)
    again = page("parameters", par_hub="org/llama-config-only")  # another session: from the server's memo
    assert "Read from config.json of org/llama-config-only" in texts(again.success) and len(fake.requests) == asked


class OneAddress:
    """Streamlit's runtime as ui.visitors sees it: every session's connection from one address."""

    def __init__(self, ip: str, headers=()):
        context = type("Context", (), {"remote_ip": ip, "headers": headers})()
        self.client = type("Client", (), {"client_context": context})()

    def exists(self) -> bool:
        return True

    def instance(self):
        return self

    def get_client(self, session_id):
        return self.client


def test_hosted_a_visitor_opening_new_sessions_spends_their_share_only(fake, monkeypatch):
    import ui.visitors

    monkeypatch.setenv("ATTNLAB_HOSTED", "1")
    monkeypatch.setenv("ATTNLAB_HUB_FETCH", "1")
    monkeypatch.setenv("ATTNLAB_MAX_HUB_FETCHES_SESSION", "1")
    monkeypatch.setattr(ui.visitors, "Runtime", OneAddress("203.0.113.7"))
    first = page("parameters", par_hub="org/llama-config-only")
    assert "Read from config.json of org/llama-config-only" in texts(first.success)
    second = page("parameters", par_hub="org/llama-vision")  # a new tab, the same visitor: refused
    assert "this visitor made 1 of them" in texts(second.error)
    monkeypatch.setattr(ui.visitors, "Runtime", OneAddress("198.51.100.9"))
    other = page("parameters", par_hub="org/llama-vision")  # another visitor still has their share
    assert "Read from config.json of org/llama-vision" in texts(other.success)


def test_visitors_are_told_apart_by_address_and_a_local_proxys_forwarded_hop():
    from ui import visitors

    def who(ip, headers=()):
        visitors.Runtime = OneAddress(ip, headers)
        return visitors.visitor("s1")

    real = visitors.Runtime
    try:
        assert who("203.0.113.7") == "ip:203.0.113.7"
        assert who("2001:db8:1:2:aaaa::1") == who("2001:db8:1:2:bbbb::2") == "ip:2001:db8:1:2::/64"
        assert who("127.0.0.1", [("X-Forwarded-For", "10.9.9.9, 203.0.113.8")]) == "ip:203.0.113.8"
        assert who("203.0.113.7", [("X-Forwarded-For", "198.51.100.1")]) == "ip:203.0.113.7"  # not a local proxy
        assert who("127.0.0.1") == who(None) == "session:s1"  # nothing tells visitors apart: the session
    finally:
        visitors.Runtime = real


def test_a_hosted_server_fetches_nothing_unless_its_operator_allows_it(fake, monkeypatch):
    monkeypatch.setenv("ATTNLAB_HOSTED", "1")
    monkeypatch.delenv("ATTNLAB_HUB_FETCH")
    at = page("parameters", par_hub="org/llama-open")
    assert not [r for r in fake.requests if "resolve" in r[1]] and at.session_state["par_preset"] == "gpt2"
    assert "This server does not fetch models from the Hub" in texts(at.caption)


def test_a_checkpoint_differing_from_the_formula_is_not_called_a_change_of_yours(fake):
    at = page("parameters", par_hub="org/llama-vision")
    published = [m for m in at.metric if m.label == "Published (its safetensors)"]
    assert [m.value for m in published] == ["8,030,863,360"]  # the checkpoint's, with its vision tower
    delta = published[0].proto.delta
    assert "after your changes" not in delta and "differs from the count" in delta  # nothing was changed
    at.number_input(key="par_d_model").set_value(4160).run()  # a field changed: now it is the visitor's change
    assert "after your changes" in [m for m in at.metric if m.label.startswith("Published")][0].proto.delta


def test_a_fetch_waits_for_one_of_the_servers_fetches_and_is_refused_when_none_frees(fake, monkeypatch):
    from serving import hub
    from ui import hub_input

    hub_input._running.clear()
    running = hub_input._running()
    for _ in range(hub_input.CONCURRENT):  # other visitors' fetches hold every one
        running.acquire()
    monkeypatch.setattr(hub, "DEADLINE_S", 0.2)
    try:
        at = page("parameters", par_hub="org/llama-open")
        assert "the server was busy with 2 other fetches for 0.2 s" in texts(at.error)
        assert not [r for r in fake.requests if "resolve" in r[1]]
    finally:
        hub_input._running.clear()
