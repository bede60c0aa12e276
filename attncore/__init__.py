"""attncore: a tiny Transformer decoder in NumPy with a hand-written backward pass.

The top level is the model and its training, what everything else builds on: config, layers, model, optim,
train, evaluate, inspect, snapshots, memory. A task is one module of attncore.tasks, found through the registry
attncore.task (`attncore.task.names()` lists them); importing attncore registers them all. Two
subpackages measure with it and are independent of each other: attncore.mechanisms (the √d_k statistics, masks,
position, attention cost, the gradient check) and attncore.interpret (interventions). The LLM calculator (parameter
counts, KV-cache sizing, GPU fit) is the package `serving` beside attncore. It may import NumPy and the standard
library only; nothing of serving, lab, ui, cli or app_pages (`python -m attncore` is a script that hands over to
cli).
"""

from . import tasks  # noqa: F401  registers the tasks
from .config import ConfigError, ModelConfig, RunConfig, TaskConfig, TrainConfig, make_run
from .train import initial_params

__all__ = ["ConfigError", "ModelConfig", "RunConfig", "TaskConfig", "TrainConfig", "initial_params", "make_run"]
