"""pytest-benchcell: benchmark coding-agent tools one (arm, task) cell at a time."""

from .environment import Environment, TrialInfo

__version__ = "0.1.0"
__all__ = ["Environment", "TrialInfo", "__version__"]
