"""ui: the dashboard's building blocks, the only package besides app_pages/ that imports streamlit.

nav (page registry), sidebar (shared run configuration), params (URL-mirrored widgets), urls (every query
parameter checked before a widget reads it), plain (visitor text shown literally), limits (the hosted caps as a
page reads them), slots (a page's wait for a slot, drawn), runs, live, sweeps and metered (the bridge to
lab.store and lab.jobs: cached runs, a training's and a sweep's progress bars and Cancel, memoised page work),
frames and charts (pure DataFrame -> Altair, one chart module per page group). It may import attncore, lab,
streamlit, pandas and altair; nothing of app_pages or cli. ui.charts and ui.frames import no streamlit; what
runs below the pages (the worker pool, progress files, slots, the sweep loop) is lab.jobs.
"""
