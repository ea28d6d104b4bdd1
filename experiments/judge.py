"""An optional judge: a model route asked, with a rubric, whether the candidate's answer is
acceptable beside the recorded one. Its verdict and reasoning are stored with the item and
shown beside the scoring; they never decide the item's verdict (a judge is a model, and can be
wrong): the signal is the trajectory, outcome and the reviewer's assertions.

The judge must answer JSON ``{"verdict": "pass" | "fail", "reasoning": "…"}``; anything else
is stored as ``"verdict": "unreadable"`` with what it said.
"""

from __future__ import annotations

import json
from typing import Any

from experiments.errors import ExperimentError
from experiments.errors import ExperimentErrorCode as Code
from experiments.models import DatasetItem
from gateway import services as gateway
from gateway.errors import GatewayError
from gateway.messages import Message
from harness.models import Run
from traces.services import unseal

VERDICTS = ("pass", "fail")
INSTRUCTIONS = (
    "You judge an AI agent's answer against a rubric. Answer with JSON only: "
    '{"verdict": "pass" or "fail", "reasoning": "<one or two sentences>"}.'
)


def check_judge(judge: dict[str, Any] | None) -> None:
    if judge is None:
        return
    if set(judge) != {"model", "rubric"} or not all(
        isinstance(judge[key], str) and judge[key].strip() for key in judge
    ):
        raise ExperimentError(
            Code.INVALID_JUDGE,
            'A judge is {"model": "<route>", "rubric": "<what a good answer does>"}.',
            {"judge": judge},
        )
    try:
        gateway.parse_route(judge["model"])
    except GatewayError as exc:
        raise ExperimentError(Code.INVALID_JUDGE, exc.message, {"model": judge["model"]}) from exc


def judge_item(
    judge: dict[str, Any], item: DatasetItem, recording: dict[str, Any], run: Run
) -> dict[str, Any]:
    """``{"model", "verdict", "reasoning", "tokens"}``; a judge that fails to answer is
    ``"verdict": "error"`` (the item is still scored)."""
    candidate = (unseal(run.sealed, None) or {}).get("answer") or run.answer
    question = recording.get("input") or item.input
    reference = (item.expectations or {}).get("reference_answer") or recording.get("answer", "")
    prompt = (
        f"Rubric:\n{judge['rubric']}\n\nThe user asked:\n{question}\n\n"
        f"The recorded answer (a reference, not necessarily right):\n{reference}\n\n"
        f"The answer to judge:\n{candidate}"
    )
    messages = [Message(role="system", content=INSTRUCTIONS), Message(role="user", content=prompt)]
    try:
        response = gateway.complete(judge["model"], messages, [])
    except GatewayError as exc:
        return {"model": judge["model"], "verdict": "error", "reasoning": exc.message, "tokens": 0}
    tokens = response.usage.prompt_tokens + response.usage.completion_tokens
    verdict, reasoning = _read(response.text or "")
    return {"model": judge["model"], "verdict": verdict, "reasoning": reasoning, "tokens": tokens}


def _read(text: str) -> tuple[str, str]:
    body = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        data = json.loads(body)
    except ValueError:
        return "unreadable", text[:2000]
    if not isinstance(data, dict) or data.get("verdict") not in VERDICTS:
        return "unreadable", text[:2000]
    return data["verdict"], str(data.get("reasoning", ""))[:2000]
