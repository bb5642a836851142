"""Training engine: trainer, hooks, priorities, checkpoints and the experiment config schema."""

from .experiment import ExperimentConfig, TrainerConfig, load_experiment, save_config
from .priority import Priority, get_priority
from .trainer import DefaultTrainer, TrainingInterrupted

__all__ = [
    "ExperimentConfig", "TrainerConfig", "load_experiment", "save_config", "Priority", "get_priority",
    "DefaultTrainer", "TrainingInterrupted",
]
