"""The run engine: the agent loop and what it needs, one module per concern.

- ``state``: the run's state machine (claim, checkpoint, pause, resume, hand-off, cancel,
  finish, requeue), every transition a conditional, fenced UPDATE;
- ``heartbeat``: keeps a driver's lease alive during long model and tool calls;
- ``writes``: a step's rows, written in one fenced transaction;
- ``driver``: the loop itself, the run's lifecycle; ``step``: what one step does;
  ``drive``: what a drive keeps between its steps; ``guard``: budget, pacing and limits in
  memory;
- ``decisions``: the decision chain for one tool call, shared with replay;
  ``tool_calls``: deciding and executing a step's calls live;
- ``approvals``: pausing for and resuming after human approvals;
- ``context``: what the model sees; ``honesty``: the final answer's honesty guard.
"""
