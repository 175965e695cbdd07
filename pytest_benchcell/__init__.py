"""pytest-benchcell: benchmark coding-agent tools one (arm, task) cell at a time."""

from .environment import Environment, Probe, TrialInfo

__version__ = "0.1.0"
__all__ = ["Environment", "Probe", "TrialInfo", "__version__"]
