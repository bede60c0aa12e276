"""ui: the dashboard's building blocks, the only package besides app_pages/ that imports streamlit.

nav (page registry), sidebar (shared run configuration), params (URL-mirrored widgets), urls (every query
parameter checked before a widget reads it), plain (visitor text shown literally), limits (hosted-mode caps),
runs, live, worker and metered (the bridge to lab.store: slots, workers, memos), frames and charts (pure
DataFrame -> Altair, one chart module per page group). It may import attncore, lab, streamlit, pandas and
altair; nothing of app_pages or cli. ui.charts, ui.frames and ui.worker import no streamlit.
"""
