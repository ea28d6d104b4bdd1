"""What one drive of a run holds: the driver, the drive's state kept in memory between its
steps, and how a step ends.

Shared by the loop (``harness.engine.driver``) and the step (``harness.engine.step``); it
imports neither.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from gateway.messages import Message
from harness.agent_registry import AgentSpec
from harness.engine import state
from harness.engine.guard import RunGuard
from harness.engine.outcome import OutcomeTally
from harness.engine.tool_calls import CallScope, DrivePolicy
from harness.engine.writes import StepWrites
from harness.models import Run, RunStatus
from traces.services import OpenSpan, TraceRecorder


class StopReason:
    FINAL_ANSWER = "final_answer"
    MAX_STEPS = "max_steps"
    REPEATED_CALL = "repeated_call"
    DEADLINE = "deadline"
    CANCELLED = "cancelled"
    MODEL_ERROR = "model_error"
    CONFIGURATION = "configuration"


@dataclass
class StepOutcome:
    """What a step ended with: ``status`` None means "go on"."""

    status: RunStatus | None = None
    answer: str = ""
    detail: str = ""
    reason: str = ""


@dataclass
class Driver:
    """Who drives a run now, and whether they were asked to hand it to a worker."""

    owner: str
    handoff: threading.Event = field(default_factory=threading.Event)


@dataclass
class Drive:
    """Everything one drive of a run keeps in memory between its steps."""

    run: Run
    lease: state.Lease
    driver: Driver
    lost: threading.Event
    tracer: TraceRecorder
    writes: StepWrites
    guard: RunGuard
    session_span: OpenSpan
    messages: list[Message]
    history_length: int
    clear_input: str
    cancel_requested: bool = False
    policy: DrivePolicy | None = None
    # Why the last step's tool call failed (plan, then act: triggers one revision).
    last_failure: str = ""
    scope: CallScope | None = None
    agent: AgentSpec | None = None
    # The run's outcome so far (refused, denied, failed calls; a corrected answer).
    tally: OutcomeTally = field(default_factory=OutcomeTally)
    # Plan, then act: the run's plans in clear (``Run.plans`` holds them masked).
    plans: list[dict[str, Any]] = field(default_factory=list)
