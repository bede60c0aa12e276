"""A Hugging Face config.json in, by upload or paste, on the calculator pages. It is read (serving.hf_config)
in the widgets' callback, before the page draws its fields: a file the reader accepts fills the page's URL-mirrored
fields (so a link carries what was derived, never the file), a refused one leaves every field as it was and says why
in one line. What was read stays in the session, and is shown literally (ui.plain): a file's keys are its own text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from attncore import ConfigError
from serving.hf_config import MAX_BYTES, ModelFile, read_config, too_large
from serving.hub import HubModel
from serving.parameters import count_parameters
from serving.safetensors_count import comparison
from ui.hub_input import hub_row
from ui.params import write_to_url
from ui.plain import clip, plain
from ui.uploads import CONFIG_UPLOAD_MB, room

FILE = "config.json"  # the preset select's entry for a model read from a file (its fields are the URL's)
PLACEHOLDER = '{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, ...}'
CACHED_READS = 8  # the last files read, any visitor's: a re-upload or a second visitor's same file is not read again
EMPTY_PASTE = (
    f"the pasted text: nothing to read, the text area is empty. It takes at most {MAX_BYTES + 1:,} characters and "
    "keeps nothing of a longer paste (a config.json is a few kB)."
)


# the drop zone says "Limit 2MB per file" (CONFIG_UPLOAD_MB): the label says the same, and what is read of it
UPLOAD_LABEL = (f"Upload a config.json (the box takes up to {CONFIG_UPLOAD_MB} MB; one over {MAX_BYTES:,} bytes is "
                "refused with its size)")  # fmt: skip


def _session_id() -> str | None:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx else None


@dataclass(frozen=True)
class Read:
    name: str  # the upload's file name (the visitor's text) or "the pasted text"
    model: ModelFile
    summary: str  # the model in one line (ModelFile.summary), worded once, not on every rerun
    hub: HubModel | None = None  # what the Hub gave, for a model fetched by its id (its checkpoint's count)


def read_file(raw: bytes | str) -> tuple[ModelFile, str]:
    """The ModelFile of a config.json's bytes or text and its summary, memoised by the content (a refusal, raised,
    is not kept: reading it again costs what the first read did, linear in the file)."""
    if isinstance(raw, str):  # the cache hashes a text as UTF-8, which a lone surrogate (refused by the reader) is not
        return _read(raw.encode("utf-8", "surrogatepass"), True)
    return _read(raw, False)


@st.cache_data(max_entries=CACHED_READS, show_spinner=False)
def _read(raw: bytes, text: bool) -> tuple[ModelFile, str]:
    model = read_config(raw.decode("utf-8", "surrogatepass") if text else raw)
    return model, model.summary()


def reader(prefix: str, fill: Callable[[ModelFile], dict]) -> None:
    """The upload and paste inputs, folded; `fill` gives the session-state values that show a ModelFile in the
    page's fields (ConfigError for a value a field cannot hold: the file is then refused as a whole)."""

    def load(raw, name: str, fetched: HubModel | None = None) -> None:
        try:
            model, summary = read_file(raw) if fetched is None else _read_fetched(fetched)
            values = fill(model)
        except ConfigError as e:
            st.session_state[f"{prefix}file_error"] = f"{name}: {e}"
            return
        st.session_state.update(values)
        write_to_url(values)  # the fields first drawn after this read too (ui.params.write_to_url)
        st.session_state[f"{prefix}file"] = Read(name, model, summary, fetched)
        st.session_state.pop(f"{prefix}file_error", None)

    def fail(message: str) -> None:
        st.session_state[f"{prefix}file_error"] = message

    def on_upload() -> None:
        upload = st.session_state.get(f"{prefix}file_upload")
        if upload is not None and upload.size > MAX_BYTES:  # the uploader lets it through: the page says its size
            st.session_state[f"{prefix}file_error"] = f"{clip(upload.name, 60)}: {too_large(upload.size)}"
        elif upload is not None:
            load(upload.read(MAX_BYTES + 1), clip(upload.name, 60))

    def on_paste() -> None:
        text = st.session_state.get(f"{prefix}file_text") or ""
        if not text.strip():  # the text area keeps nothing of a paste over its max_chars: it may not be empty at all
            st.session_state[f"{prefix}file_error"] = EMPTY_PASTE
            return
        load(text, "the pasted text")

    error = st.session_state.get(f"{prefix}file_error")
    with st.expander("Read a model's config.json (Hugging Face): by its Hub id, or upload it or paste it",
                     key=f"{prefix}file_open", on_change="rerun", expanded=error is not None):  # fmt: skip
        hub_row(prefix, lambda found: load(found.config, f"config.json of {found.model_id}", found), fail)
        left, right = st.columns(2)
        with left:
            full = room(_session_id(), MAX_BYTES)  # a config.json as large as one is read
            if full:  # the browser would say only "Request failed with status code 413"
                st.warning(plain(f"{full} Paste the file's text instead, or close a tab where you uploaded one."),
                           icon=":material/block:")  # fmt: skip
            st.file_uploader(UPLOAD_LABEL, type=["json"], key=f"{prefix}file_upload", on_change=on_upload,
                             max_upload_size=CONFIG_UPLOAD_MB)  # fmt: skip
            st.caption("Read here, never stored or sent on. Every field it implies fills the fields below, which you "
                       "can still change; a link carries the fields, not the file.")  # fmt: skip
        with right:
            st.text_area(
                "Or paste it", key=f"{prefix}file_text", height=110, placeholder=PLACEHOLDER, max_chars=MAX_BYTES + 1
            )  # one more than the reader takes, so it says "over 1 MB"
            st.button("Read the pasted text", key=f"{prefix}file_read", on_click=on_paste, icon=":material/input:")
    if (error := st.session_state.get(f"{prefix}file_error")) is not None:  # a fetch above may have failed
        st.error(f"**Not read, nothing changed:** {plain(error)}", icon=":material/error:")


def _read_fetched(fetched: HubModel) -> tuple[ModelFile, str]:
    model = fetched.read()
    return model, model.summary()


def read_model(prefix: str) -> ModelFile | None:
    """The model the last file read on this page gave (None: none read in this session)."""
    read = st.session_state.get(f"{prefix}file")
    return read.model if read is not None else None


def show_read(prefix: str, changed: bool, described: str) -> None:
    """What the file said (its summary, the defaults it relied on, the notes, the keys ignored), or, opened from a
    link, that the fields come from the link; and whether the fields were changed since (`changed`)."""
    read: Read | None = st.session_state.get(f"{prefix}file")
    if read is None:
        st.info(f"Fields from the link (a model read from a config.json): {plain(described)}.", icon=":material/link:")
        return
    m = read.model
    wrapped = f" in {m.wrapper}'s text_config" if m.wrapper else ""
    st.success(f"**Read from {plain(read.name)}** ({plain(m.model_type + wrapped)}): {plain(read.summary)}.",
               icon=":material/description:")  # fmt: skip
    if read.hub is not None:
        checkpoint_lines(read.hub, m)
    lines = []
    if changed:
        lines.append("You changed fields since: the figures follow the fields.")
    if m.defaults:
        lines.append("Defaults (the file leaves them out): " + "; ".join(m.defaults) + ".")
    lines += [f"Note: {note}." for note in m.notes]
    if m.ignored:
        lines.append(f"Ignored ({len(m.ignored):,} keys that change no figure here): {m.ignored_text()}.")
    for line in lines:
        st.caption(plain(line))


def checkpoint_lines(fetched: HubModel, m: ModelFile) -> None:
    """The checkpoint's count beside the formula's (the file's model), or why there is none; for an architecture no
    formula counts, that the count is the checkpoint's and the fields below are its attention geometry."""
    checkpoint = fetched.checkpoint
    if checkpoint is None:
        st.caption(plain(f"Checkpoint: not counted ({fetched.checkpoint_note})."))
        return
    formula = count_parameters(m.arch).total if m.counted else None
    line = "Checkpoint: " + comparison(checkpoint, formula) + "."
    if m.counted:
        (st.caption if formula == checkpoint.total else st.info)(plain(line))
        return
    st.warning(plain(f"{line} The fields below hold its attention geometry and widths as a modern decoder's "
                     "(SwiGLU, RMSNorm, no biases, RoPE, untied head): its KV cache is exact, the parameter "
                     "breakdown is not this model's."), icon=":material/warning:")  # fmt: skip


def checkpoint_total(prefix: str, model: ModelFile | None) -> int | None:
    """The checkpoint's count where no formula counts the model read (its weights), else None."""
    read: Read | None = st.session_state.get(f"{prefix}file")
    if model is None or model.counted or read is None or read.hub is None or read.hub.checkpoint is None:
        return None
    return read.hub.checkpoint.total


def read_checkpoint(prefix: str):
    """The checkpoint's count of the model last fetched by its Hub id on this page (None: none, or no safetensors)."""
    read: Read | None = st.session_state.get(f"{prefix}file")
    return read.hub.checkpoint if read is not None and read.hub is not None else None
