"""cli: the command line, `python -m attncore train|evaluate|sweep|cache|params|kv-cache ...` (or `python -m cli`).

main (the parser, train and evaluate), flags (the flag table and value checks), calc (params, kv-cache),
sweep and cache (the run store's commands). An application over attncore and lab: it may import both,
lab only inside the commands that need the store; neither imports it, and it imports nothing of ui or app_pages.
"""
