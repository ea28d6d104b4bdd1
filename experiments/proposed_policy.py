"""An experiment run under a proposed policy change (the what-if preview's format).

The run's drive asks its policy the usual questions (ACL, visible tools, chain rules, call
rules) — here answered by the tenant's policy with the proposed edits applied, in memory
(``policy.services.policy_snapshot``), through the same evaluation functions. Nothing is saved:
the tenant's stored policy is unchanged. Approvals, labels and their writes are the drive's own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from harness.engine.tool_calls import DrivePolicy
from policy import services as policy
from tools.registry import ToolDefinition


@dataclass
class ProposedDrivePolicy(DrivePolicy):
    snapshot: policy.PolicySnapshot | None = None

    @classmethod
    def over(cls, loaded: DrivePolicy, changes: list[dict[str, Any]]) -> ProposedDrivePolicy:
        """``loaded`` (the run's drive policy) with ``changes`` applied to its tenant's policy."""
        fields = {f.name: getattr(loaded, f.name) for f in dataclasses.fields(DrivePolicy)}
        return cls(**fields, snapshot=policy.policy_snapshot(loaded.tenant, changes))

    @property
    def _snapshot(self) -> policy.PolicySnapshot:
        assert self.snapshot is not None  # set by ``over``
        return self.snapshot

    def authorize(self, tool: ToolDefinition) -> policy.Decision:
        return self._snapshot.authorize_scopes(self.user_id, tuple(tool.access))

    def chain(self, tool: ToolDefinition) -> policy.RuleVerdict:
        return policy.evaluate_chain_rules(
            self._snapshot.rules, self.version, tool.name, tool.carries, tool.sink, self.held
        )

    def call_rules(self, tool: ToolDefinition, arguments: dict[str, Any]) -> policy.RuleVerdict:
        return policy.evaluate_call_rules(
            self._snapshot.rules, self.version, tool.name, tool.approval, arguments
        )

    def call_rule_verdicts(
        self, tool: ToolDefinition, arguments: dict[str, Any]
    ) -> list[policy.RuleVerdict]:
        return policy.call_rule_verdicts(
            self._snapshot.rules, self.version, tool.name, tool.approval, arguments
        )
