#!/usr/bin/env python3
"""Verify a Harness run receipt offline: python harness_verify.py receipt.json --keys keys.json
[--trace trace.json]

Needs only Python 3.11+ and the ``cryptography`` package: no database, no Django, no Harness.
An auditor downloads three files from Harness and checks them anywhere:

- ``receipt.json``: ``GET /api/v1/runs/{id}/receipt``
- ``keys.json``: ``GET /.well-known/harness-receipt-keys`` (a JWK set of Ed25519 keys)
- ``trace.json`` (optional): ``GET /api/v1/runs/{id}/trace``

It checks the receipt's Ed25519 signature over its RFC 8785 (JCS) canonical form, the link of
the run's chain head into the tenant's chain, and, given the trace, that the trace's audit
records hash, one after the other, to the head the receipt names, and that the receipt's
digests of each tool call's arguments and result are the trace's. It exits 0 when all holds,
1 naming what does not (a field of the receipt by its JSON pointer, a record of the trace by its
sequence), 2 when a file cannot be read. See docs/evidence.md.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

GENESIS_HASH = "0" * 64
FORMAT = "harness-receipt/1"
MAX_SAFE_INTEGER = 2**53 - 1


class Unreadable(Exception):
    """A file is missing or not JSON (exit 2)."""


# --- RFC 8785: JSON Canonicalization Scheme ----------------------------------------------------


def jcs(value: Any) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON value."""
    return _jcs(value).encode("utf-8")


def _jcs(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise ValueError(f"the integer {value} is beyond I-JSON's exact range")
        return str(value)
    if isinstance(value, float):
        return _es6_number(value)
    if isinstance(value, str):
        return _jcs_string(value)
    if isinstance(value, list):
        return "[" + ",".join(_jcs(item) for item in value) + "]"
    if isinstance(value, dict):
        # Members sorted by their names' UTF-16 code units (RFC 8785 section 3.2.3).
        names = sorted(value, key=lambda name: name.encode("utf-16-be"))
        return "{" + ",".join(f"{_jcs_string(n)}:{_jcs(value[n])}" for n in names) + "}"
    raise ValueError(f"{type(value).__name__} is not a JSON value")


_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _jcs_string(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        elif 0xD800 <= ord(char) <= 0xDFFF:
            raise ValueError("a string holds a lone UTF-16 surrogate")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _es6_number(number: float) -> str:
    """ECMAScript's Number.prototype.toString (RFC 8785 section 3.2.2.3)."""
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError("NaN and Infinity are not JSON")
    if number == 0:
        return "0"
    if number < 0:
        return "-" + _es6_number(-number)
    exact = Decimal(repr(number)).normalize()  # the shortest digits that round-trip
    _sign, digit_tuple, exponent = exact.as_tuple()
    digits = "".join(map(str, digit_tuple))
    k, n = len(digits), len(digits) + int(exponent)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


# --- What Harness hashes -----------------------------------------------------------------------


def chain_json(value: Any) -> str:
    """The text Harness's audit chain hashes: sorted keys, no whitespace, UTF-8 text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def stored_time(text: str) -> str:
    """A time as the chain hashed it (Python's isoformat, UTC as +00:00; the API writes Z)."""
    return text[:-1] + "+00:00" if text.endswith("Z") else text


def record_hash(
    tenant: str, request_id: str, span_id: str, record: dict[str, Any], prev: str
) -> str:
    payload = record["recorded_payload"] if "recorded_payload" in record else record["payload"]
    content = {
        "tenant": tenant,
        "sequence": record["sequence"],
        "prev_hash": prev,
        "request_id": request_id,
        "span_id": span_id,
        "kind": record["kind"],
        "payload": payload,
        "created_at": stored_time(record["created_at"]),
    }
    return sha256_hex(chain_json(content))


def link_hash(tenant: str, request_id: str, link: dict[str, Any]) -> str:
    content: dict[str, Any] = {
        "link": True,
        "tenant": tenant,
        "sequence": link["sequence"],
        "prev_hash": link["prev_hash"],
        "request_id": request_id,
        "run_sequence": link["run_sequence"],
        "run_hash": link["run_hash"],
        "created_at": stored_time(link["created_at"]),
    }
    if link.get("final"):
        content["final"] = True
    return sha256_hex(chain_json(content))


def field_digests(receipt: Any) -> dict[str, str]:
    return {
        pointer: hashlib.sha256(jcs([pointer, value])).hexdigest()[:32]
        for pointer, value in leaves(receipt, "/receipt")
    }


def leaves(value: Any, pointer: str) -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        found = []
        for key, item in value.items():
            found += leaves(item, f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}")
        return found
    if isinstance(value, list) and value:
        found = []
        for index, item in enumerate(value):
            found += leaves(item, f"{pointer}/{index}")
        return found
    return [(pointer, value)]


# --- Keys and signature ------------------------------------------------------------------------


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def load_keys(keys: Any) -> dict[str, Ed25519PublicKey]:
    """The published Ed25519 keys by key id; each id must be its key's RFC 7638 thumbprint."""
    if not isinstance(keys, dict) or not isinstance(keys.get("keys"), list):
        raise Unreadable('keys.json is not a JWK set ({"keys": [...]})')
    found: dict[str, Ed25519PublicKey] = {}
    for jwk in keys["keys"]:
        if not isinstance(jwk, dict) or jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            continue
        thumbprint = {"crv": "Ed25519", "kty": "OKP", "x": jwk.get("x")}
        kid = base64.urlsafe_b64encode(hashlib.sha256(jcs(thumbprint)).digest()).rstrip(b"=")
        if kid.decode() != jwk.get("kid"):
            raise Unreadable(f"keys.json: the key listed as {jwk.get('kid')!r} is not that key")
        found[kid.decode()] = Ed25519PublicKey.from_public_bytes(b64url_decode(jwk["x"]))
    return found


def check_signature(document: dict[str, Any], keys: dict[str, Ed25519PublicKey]) -> list[str]:
    signature = document.get("signature")
    if not isinstance(signature, dict):
        return ["/signature is missing"]
    if signature.get("alg") != "EdDSA":
        return [f"/signature/alg is {signature.get('alg')!r}, not 'EdDSA'"]
    kid = signature.get("kid")
    if kid not in keys:
        return [f"/signature/kid: keys.json has no key {kid!r} (changed, or a key not published)"]
    unsigned = {**document, "signature": {k: v for k, v in signature.items() if k != "value"}}
    try:
        keys[kid].verify(b64url_decode(str(signature.get("value", ""))), jcs(unsigned))
    except (InvalidSignature, ValueError):
        return _what_changed(document, kid)
    return []


def _what_changed(document: dict[str, Any], kid: str) -> list[str]:
    """The signature does not hold: name the fields whose value no longer matches its signed
    digest (``fields``), else the signature itself."""
    signed = document.get("fields") if isinstance(document.get("fields"), dict) else {}
    try:
        now = field_digests(document.get("receipt"))
    except ValueError as exc:
        return [f"/receipt holds a value JSON canonicalisation refuses: {exc}"]
    problems = [
        f"{pointer} was changed (its value no longer matches its signed digest in /fields)"
        for pointer in now
        if pointer in signed and signed[pointer] != now[pointer]
    ]
    problems += [
        f"{pointer} was added (not in the signed receipt)"
        for pointer in now
        if pointer not in signed
    ]
    problems += [f"{pointer} was removed" for pointer in signed if pointer not in now]
    extra = sorted(set(document) - {"receipt", "fields", "signature"})
    problems += [f"/{name} was added (not in the signed receipt)" for name in extra]
    return problems or [
        f"/signature/value does not verify with key {kid}: the signature, /signature/kid or "
        "/fields was changed"
    ]


# --- The receipt's own consistency, and the trace ----------------------------------------------


def check_chain(receipt: dict[str, Any]) -> list[str]:
    run, chain = receipt.get("run", {}), receipt.get("chain", {})
    head, link = chain.get("head") or {}, chain.get("tenant_link")
    if link is None:
        return []
    problems = []
    if link.get("final") and (link.get("run_sequence"), link.get("run_hash")) != (
        head.get("sequence"),
        head.get("hash"),
    ):
        problems.append("/receipt/chain/tenant_link does not name /receipt/chain/head")
    if link_hash(run.get("tenant", ""), run.get("request_id", ""), link) != link.get("hash"):
        problems.append("/receipt/chain/tenant_link/hash is not the hash of the link's content")
    return problems


def check_trace(receipt: dict[str, Any], trace: Any) -> tuple[list[str], int]:
    """The trace's audit records, in sequence order, chained from genesis to the receipt's head;
    the receipt's digests of arguments and results against the trace's tool records."""
    run = receipt.get("run", {})
    if not isinstance(trace, dict) or not isinstance(trace.get("spans"), list):
        raise Unreadable('trace.json is not a run trace ({"request_id", "spans": [...]})')
    if trace.get("request_id") != run.get("request_id"):
        return [
            f"trace.json is run {trace.get('request_id')!r}'s, not {run.get('request_id')!r}"
        ], 0
    records = sorted(
        (
            (span.get("span_id", ""), record)
            for span in trace["spans"]
            for record in span.get("audit", [])
        ),
        key=lambda pair: pair[1].get("sequence", 0),
    )
    problems: list[str] = []
    prev = GENESIS_HASH
    for number, (span_id, record) in enumerate(records, start=1):
        where = f"trace record {record.get('sequence')} ({record.get('kind')}, span {span_id})"
        if record.get("sequence") != number:
            problems.append(f"{where}: expected sequence {number} (a record was removed or added)")
            break
        if record.get("prev_hash") != prev:
            problems.append(f"{where}: prev_hash does not name the record before it")
        try:
            computed = record_hash(
                run.get("tenant", ""), run.get("request_id", ""), span_id, record, prev
            )
        except (KeyError, TypeError) as exc:
            problems.append(f"{where}: a member is missing ({exc})")
            break
        if computed != record.get("hash"):
            problems.append(
                f"{where}: its content was changed (it does not hash to its recorded hash)"
            )
        prev = computed
    head = receipt.get("chain", {}).get("head", {})
    if not problems and (len(records), prev) != (head.get("sequence"), head.get("hash")):
        problems.append(
            f"the trace's {len(records)} records hash to {prev}, not to /receipt/chain/head "
            f"(sequence {head.get('sequence')}, hash {head.get('hash')})"
        )
    problems += _tool_digests_against(receipt, [record for _, record in records])
    return problems, len(records)


def _tool_digests_against(receipt: dict[str, Any], records: list[dict[str, Any]]) -> list[str]:
    ran = {
        r["payload"].get("call_id"): r["payload"]
        for r in records
        if r.get("kind") == "tool_io" and isinstance(r.get("payload"), dict)
    }
    problems = []
    for index, call in enumerate(receipt.get("tool_calls", [])):
        io = ran.get(call.get("call_id"))
        if io is None or "arguments_sha256" not in call:
            continue
        outcome = io.get("result") if io.get("status") == "ok" else io.get("error")
        if sha256_hex(chain_json(io.get("arguments"))) != call["arguments_sha256"]:
            problems.append(f"/receipt/tool_calls/{index}/arguments_sha256 is not the trace's")
        if sha256_hex(chain_json(outcome)) != call.get("result_sha256"):
            problems.append(f"/receipt/tool_calls/{index}/result_sha256 is not the trace's")
    return problems


# --- Command line ------------------------------------------------------------------------------


def read_json(path: str, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise Unreadable(f"{what} {path} cannot be read: {exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Unreadable(f"{what} {path} is not JSON: {exc}") from exc


def verify(
    receipt_path: str, keys_path: str, trace_path: str | None = None
) -> tuple[list[str], str]:
    """(problems, summary); no problem means the receipt (and the trace) hold."""
    document = read_json(receipt_path, "receipt")
    keys = load_keys(read_json(keys_path, "keys"))
    if not isinstance(document, dict) or not isinstance(document.get("receipt"), dict):
        return ["receipt.json has no /receipt object"], ""
    problems = check_signature(document, keys)
    if problems:
        return problems, ""
    receipt = document["receipt"]
    if receipt.get("format") != FORMAT:
        return [f"/receipt/format is {receipt.get('format')!r}; this verifier reads {FORMAT}"], ""
    problems = check_chain(receipt)
    run = receipt["run"]
    summary = (
        f"receipt of run {run.get('id')} (tenant {run.get('tenant')}, {run.get('status')}, "
        f"outcome {run.get('outcome')}) signed by key {document['signature']['kid']}"
    )
    if trace_path is not None:
        trace_problems, count = check_trace(receipt, read_json(trace_path, "trace"))
        problems += trace_problems
        summary += f"; the trace's {count} audit records hash to its chain head"
    return problems, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Verify a Harness run receipt offline.")
    parser.add_argument("receipt", help="the receipt (GET /api/v1/runs/{id}/receipt)")
    parser.add_argument("--keys", required=True, help="GET /.well-known/harness-receipt-keys")
    parser.add_argument("--trace", help="the run's trace (GET /api/v1/runs/{id}/trace)")
    args = parser.parse_args(argv)
    try:
        problems, summary = verify(args.receipt, args.keys, args.trace)
    except Unreadable as exc:
        print(f"harness-verify: {exc}", file=sys.stderr)
        return 2
    if problems:
        for problem in problems:
            print(f"FAILED: {problem}", file=sys.stderr)
        return 1
    print(f"OK: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
