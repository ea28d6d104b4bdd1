"""Personal data and secrets the masking tests push through runs, and where they must not be."""

import json

PHONE_CN = "13812345678"  # the demo customer C-1001's phone, returned by get_customer
PHONE_CN_SPACED = "139 1234 5678"
PHONE_INTL = "+34 612 34 56 78"
EMAIL = "zhang.wei@example.com"  # C-1001's e-mail, returned by get_customer
NAME = "Zhang Wei"  # C-1001's name: declared "name" in get_customer's result
NAME_ZH = "张伟"  # declared "name" in lookup_payment's arguments
NATIONAL_ID = "11010519491231002X"
CARD = "4111 1111 1111 1111"
IBAN = "DE89 3704 0044 0532 0130 00"
API_KEY = "sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ6aGFuZyJ9.c2lnbmF0dXJlLXZhbHVlLTEyMzQ"
BEARER = "Bearer abcdEFGH1234ijklMNOP5678"
PRIVATE_KEY = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
)
PASSWORD = "password=CorrectHorseBattery9"
# Masking v2: phones the way people write them, and national IDs checked by python-stdnum.
PHONE_US = "(718) 951-1807"
PHONE_US_DASHED = "503-204-4660"
PHONE_DE = "030 12345678"
PHONE_JP = "090-1234-5678"
SSN = "536-90-4399"
NINO = "AB 12 34 56 C"
DNI = "12345678Z"
NIE = "X1234567L"
AADHAAR = "2341 2341 2346"
CPF = "390.533.447-05"
IBAN_GB = "GB82 WEST 1234 5698 7654 32"
CUSTOMER_NUMBER = "CUST-483920"  # a tenant's own identifier (a custom pattern in the admin)

READABLE = ["T-20250318-007", "ORD-55213", "INV-2025-0318"]
# Look-alikes the run carries too, which must stay readable.
LOOKALIKES = ["YT2233445566778899", "JD0012345678901", "2026-11-30 14:22:05", "192.168.10.254"]


def compact(value: str) -> str:
    return value.replace(" ", "")


def forbidden() -> list[str]:
    """Every value (and the spellings it may be stored in) that must not be found in clear."""
    values = [
        PHONE_CN,
        PHONE_CN_SPACED,
        compact(PHONE_CN_SPACED),
        PHONE_INTL,
        compact(PHONE_INTL),
        EMAIL,
        NAME,
        NAME_ZH,
        json.dumps(NAME_ZH)[1:-1],  # as an ASCII-escaped JSON column stores it
        NATIONAL_ID,
        CARD,
        compact(CARD),
        IBAN,
        compact(IBAN),
        API_KEY,
        JWT,
        BEARER.split()[1],
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        PASSWORD.split("=")[1],
        PHONE_US,
        "951-1807",
        "7189511807",
        PHONE_US_DASHED,
        "5032044660",
        PHONE_DE,
        "03012345678",
        PHONE_JP,
        "09012345678",
        SSN,
        "536904399",
        NINO,
        compact(NINO),
        DNI,
        NIE,
        AADHAAR,
        compact(AADHAAR),
        CPF,
        "39053344705",
        IBAN_GB,
        compact(IBAN_GB),
    ]
    return values
