"""Placeholder until the calculators land (issue 5)."""


def register(sub) -> None:
    pass
