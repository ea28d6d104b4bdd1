"""Run receipts: a signed, offline-verifiable account of what a run did (docs/evidence.md).

``document`` builds a receipt's content from the run, its audit chain and its approvals;
``signing`` holds the Ed25519 keys, signs receipts and publishes the public keys.
"""
