"""Attention Lab, the entry point: `streamlit run dashboard.py`.

Page config, the navigation over app_pages/ (the registry lives in ui/nav.py), and the shared sidebar,
drawn once here before the page so its settings persist across pages and stay in the URL.

`streamlit run` reads this file twice. At server start it imports it (as the module `dashboard`), finds the st.App
below and serves it: the App's lifespan (ui.server_start) bounds the uploads and guards the static folder before
the first request is answered. Then it runs it as the page script (`__main__`) for every visitor.
"""

from pathlib import Path

import streamlit as st

from ui import bundles, nav, runs, server_start, sidebar, static_files, sweeps, uploads

# a file, not a Material icon or an emoji: Streamlit fetches Material favicons from the network, and emoji
# render as empty boxes in a browser without an emoji font
FAVICON = Path(__file__).resolve().parent / "ui" / "favicon.png"


def main() -> None:
    st.set_page_config(page_title="Attention Lab", page_icon=str(FAVICON), layout="wide")
    uploads.install()  # installed at server start already; here too where the server was started otherwise
    static_files.install()  # app/static/ serves this store's bundle only, no hidden file, a plain 404 for a bad path
    bundles.warm_start()  # ATTNLAB_BUNDLE: imported once per server process
    page, spec = nav.navigation()
    sidebar.render(expanded=spec.uses_run)
    runs.begin_view()  # the runs this page shows are pinned against eviction while it is shown
    sweeps.report_cancelled()  # after a sweep's Cancel (a rerun): how far it got, once
    nav.run(page)  # page.run(), safe from a race of two sessions compiling at once
    runs.end_view()


if __name__ == "__main__":  # a visitor's script run
    main()
else:  # imported at server start by `streamlit run`, which serves this App
    app = st.App(Path(__file__).name, lifespan=server_start.lifespan)
