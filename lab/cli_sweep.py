"""Placeholder until the store and sweeps land (issue 3)."""


def register(sub) -> None:
    pass
