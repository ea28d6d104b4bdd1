"""Where an experiment run (``Run.experiment``) gets its configuration.

The experiments app sits above the harness (it imports the harness, never the reverse): at
start-up it registers the function that gives such a run its candidate's agent, its tools
answered from a recording and, for a proposed policy change, its policy
(``ExperimentsConfig.ready``). Without one registered, an experiment run fails as misconfigured
rather than run its tools for real.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.agent_registry import AgentSpec
from harness.engine.tool_calls import DrivePolicy
from harness.errors import HarnessError
from harness.models import Run
from tools.registry import ToolRegistry

Setup = Callable[
    [Run, AgentSpec, ToolRegistry, DrivePolicy], tuple[AgentSpec, ToolRegistry, DrivePolicy]
]
_setups: list[Setup] = []


class ExperimentSetupMissing(HarnessError):
    pass


def register_experiment_setup(setup: Setup) -> None:
    """The one function that configures experiment runs (registered once, idempotently)."""
    _setups[:] = [setup]


def experiment_setup(
    run: Run, agent: AgentSpec, registry: ToolRegistry, policy: DrivePolicy
) -> tuple[AgentSpec, ToolRegistry, DrivePolicy]:
    """The experiment run's agent, registry and policy; raises a ``HarnessError`` (the run
    fails as misconfigured) when nothing can configure it."""
    if not _setups:
        raise ExperimentSetupMissing(
            f"Run {run.id} is an experiment run, but no experiment setup is installed: its "
            "tools are not run for real."
        )
    return _setups[0](run, agent, registry, policy)
