"""How often the job runtime looks at what it runs, and how long it waits for a stopped job: one place for every
page's refresh, slot poll and cancel wait."""

REFRESH_SECONDS = 0.25  # a running training or sweep is read (its progress redrawn) this often: at least once a second
SLOT_POLL_SECONDS = 0.25  # a job waiting for a slot checks again this often (where a page learns its visitor left)
CANCEL_WAIT_SECONDS = 3.0  # after Cancel, how long a page waits to learn at which step the workers stopped
