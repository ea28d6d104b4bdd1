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
    LIVE_TOOL_REFUSED = "live_tool_refused"
    INVALID_RANGE = "invalid_range"
    INVALID_JUDGE = "invalid_judge"
    INVALID_ASSERTION = "invalid_assertion"
    NOTHING_TO_ADD = "nothing_to_add"


# Every other code is 400.
_STATUS = {
    ExperimentErrorCode.DATASET_NOT_FOUND: 404,
    ExperimentErrorCode.DATASET_ITEM_NOT_FOUND: 404,
    ExperimentErrorCode.EXPERIMENT_NOT_FOUND: 404,
    ExperimentErrorCode.DATASET_EXISTS: 409,
    ExperimentErrorCode.RUN_NOT_RECORDED: 409,
    ExperimentErrorCode.DATASET_EMPTY: 409,
    # Well formed, refused for their meaning (what no schema can say): 422.
    ExperimentErrorCode.INVALID_RANGE: 422,
    ExperimentErrorCode.INVALID_ASSERTION: 422,
    ExperimentErrorCode.NOTHING_TO_ADD: 422,
    ExperimentErrorCode.UNSUPPORTED_CANDIDATE: 422,
    ExperimentErrorCode.LIVE_TOOL_REFUSED: 422,
    ExperimentErrorCode.INVALID_JUDGE: 422,
}


class ExperimentError(DomainError):
    """One class for every code (the status follows the code)."""

    code: ExperimentErrorCode

    def __init__(
        self, code: ExperimentErrorCode, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message, details, code=code)
        self.http_status = _STATUS.get(code, 400)
