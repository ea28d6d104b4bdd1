"""Typed errors of datasets and experiments (rendered by the API as ``{"error": {...}}``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from core.errors import DomainError


class ExperimentErrorCode(StrEnum):
    DATASET_NOT_FOUND = "dataset_not_found"
    DATASET_EXISTS = "dataset_exists"
    DATASET_ITEM_NOT_FOUND = "dataset_item_not_found"
    DATASET_EMPTY = "dataset_empty"
    RUN_NOT_RECORDED = "run_not_recorded"
    EXPERIMENT_NOT_FOUND = "experiment_not_found"
    UNSUPPORTED_CANDIDATE = "unsupported_candidate"
    EXPERIMENT_RUN_UNLINKED = "experiment_run_unlinked"


# Every other code is 400.
_STATUS = {
    ExperimentErrorCode.DATASET_NOT_FOUND: 404,
    ExperimentErrorCode.DATASET_ITEM_NOT_FOUND: 404,
    ExperimentErrorCode.EXPERIMENT_NOT_FOUND: 404,
    ExperimentErrorCode.DATASET_EXISTS: 409,
    ExperimentErrorCode.RUN_NOT_RECORDED: 409,
}


class ExperimentError(DomainError):
    """One class for every code (the status follows the code)."""

    code: ExperimentErrorCode

    def __init__(
        self, code: ExperimentErrorCode, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message, details, code=code)
        self.http_status = _STATUS.get(code, 400)
