from django.apps import AppConfig


class HarnessConfig(AppConfig):
    name = "harness"
    verbose_name = "Agent runs"

    def ready(self) -> None:
        from harness import checks  # noqa: F401  (registers the system checks)
        from harness.engine.approvals import on_approval_decided
        from policy.services import approval_decided

        approval_decided.connect(on_approval_decided, dispatch_uid="harness.resume_on_approval")
