"""Personal data that masking v1 stored in clear, and a tenant pattern that could stall workers
(issue #13)."""

import gc
import sys
import time

import pytest

from traces.errors import MaskingPatternInvalid
from traces.masking import Masker
from traces.masking.patterns import try_pattern


@pytest.mark.parametrize(
    "value",
    [
        "(718) 951-1807",
        "503-204-4660",
        "646-770-1943",
        "030 12345678",
        "06 12 34 56 78",
        "SSN 536-90-4399",
        "NINO AB123456C",
        "DNI 12345678Z",
        "Aadhaar 2341 2341 2346",
        "CPF 390.533.447-05",
    ],
)
def test_values_masking_v1_left_in_clear_are_masked(value):
    masked = Masker(b"key").mask_text(f"customer wrote: {value}.")

    digits = "".join(c for c in value if c.isdigit())
    assert value not in masked
    assert digits[-6:] not in "".join(c for c in masked if c.isdigit())


def test_a_custom_pattern_that_backtracks_exponentially_is_refused_before_it_runs():
    started = time.monotonic()

    with pytest.raises(MaskingPatternInvalid):
        try_pattern("customer_number", r"(\w+\s?)*!", "a" * 40)

    assert time.monotonic() - started < 1


# --- issue #20: personal data in real-world shapes the project's corpus never held ----------


@pytest.mark.parametrize(
    "value",
    [
        "IT37B9618417505042939821557",  # Italy: the BBAN begins with its CIN, a letter
        "IT44 A394 5592 7422 4259 3185 328",
        "SM86U0322509800000000270100",  # San Marino: the same structure
    ],
)
def test_ibans_whose_bban_begins_with_a_letter_are_masked(value):
    masked = Masker(b"key").mask_text(f"IBAN {value}, grazie")

    assert masked.startswith(f"IBAN {value[:2]}****")
    assert value not in masked


def test_american_express_written_4_6_5_with_dashes_is_masked():
    assert Masker(b"key").mask_text("card 3719-119680-51408 ok") == "card ****1408 ok"


@pytest.mark.parametrize(
    "value",
    [
        "510107198805062185",  # Chengdu Wuhou, created 1990; holder born 1988
        "310115198001010016",  # Shanghai Pudong, created 1993
        "440305197502030018",  # Shenzhen Nanshan, created 1990
    ],
)
def test_resident_ids_of_counties_younger_than_their_holder_are_masked(value):
    masked = Masker(b"key").mask_text(f"身份证号{value}。")

    assert masked.startswith("身份证号[national_id:")
    assert value not in masked


def test_a_resident_id_in_a_tool_result_is_stored_nowhere_in_clear(
    acme, agent_dir, tmp_path, settings
):
    from harness.models import Run
    from tests.factories import write_agent, write_script, write_tool
    from tests.traces.test_masking_at_rest import stored_text_by_table
    from traces.models import AuditRecord

    tools = tmp_path / "tools"
    tools.mkdir()
    settings.HARNESS_TOOL_DIRS = [*settings.HARNESS_TOOL_DIRS, tools]
    tool = write_tool(tools, handler="tests.traces.payment_tool.lookup_household")
    script = write_script(
        tmp_path,
        [{"tool_calls": [{"name": tool["name"], "arguments": {}}]}, {"text": "查到了户籍记录。"}],
    )
    agent = write_agent(agent_dir, model=f"scripted:{script}", tools=[tool["name"]])

    response = acme.post(
        "/api/v1/runs", {"agent": agent["name"], "user": "alice", "input": "查一下户籍"}
    )

    assert response.status_code == 200, response.content
    run = Run.objects.get(request_id=response.json()["request_id"])
    io = AuditRecord.objects.get(request_id=run.request_id, kind="tool_io")
    assert io.payload["result"]["record"].startswith("户籍：成都市武侯区。身份证号 [national_id:")
    leaks = [t for t, text in stored_text_by_table().items() if "510107198805062185" in text]
    assert leaks == []


_CLEAR = ("13812345678", "0755-8888 1234", "Quixotic Ltd order", "11010519491231002X")


def _reachable_strings(value, seen, depth=0):
    """Every string and number held by ``value`` (containers, caches' contents), as text."""
    if id(value) in seen or depth > 6:
        return
    seen.add(id(value))
    if isinstance(value, str | bytes | int | float):
        yield str(value)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _reachable_strings(key, seen, depth + 1)
            yield from _reachable_strings(item, seen, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _reachable_strings(item, seen, depth + 1)
    elif hasattr(value, "cache_info"):  # an lru_cache: its keys are what it remembers
        for referent in gc.get_referents(value):
            if isinstance(referent, dict):
                yield from _reachable_strings(referent, seen, depth + 1)


def test_no_module_wide_memo_keeps_clear_text_of_what_was_masked():
    masker = Masker(b"key")
    masker.mask_text(
        "Quixotic Ltd order: call 13812345678 or 0755-8888 1234 (Shenzhen), "
        "ID 11010519491231002X, (718) 951-1807, 06 12 34 56 78"
    )
    assert masker.drain()  # the values were found

    modules = [m for name, m in sys.modules.items() if name.startswith("traces.masking")]
    held = [
        text
        for module in modules
        for name, value in vars(module).items()
        if (not name.startswith("__") and not callable(value)) or hasattr(value, "cache_info")
        for text in _reachable_strings(value, set())
    ]
    digits_held = ["".join(c for c in text if c.isdigit()) for text in held]

    assert len(held) > 100  # the walk reaches the modules' tables
    for clear in _CLEAR:
        assert not any(clear in text for text in held), clear
    for clear in ("138123", "755888", "1949123100", "718951", "612345"):
        assert not any(clear in digits for digits in digits_held), clear
