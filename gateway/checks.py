"""System check: the route table (``HARNESS_ROUTES``) and the default route are usable."""

from django.core import checks

from gateway.routes import check_route_table


@checks.register("harness")
def check_routes(app_configs, **kwargs) -> list[checks.CheckMessage]:
    return [
        checks.Error(fault, obj="HARNESS_ROUTES", id="gateway.E001")
        for fault in check_route_table()
    ]
