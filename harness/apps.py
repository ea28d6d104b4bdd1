from django.apps import AppConfig


class HarnessConfig(AppConfig):
    name = "harness"
    verbose_name = "Agent runs"

    def ready(self) -> None:
        from axes.signals import user_locked_out

        from harness import checks  # noqa: F401  (registers the system checks)
        from harness.approval_wait import refuse_decisions_on_ended_runs
        from harness.console.login import log_lockout
        from harness.engine.approvals import on_approval_decided
        from harness.runs import ended_request_ids
        from policy.services import add_decision_guard, approval_decided
        from traces.services import register_ended_runs

        approval_decided.connect(on_approval_decided, dispatch_uid="harness.resume_on_approval")
        add_decision_guard(refuse_decisions_on_ended_runs)
        register_ended_runs(ended_request_ids)
        user_locked_out.connect(log_lockout, dispatch_uid="harness.log_console_lockout")
