"""Training engine: trainer, evaluator, hook dispatch, checkpoints and the experiment config schema."""

from ..hook import Priority, get_priority
from .build import Scene, build_scene
from .evaluator import Evaluator
from .experiment import ExperimentConfig, TrainerConfig, load_experiment, save_config
from .trainer import DefaultTrainer, TrainingInterrupted

__all__ = [
    "ExperimentConfig",
    "TrainerConfig",
    "load_experiment",
    "save_config",
    "Priority",
    "get_priority",
    "DefaultTrainer",
    "Evaluator",
    "Scene",
    "TrainingInterrupted",
    "build_scene",
]
