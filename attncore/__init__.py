"""attncore: a tiny Transformer decoder in NumPy with a hand-written backward pass.

numpy and the standard library only. See README.md for the map of modules.
"""

from .config import ConfigError, ModelConfig, RunConfig, TaskConfig, TrainConfig, make_run
from .train import initial_params

__all__ = ["ConfigError", "ModelConfig", "RunConfig", "TaskConfig", "TrainConfig", "initial_params", "make_run"]
