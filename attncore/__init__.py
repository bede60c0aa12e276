"""attncore: a tiny Transformer decoder in NumPy with a hand-written backward pass.

numpy and the standard library only. See README.md for the map of modules.
"""

from .config import ConfigError, ModelConfig, RunConfig, TaskConfig, TrainConfig, make_run

__all__ = ["ConfigError", "ModelConfig", "RunConfig", "TaskConfig", "TrainConfig", "make_run"]
