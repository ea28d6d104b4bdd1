"""The audit streamed to SIEMs (docs/siem.md): every audit record, policy decision, approval,
policy edit, key event and console sign-in, as OCSF-shaped JSON lines, delivered after the
fact by a Celery beat task to the sinks of ``HARNESS_SIEM_SINKS`` (HTTPS JSON batches, Splunk
HEC, syslog RFC 5424 over TCP/TLS), at least once, in order, with a durable cursor per sink.

A wing of the ``harness`` app (it reads ``traces`` and ``policy``, which must not know it):
``events`` (the security events written here: key events, console sign-ins), ``records`` (the
schema), ``sources`` (what is read after each cursor), ``sinks`` (the senders), ``delivery``
(cursor, back-off, dead letters, lag).
"""
