from django.core.management.base import BaseCommand

from harness.demo import load_demo, write_demo_mcp_config
from harness.settings.env import env_str


class Command(BaseCommand):
    help = "Load (or reset) the demo tenants, users, policies and ticket desk. Idempotent."

    def handle(self, *args, **options) -> None:
        password = env_str("HARNESS_DEMO_ADMIN_PASSWORD", "harness-demo")
        counts = load_demo(admin_password=password)
        summary = ", ".join(f"{count} {name}" for name, count in counts.items())
        self.stdout.write(self.style.SUCCESS(f"Demo loaded: {summary}."))
        # The default HARNESS_MCP_CONFIG from now on, for every process of this checkout.
        self.stdout.write(f"Demo MCP servers configured in {write_demo_mcp_config()}.")
