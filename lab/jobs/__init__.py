"""lab.jobs: the job runtime below the pages: the worker pool, the progress files a worker and its page share
(Cancel included), the server's slots for heavy work, the hosted caps, the Dask client and the sweep loop.

Its modules: loop (a page's sweep) and training (one page's live training) over pool (the worker processes),
dask_client (the pages' scheduler connection), slots (the server's slots) and limits (the operator's caps: the
Limits dataclass and its parsers), over progress (the file a worker writes, and the training it runs), memo
(server-wide LRU memos, one instance per process) and intervals (how often a job is polled, how long a Cancel is
awaited). It may import attncore and the rest of lab (the store, the sweep's connect and parent watch, the cost
model, formats, lab.limits); no streamlit or altair: ui draws what runs here (bars, buttons, notices), and the
workers import it without the UI.
"""
