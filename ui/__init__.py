"""The dashboard's building blocks: the only package besides app_pages/ that imports streamlit.

nav (page registry), sidebar (shared run configuration), params (URL-mirrored widgets), urls (every
query parameter checked before a widget reads it), plain (visitor text shown literally), limits
(hosted-mode caps), runs (bridge to lab.store), frames and charts (pure DataFrame -> Altair).
"""
