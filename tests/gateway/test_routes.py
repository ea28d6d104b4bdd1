"""Route configuration: the standard variables, HARNESS_ROUTES, the start-up check, prices."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from gateway.errors import InvalidRoute, UnknownProvider
from gateway.messages import Message
from gateway.services import complete, parse_route
from tests.fake_providers import anthropic_message, anthropic_usage, openai_completion, openai_usage
from tests.gateway.conftest import CONVERSATION

REPO = Path(__file__).resolve().parents[2]


def test_a_provider_route_takes_the_standard_variables(settings):
    settings.OPENAI_BASE_URL = "http://vllm.internal:8000/v1"
    settings.OPENAI_API_KEY = "sk-from-env"

    route = parse_route("openai:qwen2.5-7b-instruct")

    assert (route.provider, route.model) == ("openai", "qwen2.5-7b-instruct")
    assert (route.base_url, route.api_key) == ("http://vllm.internal:8000/v1", "sk-from-env")
    assert (route.stream, route.retries, route.timeout_s) == (False, 2, 60.0)


def test_without_a_base_url_the_providers_own_endpoints_are_used(settings):
    settings.OPENAI_BASE_URL = ""
    settings.ANTHROPIC_BASE_URL = ""

    assert parse_route("openai:gpt-4o-mini").base_url == "https://api.openai.com/v1"
    assert parse_route("anthropic:claude-sonnet-4-5").base_url == "https://api.anthropic.com"


def test_an_empty_route_is_the_default_model(settings):
    settings.HARNESS_MODEL = "anthropic:claude-sonnet-4-5"

    assert parse_route(None).name == "anthropic:claude-sonnet-4-5"
    assert parse_route("").model == "claude-sonnet-4-5"


def test_a_named_route_can_point_an_adapter_at_another_server(openai_server, routes):
    routes(
        {
            "local:qwen": {
                "provider": "openai",
                "model": "qwen2.5:7b",
                "base_url": openai_server.url,
                "api_key": "unused",
                "timeout_s": 5,
            }
        }
    )
    openai_server.queue(openai_completion("from the local server"))

    response = complete("local:qwen", CONVERSATION, [])

    assert (response.route, response.text) == ("local:qwen", "from the local server")
    assert openai_server.requests[0].body["model"] == "qwen2.5:7b"
    assert openai_server.requests[0].headers["authorization"] == "Bearer unused"


def test_options_of_the_star_entry_apply_to_every_route_unless_the_route_says_otherwise(routes):
    routes({"*": {"timeout_s": 20, "retries": 4}, "openai:fast": {"retries": 0}})

    assert (parse_route("openai:fast").timeout_s, parse_route("openai:fast").retries) == (20, 0)
    assert parse_route("anthropic:any").retries == 4


@pytest.mark.parametrize(
    ("route", "options", "fault"),
    [
        ("openai:m", {"timeout": 5}, "unknown option 'timeout'"),
        ("openai:m", {"retries": "3"}, "option 'retries' has the wrong type"),
        ("openai:m", {"stream": 1}, "option 'stream' has the wrong type"),
        ("openai:m", {"timeout_s": -1}, "must not be negative"),
        ("openai:m", {"price": {"in": 1}}, "price 'in' must be one of"),
        ("fast", {"model": "gpt-4o-mini"}, "needs a provider and a model"),
    ],
)
def test_bad_route_options_are_refused_naming_the_route(routes, route, options, fault):
    routes({route: options})

    with pytest.raises(InvalidRoute) as caught:
        parse_route(route)

    assert fault in caught.value.message
    assert route in caught.value.message


def test_a_route_to_an_unknown_provider_is_refused(routes):
    with pytest.raises(UnknownProvider) as caught:
        parse_route("gemini:pro")

    assert caught.value.code == "unknown_provider"


def test_start_up_stops_on_a_bad_route_table(routes, db):
    routes({"openai:m": {"timeout": 5}})

    with pytest.raises(SystemCheckError) as caught:
        call_command("check")

    assert "gateway.E001" in str(caught.value)
    assert "unknown option 'timeout'" in str(caught.value)


def test_routes_and_keys_come_from_the_environment_and_key_files(tmp_path):
    key_file = tmp_path / "qwen-key"
    key_file.write_text("sk-from-a-file\n")
    table = {"local:qwen": {"provider": "openai", "api_key_env": "QWEN_API_KEY", "stream": True}}
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "harness.settings.test",
        "HARNESS_ROUTES": json.dumps(table),
        "QWEN_API_KEY_FILE": str(key_file),
        "ANTHROPIC_API_KEY": "sk-ant-env",
        "ANTHROPIC_BASE_URL": "http://claude-proxy.internal",
    }
    script = (
        "import django; django.setup()\n"
        "from gateway.services import parse_route\n"
        "q, a = parse_route('local:qwen'), parse_route('anthropic:claude-sonnet-4-5')\n"
        "print(q.api_key, q.stream, a.api_key, a.base_url)\n"
    )

    result = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, text=True
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "sk-from-a-file",
        "True",
        "sk-ant-env",
        "http://claude-proxy.internal",
    ]


def test_a_route_table_that_is_not_json_stops_start_up():
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "harness.settings.test",
        "HARNESS_ROUTES": "{openai:m: {}}",
    }

    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
    )

    assert result.returncode != 0
    assert "HARNESS_ROUTES is not valid JSON" in result.stderr


def test_the_cost_comes_from_the_price_table_with_cached_tokens_cheaper(openai_server, routes):
    routes({"openai:priced": {"price": {"input": 2.5, "output": 10, "cached_input": 1.25}}})
    usage = openai_usage(prompt=10_000, completion=2_000, cached=4_000)
    openai_server.queue(openai_completion("ok", usage=usage))

    response = complete("openai:priced", CONVERSATION, [])

    # (6000 fresh * 2.5 + 4000 cached * 1.25 + 2000 out * 10) per million tokens
    assert response.cost_usd == pytest.approx(0.04)
    assert response.to_dict()["cost_usd"] == pytest.approx(0.04)


def test_the_cost_of_anthropic_cache_reads_uses_the_cached_price(anthropic_server, routes):
    routes({"anthropic:priced": {"price": {"input": 3, "output": 15, "cached_input": 0.3}}})
    usage = anthropic_usage(input=1_000, output=1_000, cache_read=10_000)
    anthropic_server.queue(anthropic_message("ok", usage=usage))

    response = complete("anthropic:priced", CONVERSATION, [])

    assert response.cost_usd == pytest.approx((1_000 * 3 + 10_000 * 0.3 + 1_000 * 15) / 1e6)


def test_a_route_without_prices_has_no_cost(openai_server):
    openai_server.queue(openai_completion("ok"))

    assert complete("openai:gpt-test", CONVERSATION, []).cost_usd is None


def test_a_named_script_moved_between_calls_is_found_in_its_new_folder(tmp_path, settings):
    """Resolved script paths are kept between model calls; one gone from its folder is looked
    up again, not answered from what was kept."""
    from gateway.providers import scripted

    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    settings.HARNESS_SCRIPT_DIRS = [str(first), str(second)]
    (first / "moving.json").write_text('[{"text": "from a"}]')
    messages = [Message(role="user", content="hi")]
    assert scripted.complete("moving", messages, []).text == "from a"
    (first / "moving.json").rename(second / "moving.json")
    (second / "moving.json").write_text('[{"text": "from b"}]')
    assert scripted.complete("moving", messages, []).text == "from b"
