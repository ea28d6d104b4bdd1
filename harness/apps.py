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
        self._stream_security_events()

    @staticmethod
    def _stream_security_events() -> None:
        """Key events and console sign-ins, kept for the SIEM (harness.siem.events)."""
        from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
        from django.db.models.signals import post_save

        from harness.models import ApiKey
        from harness.siem import checks, events  # noqa: F401  (checks: the sinks' system check)

        user_logged_in.connect(events.on_logged_in, dispatch_uid="harness.siem.login")
        user_logged_out.connect(events.on_logged_out, dispatch_uid="harness.siem.logout")
        user_login_failed.connect(events.on_login_failed, dispatch_uid="harness.siem.failed")
        post_save.connect(events.on_api_key_saved, sender=ApiKey, dispatch_uid="harness.siem.key")
