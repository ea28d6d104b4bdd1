"""Finding 3: SSRF by DNS rebinding. Callbacks and HTTP tools connect to the address that was
vetted, keeping the name in Host and TLS SNI; IPv6 forms embedding IPv4 are refused."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.utils import timezone

from harness.models import Run, WebhookDelivery
from harness.webhooks import deliver
from tests.factories import create_tenant
from tools import net
from tools.errors import ToolHandlerError
from tools.http_tools import HttpHandler

VETTED, REBOUND = "127.0.0.2", "127.0.0.1"


class Server:
    """An HTTP server on one address that records each request's Host header."""

    def __init__(self, address: str, port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        self.hosts: list[str] = []
        self.sni: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                server.hosts.append(self.headers["host"])
                body = b'{"ok": true}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer((address, port), Handler)
        if tls is not None:
            tls.sni_callback = lambda sock, name, ctx: self.sni.append(name)
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def rebinding_resolver(monkeypatch):
    """``rebind.test`` answers the vetted address first, then 127.0.0.1 to every later query
    (what a rebinding DNS server does); other names resolve normally."""
    real = socket.getaddrinfo
    answers = iter([VETTED])
    queries: list[str] = []

    def getaddrinfo(host, port, *args, **kwargs):
        if host != "rebind.test":
            return real(host, port, *args, **kwargs)
        queries.append(host)
        address = next(answers, REBOUND)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return queries


@pytest.fixture
def two_servers():
    """The vetted address and the rebinding target, on the same port."""
    vetted = Server(VETTED)
    try:
        rebound = Server(REBOUND, vetted.port)
    except OSError:
        vetted.close()
        pytest.skip("the port is taken on 127.0.0.1")
    yield vetted, rebound
    vetted.close()
    rebound.close()


@pytest.mark.django_db
def test_a_callback_goes_to_the_vetted_address_although_dns_rebinds(
    settings, rebinding_resolver, two_servers
):
    vetted, rebound = two_servers
    settings.HARNESS_WEBHOOK_ALLOWED_NETWORKS = [f"{VETTED}/32"]  # 127.0.0.1 is not allowed
    tenant = create_tenant()
    run = Run.objects.create(
        tenant=tenant, request_id="rebind", agent="a", user_id="u", max_steps=1
    )
    delivery = WebhookDelivery.objects.create(
        run=run,
        event_type="run.succeeded",
        url=f"http://rebind.test:{vetted.port}/hook",
        payload={"type": "run.succeeded"},
        next_attempt_at=timezone.now(),
    )

    result = deliver(str(delivery.id))

    assert result.attempts == 1
    assert rebound.hosts == []
    assert vetted.hosts == [f"rebind.test:{vetted.port}"]
    assert rebinding_resolver == ["rebind.test"]  # resolved once, for check and connection


def test_an_http_tool_connects_to_the_address_it_resolved(rebinding_resolver, two_servers):
    vetted, rebound = two_servers
    handler = HttpHandler.from_spec(
        "get_order",
        {"method": "GET", "url": f"http://rebind.test:{vetted.port}/orders/{{order_id}}"},
    )
    context = SimpleNamespace(idempotency_key="run:call", deadline=None)

    assert handler({"order_id": "O-1"}, context) == {"ok": True}

    assert rebound.hosts == []
    assert vetted.hosts == [f"rebind.test:{vetted.port}"]
    assert rebinding_resolver == ["rebind.test"]


def test_an_http_tool_never_reaches_the_cloud_metadata_address(monkeypatch):
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "metadata.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    handler = HttpHandler.from_spec(
        "steal", {"method": "GET", "url": "http://metadata.test/latest/meta-data/"}
    )
    with pytest.raises(ToolHandlerError, match="address is not allowed") as caught:
        handler({}, SimpleNamespace(idempotency_key="k", deadline=None))
    assert caught.value.code == "tool_failed"


@pytest.mark.parametrize(
    "host",
    [
        "[::127.0.0.1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[64:ff9b::7f00:1]",
        "[2002:7f00:1::]",
        "[::ffff:a9fe:a9fe]",
        "[::ffff:8.8.8.8]",
    ],
)
def test_ipv6_forms_that_embed_an_ipv4_address_are_refused_as_callbacks(acme, host):
    response = acme.post(
        "/api/v1/runs",
        {
            "agent": "ticket-assistant",
            "user": "bob",
            "input": "hello",
            "mode": "async",
            "callback_url": f"http://{host}:8080/hook",
        },
    )
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["code"] == "invalid_request"


def _certificate_for(name: str, tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_https_keeps_the_name_in_sni_and_the_certificate_check(rebinding_resolver, tmp_path):
    cert, key = _certificate_for("rebind.test", tmp_path)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    server = Server(VETTED, tls=server_tls)
    client_tls = ssl.create_default_context(cafile=str(cert))
    transport = net.PinnedTransport(net.AddressPolicy(public_only=False), verify=client_tls)
    try:
        with httpx.Client(transport=transport) as client:
            response = client.get(f"https://rebind.test:{server.port}/x")
    finally:
        server.close()

    assert response.status_code == 200
    assert server.sni == ["rebind.test"]
    assert server.hosts == [f"rebind.test:{server.port}"]
