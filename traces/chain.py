"""The two-level audit chain: a hash chain per run, and per tenant a chain of run links.

Level 1, a run: its records are numbered 1, 2, … (``AuditRecord.sequence``), each one's hash
covers its content and the hash of the run's record before (the genesis hash for the first).
The run's driver is the only writer of its run (the engine fences it), so it numbers and
hashes records in memory (``RunChain``) and inserts them with the rest of a step's rows
(``insert_records``): no lock, no read before write, and runs of one tenant never wait for
each other.

Level 2, a tenant: when a run pauses or ends, ``anchor_run`` appends a link naming the run's
head (``AuditRunLink``: run, run sequence, run hash) to the tenant's chain, under the tenant's
head lock — once per pause or end, not per record. The tenant's head is signed (HMAC with
``HARNESS_AUDIT_CHECKPOINT_KEY``), as is retention's checkpoint, where verification starts after
expired runs were deleted; ``manage.py audit_head`` exports the signed head so that a chain cut
back to an earlier signed head is caught too (``verify_audit --expect-head``).

The link written when a run ends is *final* (``AuditRunLink.final``, inside its hash): it closes
the run's chain. Nothing may follow it (PostgreSQL triggers refuse records and links of a run
with a final link; ``verify_chain`` reports them everywhere).

Editing, deleting or reordering a record breaks its run's chain; rewriting or deleting a whole
linked run breaks its link; deleting links breaks the tenant's chain or its head;
``verify_chain`` names the first break. A run's records after its last link are verified as a
chain and need no link yet only while the run is still going: given which runs have ended
(``register_ended_runs``: the harness hands in its terminal runs, traces imports no app), an
ended run must end in a final link naming its last record. Links written before final links
existed (before the head's ``final_links_from``, set by the upgrade) are accepted as an ended
run's last link.

Hashes are computed over exactly what the database gives back: payloads go through
``normalize_json`` first (PostgreSQL's jsonb rewrites some numbers, refuses ``\\u0000``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from traces.errors import AuditRecordImmutable, NonFiniteNumber
from traces.keys import checkpoint_verify_keys
from traces.models import (
    AuditChainHead,
    AuditCheckpoint,
    AuditRecord,
    AuditRunLink,
    Span,
    SpanKind,
)
from traces.rows import insert_rows, new_row

GENESIS_HASH = "0" * 64
# What a NUL character or a lone UTF-16 surrogate in a string is stored as: jsonb refuses both.
REPLACEMENT_CHARACTER = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_unstorable = _UNSTORABLE.search


# --- What the database gives back ------------------------------------------------------------


def normalize_json(value: Any) -> Any:
    """``value`` exactly as a JSON column gives it back, on PostgreSQL (jsonb) and SQLite alike.

    - Tuples become lists; dict keys become strings the way ``json.dumps`` writes them
      (``1`` → ``"1"``, ``True`` → ``"true"``, ``None`` → ``"null"``); other objects their
      ``str()`` (as ``default=str`` did).
    - Floats: jsonb stores numbers as ``numeric`` and prints them without exponent, keeping
      the decimal scale of the text it was given: ``1.0`` stays ``1.0`` and ``1e-07`` reads back
      as the same float, but ``1e16`` becomes the integer ``10000000000000000``, ``1.5e300``
      15 followed by 299 zeros, and ``-0.0`` becomes ``0.0``. So a float whose shortest text
      has no decimals left (a non-negative exponent) becomes that integer, and ``-0.0`` ``0.0``.
    - Strings: ``\\u0000`` (refused by jsonb) and lone UTF-16 surrogates (refused by jsonb,
      unencodable in UTF-8) become U+FFFD; a surrogate pair becomes the character it encodes.

    Idempotent, and the result survives a database round trip unchanged.
    Raises ``NonFiniteNumber`` (with the JSON pointer) for NaN and ±Infinity.
    """
    try:
        return _normalize(value)
    except _NonFinite:
        # Found without building a pointer for every member on the way (the common case has
        # none to report): look again for where it is.
        path, number = _first_non_finite(value, "")
        raise NonFiniteNumber(path, number) from None


def to_json_value(value: Any) -> Any:
    """``value`` as it will read back from a JSON column: ``normalize_json`` (kept name)."""
    return normalize_json(value)


class _NonFinite(Exception):
    pass


def _normalize(value: Any) -> Any:
    # What a payload is mostly made of first: a plain string or key without NUL or surrogate
    # is its own normal form (no call of its own).
    if type(value) is str:
        return value if _unstorable(value) is None else _normalize_string(value)
    if isinstance(value, dict):
        return {
            key if type(key) is str and _unstorable(key) is None else _normalize_key(key): (
                _normalize(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_normalize(item) for item in value]
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        return _normalize_string(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _normalize_float(float(value))
    return _normalize_string(str(value))


def _normalize_string(text: str) -> str:
    text = str.__str__(text)
    if _UNSTORABLE.search(text) is None:
        return text
    text = text.replace("\x00", REPLACEMENT_CHARACTER)
    # A surrogate pair becomes its character, a lone surrogate U+FFFD (as jsonb reads them).
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _normalize_float(number: float) -> int | float:
    if not math.isfinite(number):
        raise _NonFinite
    if number == 0:
        return 0.0
    text = repr(number)
    if "e" in text:
        exact = Decimal(text)
        exponent = exact.as_tuple().exponent
        if isinstance(exponent, int) and exponent >= 0:
            return int(exact)
    return number


def _normalize_key(key: Any) -> str:
    if isinstance(key, str):
        return _normalize_string(key)
    if key is True or key is False or key is None:
        return json.dumps(key)
    if isinstance(key, int):
        return str(int(key))
    if isinstance(key, float):
        if not math.isfinite(key):
            raise _NonFinite
        return repr(float(key))
    return _normalize_string(str(key))


def _first_non_finite(value: Any, path: str) -> tuple[str, float] | None:
    """The JSON pointer and value of the first NaN or ±Infinity in ``value`` (a key's pointer
    ends in the key itself), in the order ``_normalize`` meets them."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, float) and not math.isfinite(key):
                return f"{path}/{key!r}", key
            found = _first_non_finite(item, f"{path}/{_pointer(key)}")
            if found:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _first_non_finite(item, f"{path}/{index}")
            if found:
                return found
    return None


def _pointer(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 text: one byte string per JSON value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# --- Hashing and signing ----------------------------------------------------------------------


def record_hash(
    *,
    tenant: str,
    sequence: int,
    prev_hash: str,
    request_id: str,
    span_id: str,
    kind: str,
    payload: Any,
    created_at: datetime,
) -> str:
    """SHA-256 of a record's content (``sequence`` and ``prev_hash`` are its run's)."""
    content = {
        "tenant": tenant,
        "sequence": sequence,
        "prev_hash": prev_hash,
        "request_id": request_id,
        "span_id": span_id,
        "kind": kind,
        "payload": payload,
        "created_at": created_at.isoformat(),
    }
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


def hash_of(record: AuditRecord) -> str:
    """The hash ``record`` should carry, recomputed from its stored content."""
    return record_hash(
        tenant=record.tenant,
        sequence=record.sequence,
        prev_hash=record.prev_hash,
        request_id=record.request_id,
        span_id=record.span_id,
        kind=record.kind,
        payload=record.payload,
        created_at=record.created_at,
    )


def link_hash(
    *,
    tenant: str,
    sequence: int,
    prev_hash: str,
    request_id: str,
    run_sequence: int,
    run_hash: str,
    created_at: datetime,
    final: bool = False,
) -> str:
    """SHA-256 of a run link's content (``sequence`` and ``prev_hash`` are the tenant's).

    A final link's content says so (``"final": true``), so the flag cannot be dropped or added
    without breaking the tenant's chain; a link that is not final has no such member, so links
    written before the flag existed keep their hash."""
    content: dict[str, Any] = {
        "link": True,
        "tenant": tenant,
        "sequence": sequence,
        "prev_hash": prev_hash,
        "request_id": request_id,
        "run_sequence": run_sequence,
        "run_hash": run_hash,
        "created_at": created_at.isoformat(),
    }
    if final:
        content["final"] = True
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


# Field for field as ``hash_of``, for the other kind of row (a keyword list, not shared logic).
def hash_of_link(link: AuditRunLink) -> str:
    """The hash ``link`` should carry, recomputed from its stored content."""
    return link_hash(
        tenant=link.tenant,
        sequence=link.sequence,
        prev_hash=link.prev_hash,
        request_id=link.request_id,
        run_sequence=link.run_sequence,
        run_hash=link.run_hash,
        created_at=link.created_at,
        final=link.final,
    )


def sign_link(role: str, tenant: str, sequence: int, link_hash: str, key: bytes = b"") -> str:
    """HMAC of a chain head or checkpoint: ``role`` keeps one from passing for the other."""
    message = canonical_json([role, tenant, sequence, link_hash]).encode()
    return hmac.new(key or _checkpoint_key(), message, hashlib.sha256).hexdigest()


def genesis(role: str, tenant: str) -> dict[str, Any]:
    """The fields of a tenant's ``role`` row (its chain head, its retention checkpoint) before
    any link: sequence 0 at the genesis hash, signed."""
    signature = sign_link(role, tenant, 0, GENESIS_HASH)
    return {"sequence": 0, "hash": GENESIS_HASH, "signature": signature}


def link_signature_valid(signature: str, role: str, tenant: str, sequence: int, h: str) -> bool:
    """Signed by any listed checkpoint key (rotation: older keys still verify)."""
    return any(
        hmac.compare_digest(signature, sign_link(role, tenant, sequence, h, key))
        for key in checkpoint_verify_keys()
    )


def _checkpoint_key() -> bytes:
    return settings.HARNESS_AUDIT_CHECKPOINT_KEY.encode()


# --- Writing: a run's chain, then its link into the tenant's chain -----------------------------


class RunChain:
    """The audit chain of one run. Loads the run's last (sequence, hash) once, lazily (one
    query), then numbers and hashes new records in memory.

    Only the run's (fenced) driver may write a run, so nothing is locked. If the transaction
    that was to insert linked records rolls back, call ``forget()`` (or drop this object):
    the next use reloads the head from the database.
    """

    def __init__(self, request_id: str, tenant: str, new: bool = False) -> None:
        """``new``: a run with no record yet (its first drive): the head is not read."""
        self.request_id = request_id
        self.tenant = tenant
        self._head: tuple[int, str] | None = (0, GENESIS_HASH) if new else None

    @property
    def head(self) -> tuple[int, str]:
        """(sequence, hash) of the run's last record; ``(0, GENESIS_HASH)`` if none."""
        if self._head is None:
            last = (
                AuditRecord.objects.filter(request_id=self.request_id)
                .order_by("-sequence")
                .values_list("sequence", "hash")
                .first()
            )
            self._head = (last[0], last[1]) if last else (0, GENESIS_HASH)
        return self._head

    def forget(self) -> None:
        """Drop the in-memory head (after a rollback): the next use reloads it."""
        self._head = None

    def link(
        self, span_id: str, kind: str, payload: Any, created_at: datetime | None = None
    ) -> AuditRecord:
        """An unsaved record: payload normalised, sequence/prev_hash/hash set; advances the
        in-memory head. Raises ``NonFiniteNumber`` (nothing advances) for NaN/±Infinity."""
        payload = normalize_json(payload)
        sequence, prev_hash = self.head
        record = new_row(
            AuditRecord,
            request_id=self.request_id,
            tenant=self.tenant,
            span_id=span_id,
            kind=kind,
            payload=payload,
            created_at=created_at or timezone.now(),
            sequence=sequence + 1,
            prev_hash=prev_hash,
        )
        record.hash = hash_of(record)
        record._chained = True  # type: ignore[attr-defined]  # made here: insert_records takes it
        self._head = (record.sequence, record.hash)
        return record


def insert_records(records: list[AuditRecord]) -> None:
    """One multi-row INSERT of records made by ``RunChain.link`` (the sanctioned path;
    ``AuditRecordQuerySet.bulk_create`` keeps refusing anything else)."""
    if not records:
        return
    if not all(getattr(record, "_chained", False) for record in records):
        raise AuditRecordImmutable("insert outside the chain")
    insert_rows(records)
    for record in records:
        record._chained = False  # type: ignore[attr-defined]  # inserted once only


def anchor_run(
    request_id: str, tenant: str, run_head: tuple[int, str], final: bool = False
) -> None:
    """Call inside the caller's transaction (after the run's records are inserted): lock the
    tenant head, append a link naming the run's head, move and re-sign the tenant head.

    ``final``: the run has ended (same transaction as its terminal status): the link closes
    the run's chain, even when a pause link names that head already.

    No-op when that run head is already linked (as final or not, as asked), or the run has no
    record. Lock order: callers lock their run row first, then this takes the tenant head (held
    to the caller's commit).
    """
    run_sequence, run_hash = run_head
    if run_sequence == 0:
        return
    with transaction.atomic(savepoint=False):
        head = _locked_head(tenant)
        link = AuditRunLink(
            tenant=tenant,
            sequence=head.sequence + 1,
            request_id=request_id,
            run_sequence=run_sequence,
            run_hash=run_hash,
            prev_hash=head.hash,
            created_at=timezone.now(),
            final=final,
        )
        link.hash = hash_of_link(link)
        linked = insert_rows(
            [link], ignore_conflicts=True, unique_fields=("request_id", "run_sequence", "final")
        )
        if not linked:
            return  # that run head is linked already (its unique constraint)
        AuditChainHead.objects.filter(pk=head.pk).update(
            sequence=link.sequence,
            hash=link.hash,
            signature=sign_link("head", tenant, link.sequence, link.hash),
            updated_at=timezone.now(),
        )


def finalize_run(request_id: str, tenant: str) -> None:
    """Close the chain of a run that ended without its driver (cancelled while queued or
    waiting for approval): a final link naming its last record (one read for the head), inside
    the caller's transaction, after the run row moved to its terminal status."""
    anchor_run(request_id, tenant, RunChain(request_id, tenant).head, final=True)


def append_audit_record(
    request_id: str, tenant: str, span_id: str, kind: str, payload: Any
) -> AuditRecord:
    """Append one record to its run's chain, for one-off writers outside a driven step:
    ``RunChain`` + insert (one query for the head, one insert). No anchor: the run's next
    pause or end links it into the tenant's chain."""
    record = RunChain(request_id, tenant).link(span_id, kind, payload)
    insert_records([record])
    return record


def _locked_head(tenant: str) -> AuditChainHead:
    head = AuditChainHead.objects.select_for_update().filter(tenant=tenant).first()
    if head is None:
        # A tenant's first link: create the head (a concurrent creator may win), then lock.
        AuditChainHead.objects.get_or_create(
            tenant=tenant,
            defaults=genesis("head", tenant),
        )
        head = AuditChainHead.objects.select_for_update().get(tenant=tenant)
    return head


# --- Verifying both levels -------------------------------------------------------------------


@dataclass(frozen=True)
class ChainBreak:
    """The first link of a tenant's chains that does not hold, and why.

    ``level`` is ``"run"`` (a record of a run's chain: ``sequence`` is the run's) or
    ``"tenant"`` (a link of the tenant's chain: ``sequence`` is the link's).
    """

    sequence: int
    reason: str
    record_id: int | None = None
    request_id: str = ""
    level: str = "run"

    def describe(self) -> str:
        if self.level == "tenant":
            where = f"link {self.sequence}"
            if self.request_id:
                where += f" (run {self.request_id})"
        elif self.record_id is not None:
            where = f"sequence {self.sequence} (record id {self.record_id}, run {self.request_id})"
        else:
            where = f"sequence {self.sequence} (run {self.request_id})"
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class ChainReport:
    tenant: str
    checked: int  # records verified
    starts_after: int  # the retention checkpoint's link sequence (0: from genesis)
    ends_at: int  # the last verified link's sequence
    broken: ChainBreak | None = None
    links: int = 0
    runs: int = 0

    @property
    def ok(self) -> bool:
        return self.broken is None


EndedRuns = Callable[[str], Iterable[str]]
_ended_run_sources: list[EndedRuns] = []


def register_ended_runs(source: EndedRuns) -> None:
    """Tell verification which runs have ended: ``source(tenant)`` yields the request ids of
    the tenant's runs in a terminal status. The harness registers its run table here (in its
    app's ``ready``); traces imports no app. Without a source, ended runs are not told apart
    from runs still going (records after a final link are reported all the same)."""
    if source not in _ended_run_sources:
        _ended_run_sources.append(source)


def ended_runs(tenant: str) -> set[str] | None:
    """The request ids of ``tenant``'s ended runs, from the registered sources (``None``: none
    registered)."""
    if not _ended_run_sources:
        return None
    ended: set[str] = set()
    for source in _ended_run_sources:
        ended.update(source(tenant))
    return ended


def verify_chain(tenant: str, ended: set[str] | None = None) -> ChainReport:
    """Check ``tenant``'s chain of run links, then every run's records, and name the first
    break: the checkpoint's and head's signatures, each link's order and hash, each run's
    records' order and hashes, each link against the run record it names, records after a
    run's final link, ended runs whose last record is not closed by a final link (``ended``:
    the request ids of runs in a terminal status; default: the registered ``ended_runs``), and
    runs with model calls (spans) but no audit at all."""
    if ended is None:
        ended = ended_runs(tenant)
    checkpoint = AuditCheckpoint.objects.filter(tenant=tenant).first()
    start, prev_hash = 0, GENESIS_HASH
    if checkpoint is not None:
        start, prev_hash = checkpoint.sequence, checkpoint.hash
        if not link_signature_valid(checkpoint.signature, "checkpoint", tenant, start, prev_hash):
            broken = ChainBreak(
                start, "the retention checkpoint's signature does not match", level="tenant"
            )
            return ChainReport(tenant, 0, start, start, broken)

    # Level 2: the tenant's links.
    links = list(
        AuditRunLink.objects.filter(tenant=tenant, sequence__gt=start).order_by("sequence")
    )
    expected = start + 1
    for link in links:
        fault = run_link_fault(link, expected, prev_hash)
        if fault is not None:
            return ChainReport(tenant, 0, start, expected - 1, fault, links=expected - start - 1)
        prev_hash, expected = link.hash, expected + 1
    last = expected - 1
    fault = _head_fault(tenant, last, prev_hash)
    if fault is not None:
        return ChainReport(tenant, 0, start, last, fault, links=len(links))

    # Level 1: every run's records, and the links that name them.
    named = links_by_run(links)
    records = AuditRecord.objects.filter(tenant=tenant).order_by("request_id", "sequence")
    final_from = (
        AuditChainHead.objects.filter(tenant=tenant)
        .values_list("final_links_from", flat=True)
        .first()
    )
    fault, checked, runs = runs_fault(records.iterator(chunk_size=1000), named, ended, final_from)
    if fault is None:
        fault = _missing_audit(tenant)
    return ChainReport(tenant, checked, start, last, fault, len(links), runs)


def links_by_run(links: list[AuditRunLink]) -> dict[str, list[AuditRunLink]]:
    """``links`` by run, in the tenant chain's order."""
    named: dict[str, list[AuditRunLink]] = {}
    for link in links:
        named.setdefault(link.request_id, []).append(link)
    return named


def runs_fault(
    records: Iterable[AuditRecord],
    named: dict[str, list[AuditRunLink]],
    ended: set[str] | None = None,
    final_from: int | None = None,
) -> tuple[ChainBreak | None, int, int]:
    """Walk records ordered by (run, sequence): each run's chain from genesis, every link in
    ``named`` against the record it names (a named run without records: deleted), no record
    after a run's final link, and, for the runs in ``ended``, a last record closed by a final
    link (or by any link before link ``final_from``: written before final links existed).
    Returns (the first break, records checked, runs seen)."""
    named = dict(named)
    checked, runs = 0, 0
    walk = _RunWalk(None)  # before the first run: no request id is None
    for record in records:
        if record.request_id != walk.request_id:
            fault = walk.finish(ended, final_from)
            if fault is not None:
                return fault, checked, runs
            walk = _RunWalk(record.request_id, named.pop(record.request_id, []))
            runs += 1
        fault = walk.step(record)
        if fault is not None:
            return fault, checked, runs
        checked += 1
    fault = walk.finish(ended, final_from)
    if fault is None and named:
        request_id, run_links = min(named.items(), key=lambda item: item[1][0].sequence)
        fault = ChainBreak(
            run_links[0].sequence,
            f"run {request_id} has no audit records left: the whole run was deleted",
            request_id=request_id,
            level="tenant",
        )
    return fault, checked, runs


class _RunWalk:
    """Walks one run's records in order, checking each link that names one of them."""

    def __init__(self, request_id: str | None, links: list[AuditRunLink] | None = None) -> None:
        self.request_id = request_id
        self.expected = 1
        self.prev_hash = GENESIS_HASH
        self.links = links or []
        self.at: dict[int, list[AuditRunLink]] = {}
        for link in self.links:
            self.at.setdefault(link.run_sequence, []).append(link)
        self.final = next((link for link in self.links if link.final), None)

    def step(self, record: AuditRecord) -> ChainBreak | None:
        fault = link_fault(record, self.expected, self.prev_hash)
        if fault is not None:
            return fault
        if self.final is not None and record.sequence > self.final.run_sequence:
            return ChainBreak(
                record.sequence,
                f"it was appended after the run's final link (link {self.final.sequence}, at "
                f"record {self.final.run_sequence}): the run had ended",
                record_id=record.pk,
                request_id=record.request_id,
            )
        for link in self.at.get(record.sequence, ()):
            if link.run_hash != record.hash:
                return ChainBreak(
                    link.sequence,
                    f"it names record {record.sequence} of run {record.request_id} with "
                    "another hash (the run was rewritten)",
                    request_id=record.request_id,
                    level="tenant",
                )
        self.prev_hash, self.expected = record.hash, self.expected + 1
        return None

    def finish(self, ended: set[str] | None, final_from: int | None) -> ChainBreak | None:
        last = self.expected - 1
        beyond = [link for link in self.links if link.run_sequence > last]
        if beyond:
            link = min(beyond, key=lambda link: link.run_sequence)
            missing = (
                f"record {last + 1}"
                if link.run_sequence == last + 1
                else f"records {last + 1} to {link.run_sequence}"
            )
            return ChainBreak(
                last + 1,
                f"{missing} at the end of the run are missing (deleted); link {link.sequence} "
                "names them",
                request_id=self.request_id,
            )
        if self.request_id is None or ended is None or self.request_id not in ended:
            return None  # a run still going: its records after its last link need no link yet
        closing = self.at.get(last, [])
        if not closing:
            linked = max((link.run_sequence for link in self.links), default=0)
            records = f"record {last}" if linked + 1 == last else f"records {linked + 1} to {last}"
            return ChainBreak(
                linked + 1,
                f"the run has ended but {records} are not linked into the tenant's chain "
                "(appended after its end, or its end was never linked: no final link)",
                request_id=self.request_id,
            )
        if any(link.final for link in closing):
            return None
        link = closing[-1]
        if final_from is None or link.sequence < final_from:
            return None  # linked before final links existed
        return ChainBreak(
            link.sequence,
            f"run {self.request_id} has ended but its last link is not final",
            request_id=self.request_id,
            level="tenant",
        )


def link_fault(record: AuditRecord, expected: int, prev_hash: str) -> ChainBreak | None:
    """Why ``record`` is not its run's valid record number ``expected`` after ``prev_hash``."""
    where = {"record_id": record.pk, "request_id": record.request_id}
    return _chain_fault("record", record, hash_of(record), expected, prev_hash, where)


def run_link_fault(link: AuditRunLink, expected: int, prev_hash: str) -> ChainBreak | None:
    """Why ``link`` is not the tenant's valid link number ``expected`` after ``prev_hash``."""
    where = {"request_id": link.request_id, "level": "tenant"}
    return _chain_fault("link", link, hash_of_link(link), expected, prev_hash, where)


def _chain_fault(
    noun: str,
    item: AuditRecord | AuditRunLink,
    content_hash: str,
    expected: int,
    prev_hash: str,
    where: dict[str, Any],
) -> ChainBreak | None:
    """The one check of both levels: numbered in order, linked to the one before, unedited."""
    if item.sequence != expected:
        missing = (
            f"{noun} {expected} is missing"
            if item.sequence == expected + 1
            else f"{noun}s {expected} to {item.sequence - 1} are missing"
        )
        return ChainBreak(expected, f"{missing} (deleted)", **where)
    if item.prev_hash != prev_hash:
        return ChainBreak(
            expected,
            f"it does not link to the {noun} before it "
            f"({noun}s were reordered, or the one before was changed)",
            **where,
        )
    if content_hash != item.hash:
        return ChainBreak(expected, "its content does not match its hash (edited)", **where)
    return None


def _head_fault(tenant: str, last: int, last_hash: str) -> ChainBreak | None:
    head = AuditChainHead.objects.filter(tenant=tenant).first()
    if head is None:
        if last == 0:
            return None
        return ChainBreak(last, "the chain has links but no head", level="tenant")
    if not link_signature_valid(head.signature, "head", tenant, head.sequence, head.hash):
        return ChainBreak(
            head.sequence, "the chain head's signature does not match", level="tenant"
        )
    if head.sequence > last:
        missing = (
            f"link {head.sequence}"
            if head.sequence == last + 1
            else f"links {last + 1} to {head.sequence}"
        )
        return ChainBreak(
            last + 1, f"{missing} at the end of the chain are missing (deleted)", level="tenant"
        )
    if head.sequence != last or head.hash != last_hash:
        return ChainBreak(
            last, "the chain's last link is not the one its head names", level="tenant"
        )
    return None


def _missing_audit(tenant: str) -> ChainBreak | None:
    """Runs whose model calls left spans but no audit record: their audit is gone (every model
    call writes a ``model_request`` record before the call). A link does not stand for the
    records: one after the checkpoint naming a run without records is reported before this
    (``runs_fault``), and one at or before it is never verified (retention deletes those with
    their runs and spans), so a row put there would otherwise hide a run's deleted audit."""
    audited = AuditRecord.objects.filter(tenant=tenant).values("request_id")
    orphans = list(
        Span.objects.filter(tenant=tenant, kind=SpanKind.MODEL_CALL)
        .exclude(request_id__in=audited)
        .values_list("request_id", flat=True)
        .distinct()
        .order_by("request_id")[:6]
    )
    if not orphans:
        return None
    more = ", …" if len(orphans) > 5 else ""
    return ChainBreak(
        0,
        f"runs with model calls have no audit records (the audit chain is missing): "
        f"{', '.join(orphans[:5])}{more}",
        request_id=orphans[0],
        level="tenant",
    )


# --- Exported heads -------------------------------------------------------------------------


def signed_head(tenant: str) -> dict[str, Any]:
    """The tenant's signed head, for export (``manage.py audit_head``)."""
    head = AuditChainHead.objects.filter(tenant=tenant).first()
    if head is None:
        sequence, last = 0, GENESIS_HASH
        signature = sign_link("head", tenant, 0, GENESIS_HASH)
    else:
        sequence, last, signature = head.sequence, head.hash, head.signature
    return {"tenant": tenant, "sequence": sequence, "hash": last, "signature": signature}


def extends_head(expected: dict[str, Any]) -> str | None:
    """Why ``tenant``'s chain no longer extends the exported head ``expected``; ``None`` if it
    does (the link at its sequence has its hash and the head is at or after it)."""
    try:
        tenant, sequence = str(expected["tenant"]), int(expected["sequence"])
        expected_hash, signature = str(expected["hash"]), str(expected["signature"])
    except (KeyError, TypeError, ValueError):
        return "the expected head is not a {tenant, sequence, hash, signature} object"
    if not hmac.compare_digest(signature, sign_link("head", tenant, sequence, expected_hash)):
        return "the expected head's signature does not match (not exported by this deployment)"
    head = AuditChainHead.objects.filter(tenant=tenant).first()
    current = head.sequence if head else 0
    if current < sequence:
        return (
            f"the chain was cut back: the expected head is at link {sequence}, "
            f"the chain now ends at link {current}"
        )
    if sequence == 0:
        return None
    link = AuditRunLink.objects.filter(tenant=tenant, sequence=sequence).first()
    if link is None:
        checkpoint = AuditCheckpoint.objects.filter(tenant=tenant).first()
        if checkpoint is not None and checkpoint.sequence == sequence:
            found = checkpoint.hash
        elif checkpoint is not None and checkpoint.sequence > sequence:
            return None  # deleted by retention: the signed checkpoint vouches for it
        else:
            return f"link {sequence} of the expected head is missing (deleted)"
    else:
        found = link.hash
    if found != expected_hash:
        return f"link {sequence} is not the expected head's (the chain was cut back and rewritten)"
    return None


def audited_tenants() -> list[str]:
    """Every tenant with a chain (records, links, a head or a checkpoint) or model calls."""
    tenants: set[str] = set(AuditChainHead.objects.values_list("tenant", flat=True))
    tenants.update(AuditCheckpoint.objects.values_list("tenant", flat=True))
    tenants.update(AuditRecord.objects.values_list("tenant", flat=True).distinct())
    tenants.update(AuditRunLink.objects.values_list("tenant", flat=True).distinct())
    tenants.update(
        Span.objects.filter(kind=SpanKind.MODEL_CALL).values_list("tenant", flat=True).distinct()
    )
    return sorted(tenants)


def run_heads(tenant: str) -> dict[str, tuple[int, datetime]]:
    """Each run of ``tenant``: (its last record's sequence, when it was written)."""
    rows = (
        AuditRecord.objects.filter(tenant=tenant)
        .values("request_id")
        .annotate(last=Max("sequence"), at=Max("created_at"))
    )
    return {row["request_id"]: (row["last"], row["at"]) for row in rows}
