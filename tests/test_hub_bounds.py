"""Every Hub read bounded (serving.hub against the local stand-in Hub): an index past its bytes is not read (nor kept on
disk), an index of thousands of shards asks for none of them, the work itself stops at the deadline (no request
starts after it), a redirect leaves the configured endpoint only for the public Hub's own hosts, and a safetensors
header's counts are checked as any input."""

from __future__ import annotations

import json
import struct
import threading

import pytest
from fake_hub import Repo
from test_hub import LLAMA3, fake  # noqa: F401  (the fixture: the stand-in Hub, HF_ENDPOINT and HF_HOME pointed at it)

from cli.main import main
from serving import hub
from serving.safetensors_count import count_headers, header_bytes, parse_header

CONFIG = json.dumps(LLAMA3).encode()


def sharded(n: int, index_pad: int = 0) -> Repo:
    """A repository whose index names n shards (each a one-tensor header), its index padded by index_pad bytes."""
    names = [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(n)]
    files = {name: header_bytes({f"layer{i}.w": ("BF16", (4, 4))}) for i, name in enumerate(names)}
    index = {"metadata": {"pad": "x" * index_pad}, "weight_map": {f"layer{i}.w": n for i, n in enumerate(names)}}
    return Repo(files | {"config.json": CONFIG, "model.safetensors.index.json": json.dumps(index).encode()})


def header_gets(h) -> list[str]:
    return [p for m, p, _ in h.requests if m == "GET" and p.endswith(".safetensors") and "-of-" in p]  # shards


def hub_files(tmp_path) -> list:
    return [p for p in (tmp_path / "hf").rglob("*") if p.is_file()] if (tmp_path / "hf").exists() else []


@pytest.mark.parametrize("send_length", [True, False])
def test_an_index_past_its_bytes_is_not_read_nor_kept(fake, tmp_path, send_length):  # noqa: F811
    fake.repos["org/huge-index"] = sharded(2, index_pad=hub.INDEX_BYTES + 1000)
    fake.send_length = send_length  # without a Content-Length the stream is cut at the cap
    found = hub.fetch_model(hub.parse_model_id("org/huge-index"))
    assert found.checkpoint is None and f"over the {hub.INDEX_BYTES:,} bytes this server reads of it" in (
        found.checkpoint_note)  # fmt: skip
    assert not header_gets(fake) and not hub_files(tmp_path)  # nothing on disk: a page's fetch keeps nothing


def test_thousands_of_shards_are_refused_before_any_header_is_asked_for(fake, capsys):  # noqa: F811
    fake.repos["org/5000-shards"] = sharded(5000)
    assert main(["params", "--model", "org/5000-shards", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["checkpoint_total"] is None and "its files must number 1 to 256, got 5,000" in (
        out["checkpoint"]["note"])  # fmt: skip
    assert not header_gets(fake)
    fake.repos["org/200-shards"] = sharded(200)  # within the cap: every header read, the count exact
    found = hub.fetch_model(hub.parse_model_id("org/200-shards"))
    assert found.checkpoint.total == 200 * 16 and found.checkpoint.files == 200


def test_the_work_stops_at_the_deadline_not_only_the_wait(fake):  # noqa: F811
    fake.repos["org/slow-shards"] = sharded(200)
    fake.gate = threading.Event()  # every header request hangs until released
    with pytest.raises(hub.HubError) as e:
        hub.fetch_checkpoint(hub.parse_model_id("org/slow-shards"), deadline=1.0)
    assert "safetensors headers of org/slow-shards" in str(e.value)
    asked = len(header_gets(fake))
    assert asked <= hub.SHARD_THREADS  # the shards in flight at the deadline, no more
    fake.gate.set()
    for t in [t for t in threading.enumerate() if t.name.startswith(("hub-fetch", "hub-header"))]:
        t.join(timeout=60)  # the fetch's threads end once their last request is answered
        assert not t.is_alive()
    assert len(header_gets(fake)) == asked  # before: all 200 were asked for after the page had given up


def test_a_redirect_to_another_host_is_not_followed(fake, monkeypatch):  # noqa: F811
    fake.redirect_to = "http://127.0.0.2:9"  # not the configured endpoint, not the public Hub
    found = hub.fetch_model(hub.parse_model_id("org/llama-open"))
    assert found.checkpoint is None and "a host this server does not reach (the configured endpoint only)" in (
        found.checkpoint_note)  # fmt: skip
    reader = hub.Reader(hub.parse_model_id("org/x"), 5)
    reader.endpoint = "https://huggingface.co"
    assert reader.allowed("https://cas-bridge.xethub.hf.co/x") and reader.allowed("https://huggingface.co/a")
    assert not reader.allowed("http://cdn-lfs.hf.co/x") and not reader.allowed("https://evil.co/huggingface.co")


def header(entries: dict) -> bytes:
    text = json.dumps(entries).encode()
    return struct.pack("<Q", len(text)) + text


@pytest.mark.parametrize(
    "entry, said",
    [
        ({"dtype": "F32", "shape": [-13.5], "data_offsets": [0, 4]}, "shape must be at most 8 whole numbers"),
        ({"dtype": "F32", "shape": [10**100], "data_offsets": [0, 4]}, "shape must be at most 8 whole numbers"),
        ({"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}, "shape must be at most 8 whole numbers"),
        ({"dtype": "F32", "shape": [3], "data_offsets": [0, 4]}, "data_offsets must span its shape's 12 bytes"),
        ({"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}, "data_offsets must follow one another from 0"),
        ({"dtype": "Q99", "shape": [1], "data_offsets": [0, 4]}, "dtype must be one of BOOL"),
        ({"dtype": "F32", "shape": [1]}, "data_offsets must be two whole numbers"),
    ],
)
def test_a_headers_counts_are_checked_as_any_input(entry, said):
    with pytest.raises(ValueError) as e:
        parse_header(header({"w": entry}), "model-00001.safetensors")
    message = str(e.value)
    assert said in message and message.startswith("model-00001.safetensors: tensor 'w'") and "\n" not in message


def test_a_count_past_a_hundred_trillion_is_refused():
    with pytest.raises(ValueError, match="must be at most 100,000,000,000,000 elements"):
        count_headers({"a": {"w": ("F32", (2**40, 2**40))}})


def test_a_bad_header_on_the_hub_is_a_one_line_note(fake, capsys):  # noqa: F811
    bad = header({"w": {"dtype": "F32", "shape": [-13.5], "data_offsets": [0, 4]}})
    fake.repos["org/bad-header"] = Repo({"config.json": CONFIG, "model.safetensors": bad})
    assert main(["params", "--model", "org/bad-header", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["checkpoint_total"] is None and out["total"] == 8_030_261_248
    note = out["checkpoint"]["note"]
    assert "could not be read: model.safetensors: tensor 'w': shape must be" in note and "\n" not in note


def test_the_deadlines_sentence_and_a_missing_files_name_the_thing_once(fake, capsys):  # noqa: F811
    with pytest.raises(hub.HubError) as e:
        hub.bounded("the config.json", threading.Event().wait, hub.ModelId("org/x", None), 0.1)
    assert str(e.value).startswith("Reading the config.json of org/x gave no answer within 0.1 s")
    assert main(["params", "--config", "missing.json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --config: cannot read 'missing.json': No such file or directory"  # before: --config twice


def test_the_upload_boxs_label_says_what_its_drop_zone_says():
    from ui.config_input import UPLOAD_LABEL
    from ui.uploads import CONFIG_UPLOAD_MB

    assert f"up to {CONFIG_UPLOAD_MB} MB" in UPLOAD_LABEL and "1 MB" not in UPLOAD_LABEL  # "Limit 2MB per file"
