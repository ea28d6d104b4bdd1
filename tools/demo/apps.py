from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "tools.demo"
    label = "demo"
    verbose_name = "Demo business systems (tickets, customers, outbox)"
