"""Template filters of the admin console."""

from django import template

from harness.console.reads import format_money, mark_masked

register = template.Library()

register.filter("masked", mark_masked)
register.filter("money", format_money)
