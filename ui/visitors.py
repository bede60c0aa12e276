"""Who a visitor is, as far as a server can tell: the address of the session's connection (an IPv6 address by its
/64, what one subscriber holds), the last hop of X-Forwarded-For when the connection comes from a proxy on this
machine (loopback), else the session itself. Budgets a visitor could multiply by opening tabs are keyed by this."""

from __future__ import annotations

import ipaddress

from streamlit.runtime import Runtime


def visitor(session_id: str | None) -> str:
    """'ip:203.0.113.7', 'ip:2001:db8:1:2::/64', or 'session:<id>' where no address tells visitors apart."""
    context = None
    if session_id and Runtime.exists():
        client = Runtime.instance().get_client(session_id)
        context = getattr(client, "client_context", None)
    address = _address(getattr(context, "remote_ip", None))
    if address is not None and address.is_loopback:  # a proxy on this machine (or the operator's own browser)
        forwarded = dict((k.lower(), v) for k, v in getattr(context, "headers", ())).get("x-forwarded-for", "")
        address = _address(forwarded.rpartition(",")[2].strip()) if forwarded else None
    if address is None or address.is_loopback:
        return f"session:{session_id}"
    if address.version == 6:
        return f"ip:{ipaddress.ip_network(f'{address}/64', strict=False)}"
    return f"ip:{address}"


def _address(text: str | None):
    try:
        return ipaddress.ip_address(text) if text else None
    except ValueError:
        return None
