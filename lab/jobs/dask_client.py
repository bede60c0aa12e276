"""The server's connection to the pages' Dask scheduler (the operator's dask_scheduler): one distributed.Client per
address and server process, connected and checked once (lab.sweep's connect and check_cluster)."""

from __future__ import annotations

import logging
import threading

from attncore import ConfigError
from lab.sweep import check_cluster, connect

_LOG = logging.getLogger(__name__)
_clients: dict[str, object] = {}  # address -> distributed.Client, one per server process (a per_process instance
_clients_lock = threading.Lock()  # would hold a closed Client for good); the lock is held for lookups only


def client(address: str):
    """The server's distributed.Client on the scheduler at `address`, connected and checked once (lab.sweep's connect
    and check_cluster, each bounded in time; again after it closed): ConfigError, one plain sentence, when none
    answers or its workers cannot import the lab; the cause goes to the server's log with the address.

    Called before a slot is taken, and the connection is made outside the lock: a scheduler that accepts and never
    answers costs the visitor who asked lab.sweep's few seconds, never a slot or another visitor's wait."""
    with _clients_lock:
        found = _clients.get(address)
        if found is not None and found.status == "running":
            return found
    try:
        new = connect(address)
        try:
            check_cluster(new)
        except Exception:
            new.close()
            raise
    except ConfigError as e:
        _LOG.warning("dask_scheduler %s: %s (cause: %r)", address, e.message, e.__cause__)
        raise
    with _clients_lock:
        current = _clients.get(address)
        if current is not None and current.status == "running":  # another visitor connected meanwhile
            new.close()
            return current
        _clients[address] = new
        return new


def close_all() -> None:
    """Close every client of this process (before its scheduler goes: no reconnection attempts at exit)."""
    with _clients_lock:
        for found in _clients.values():
            found.close()
        _clients.clear()
