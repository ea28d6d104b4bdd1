"""A tool that only tests load: it hands back payment details full of personal data, some of
its fields declared sensitive in its tool file and some only findable by the detectors."""

from typing import Any

from tests.traces import pii


def lookup_payment(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    return {
        "holder": arguments["holder"],
        "national_id": pii.NATIONAL_ID,
        "card": pii.CARD,
        "statement": (
            f"Refunds go to IBAN {pii.IBAN}; bank API token {pii.JWT}; "
            f"signing key {pii.PRIVATE_KEY}; portal {pii.PASSWORD}"
        ),
        "order_id": "ORD-55213",
    }


def lookup_household(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """A household registration record: the resident ID in free text, declared nowhere."""
    return {
        "record": "户籍：成都市武侯区。身份证号 510107198805062185，登记于2009年。",
        "order_id": "ORD-55213",
    }
