"""The tasks, one module each, at the top of attncore. Each module builds its Task (attncore.task) and registers it;
importing this package imports every module in it, so a task is added by adding a module. Everything else asks a
task through the registry (attncore.task.get, task_of), never a task's module by name.

The registry's order is the order the pages and flags list: the article's tasks (symbols) first, then the induction
task, then any further module in name order.
"""

from __future__ import annotations

import importlib
import pkgutil

# the lab's held-out set size, padding and draws, as the pages import them (attncore.sequences owns them)
from ..sequences import N_TEST, PAD, TEST_SEED, all_distinct, draw_positions, pad_sequences

# isort: off
from . import symbols  # the article's tasks first
from . import induction

# isort: on

for _module in pkgutil.iter_modules(__path__):  # every further task module of the package
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["N_TEST", "PAD", "TEST_SEED", "all_distinct", "draw_positions", "induction", "pad_sequences", "symbols"]
