"""Attention Lab, the entry point: `streamlit run dashboard.py`.

Page config, the navigation over app_pages/ (the registry lives in ui/nav.py), and the shared sidebar,
drawn once here before the page so its settings persist across pages and stay in the URL.
"""

import streamlit as st

from ui import nav, sidebar

st.set_page_config(page_title="Attention Lab", page_icon=":material/biotech:", layout="wide")
page, spec = nav.navigation()
sidebar.render(expanded=spec.uses_run)
page.run()
