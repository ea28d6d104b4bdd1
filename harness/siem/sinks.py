"""Where SIEM records go: the sinks of ``HARNESS_SIEM_SINKS`` (docs/siem.md).

- ``https``: JSON lines (``application/x-ndjson``), one batch per POST, optional bearer token;
- ``splunk_hec``: Splunk's HTTP Event Collector (``Authorization: Splunk <token>``, one
  ``{"time", "host", "source", "sourcetype", "event"}`` object per record);
- ``syslog``: RFC 5424 messages over TCP (RFC 6587 octet counting), with TLS (RFC 5425) when
  ``tls`` is on. No maintained Python library formats RFC 5424 for a socket we own (the
  candidates were last released in 2019 and 2022 and work only as logging handlers, which
  hide whether a message was written), so the header is written here: it is one line.

``send`` raises ``SinkUnavailable`` when trying again later may succeed (connection refused,
timeout, 408/429/5xx, 401/403: a token being fixed must not lose records) and ``SinkRefused``
when the sink will never take this batch (other 4xx).
"""

from __future__ import annotations

import json
import socket
import ssl
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from django.core.exceptions import ImproperlyConfigured

KINDS = ("https", "splunk_hec", "syslog")
STREAM_NAMES = ("audit", "approval", "policy_change", "security")
RETRYABLE = {401, 403, 408, 425, 429}
SYSLOG_FACILITY_LOG_AUDIT = 13  # RFC 5424 §6.2.1


class SinkUnavailable(Exception):
    """The sink did not take the batch now; the same batch is sent again later."""


class SinkRefused(Exception):
    """The sink answered that it will never take this batch."""


@dataclass(frozen=True)
class Sink:
    name: str
    kind: str
    url: str = ""
    token: str = field(default="", repr=False)
    host: str = ""
    port: int = 0
    tls: bool = False
    ca_file: str = ""
    verify: bool = True
    timeout_s: float = 5.0
    batch: int = 200
    streams: tuple[str, ...] = STREAM_NAMES
    app_name: str = "harness"


def parse_sinks(raw: Any, secrets: dict[str, str]) -> list[Sink]:
    """Sinks from the JSON of ``HARNESS_SIEM_SINKS``; ``token_env`` names the variable that
    holds a sink's token (read by the settings, ``_FILE`` allowed) and is looked up in
    ``secrets``. A bad entry raises ``ImproperlyConfigured`` naming the sink and the field."""
    if not isinstance(raw, list):
        raise ImproperlyConfigured("HARNESS_SIEM_SINKS must be a JSON list of sinks")
    sinks, names = [], set()
    for position, entry in enumerate(raw, start=1):
        where = f"HARNESS_SIEM_SINKS[{position}]"
        if not isinstance(entry, dict):
            raise ImproperlyConfigured(f"{where} must be an object")
        name, kind = str(entry.get("name") or ""), entry.get("type")
        if not name or name in names:
            raise ImproperlyConfigured(f"{where}: a unique 'name' is required")
        names.add(name)
        if kind not in KINDS:
            raise ImproperlyConfigured(f"{where} ({name}): 'type' must be one of {KINDS}")
        streams = tuple(entry.get("streams") or STREAM_NAMES)
        if unknown := sorted(set(streams) - set(STREAM_NAMES)):
            raise ImproperlyConfigured(f"{where} ({name}): unknown streams {unknown}")
        token = secrets.get(str(entry.get("token_env") or ""), "")
        if entry.get("token_env") and not token:
            raise ImproperlyConfigured(f"{where} ({name}): {entry['token_env']} is not set")
        sink = Sink(
            name=name,
            kind=kind,
            url=str(entry.get("url") or ""),
            token=token,
            host=str(entry.get("host") or ""),
            port=int(entry.get("port") or 0),
            tls=bool(entry.get("tls", False)),
            ca_file=str(entry.get("ca_file") or ""),
            verify=bool(entry.get("verify", True)),
            timeout_s=float(entry.get("timeout_s") or 5.0),
            batch=max(1, int(entry.get("batch") or 200)),
            streams=streams,
            app_name=str(entry.get("app_name") or "harness"),
        )
        if kind == "syslog" and not (sink.host and sink.port):
            raise ImproperlyConfigured(f"{where} ({name}): syslog needs 'host' and 'port'")
        if kind != "syslog" and not sink.url.startswith(("https://", "http://")):
            raise ImproperlyConfigured(f"{where} ({name}): 'url' must be an http(s) URL")
        sinks.append(sink)
    return sinks


def send(sink: Sink, records: list[dict[str, Any]]) -> None:
    """Deliver ``records`` to ``sink`` in order, or raise (see the module's docstring)."""
    if not records:
        return
    if sink.kind == "syslog":
        _send_syslog(sink, records)
    else:
        _send_http(sink, records)


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False, default=str)


def _send_http(sink: Sink, records: list[dict[str, Any]]) -> None:
    headers = {"User-Agent": "harness-siem/1"}
    if sink.kind == "splunk_hec":
        host = socket.gethostname()
        body = "\n".join(
            _line({"time": r["time_ms"] / 1000, "host": host, "source": sink.app_name,
                   "sourcetype": "harness:ocsf", "event": r})
            for r in records
        )  # fmt: skip
        headers["Content-Type"] = "application/json"
        if sink.token:
            headers["Authorization"] = f"Splunk {sink.token}"
    else:
        body = "".join(_line(r) + "\n" for r in records)
        headers["Content-Type"] = "application/x-ndjson"
        if sink.token:
            headers["Authorization"] = f"Bearer {sink.token}"
    verify: bool | str = sink.ca_file or sink.verify
    # The sink is the operator's own endpoint: no proxy from the environment, two quick
    # reconnects inside one attempt (httpx's transport retries connection failures only).
    transport = httpx.HTTPTransport(retries=2, verify=verify)
    try:
        with httpx.Client(transport=transport, timeout=sink.timeout_s, trust_env=False) as client:
            response = client.post(sink.url, content=body.encode(), headers=headers)
    except httpx.HTTPError as exc:
        raise SinkUnavailable(f"{type(exc).__name__}: {exc}") from exc
    if response.is_success:
        return
    answer = f"HTTP {response.status_code}: {response.text[:300]}"
    if response.status_code in RETRYABLE or response.status_code >= 500:
        raise SinkUnavailable(answer)
    raise SinkRefused(answer)


def syslog_message(sink: Sink, record: dict[str, Any], hostname: str) -> bytes:
    """One RFC 5424 message, octet-counted for TCP (RFC 6587 §3.4.1)."""
    severity = 4 if record.get("outcome") == "failure" else 6  # warning / informational
    priority = SYSLOG_FACILITY_LOG_AUDIT * 8 + severity
    timestamp = datetime.fromtimestamp(record["time_ms"] / 1000, tz=UTC)
    msgid = str(record.get("activity") or "-")[:32].replace(" ", "_") or "-"
    header = (
        f"<{priority}>1 {timestamp.isoformat(timespec='milliseconds').replace('+00:00', 'Z')} "
        f"{hostname[:255] or '-'} {sink.app_name[:48]} - {msgid} -"
    )
    message = f"{header} {_line(record)}".encode()
    return f"{len(message)} ".encode() + message


def _send_syslog(sink: Sink, records: list[dict[str, Any]]) -> None:
    """Connect, write every message, close. TCP syslog has no acknowledgement: a batch counts
    as delivered once written and the connection closed cleanly (for plain TCP, the listener
    also closed its side after reading to the end)."""
    hostname = socket.gethostname()
    payload = b"".join(syslog_message(sink, r, hostname) for r in records)
    try:
        with socket.create_connection((sink.host, sink.port), timeout=sink.timeout_s) as raw:
            if sink.tls:
                context = ssl.create_default_context(cafile=sink.ca_file or None)
                with context.wrap_socket(raw, server_hostname=sink.host) as tls:
                    tls.sendall(payload)
                return
            raw.sendall(payload)
            raw.shutdown(socket.SHUT_WR)
            _await_close(raw)
    except (OSError, ssl.SSLError) as exc:
        raise SinkUnavailable(f"{type(exc).__name__}: {exc}") from exc


def _await_close(sock: socket.socket) -> None:
    """Read until the listener closes (it has read what was written); a listener that keeps
    the connection open past the timeout is taken to have read it too."""
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return
