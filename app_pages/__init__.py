"""app_pages: one thin script per dashboard page: read the sidebar's config, get (cached) results, draw them.

Registered in ui/nav.py and run by Streamlit's navigation, never imported by other modules. A page may import
ui, lab and attncore; nothing imports it.
"""
