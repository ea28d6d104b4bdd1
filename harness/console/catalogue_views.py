"""The catalogue's pages: agents, tools and MCP servers (``harness.console.catalogue``).
Behind the admin's login; any active staff user may open them (see there for what is scoped
to the user's tenants)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from harness.console.catalogue import list_agent_entries, list_server_entries, list_tool_entries


def catalogue_urls(site: admin.AdminSite) -> list[URLPattern]:
    pages = [
        ("agents", "Agents", lambda request: {"agents": list_agent_entries()}),
        ("tools", "Tools", lambda request: {"catalogue": list_tool_entries(request.user)}),
        ("mcp", "MCP servers", lambda request: {"catalogue": list_server_entries(request.user)}),
    ]
    return [
        path(
            f"catalogue/{name}/",
            site.admin_view(_page(site, name, title, read)),
            name=f"catalogue_{name}",
        )
        for name, title, read in pages
    ]


def _page(site: admin.AdminSite, name: str, title: str, read: Any) -> Any:
    def view(request: HttpRequest) -> HttpResponse:
        context = {
            **site.each_context(request),
            "title": title,
            "page": name,
            **read(request),
        }
        return TemplateResponse(request, f"admin/harness/catalogue/{name}.html", context)

    return view
