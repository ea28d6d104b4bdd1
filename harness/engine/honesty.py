"""The honesty guard: a final answer may not hide a tool failure.

When a tool call failed, no later call of that tool succeeded, and the answer neither says it
failed nor quotes its error, the answer is replaced by one that states which tool failed and
why, in the language of the answer (English or Chinese).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from gateway.messages import Message

FAILURE_WORDS = re.compile(
    r"fail|error|could not|couldn't|can ?not|unable|refused|denied|not allowed|not permitted"
    r"|timed? ?out|did not|didn't|失败|错误|出错|未能|无法|不能|拒绝|没有权限|无权|超时|未成功",
    re.IGNORECASE,
)
CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class UnreportedFailure:
    tool: str
    call_id: str
    code: str
    message: str


def find_unreported_failures(answer: str, messages: list[Message]) -> list[UnreportedFailure]:
    """Failed calls (not later redeemed by a success of the same tool) the answer hides."""
    outstanding: dict[str, UnreportedFailure] = {}
    for message in messages:
        if message.role != "tool" or not message.name:
            continue
        if message.is_error:
            error = _error_of(message)
            outstanding[message.name] = UnreportedFailure(
                message.name, message.tool_call_id or "", error["code"], error["message"]
            )
        else:
            outstanding.pop(message.name, None)
    return [f for f in outstanding.values() if not _reports(answer, f)]


def honest_answer(answer: str, failures: list[UnreportedFailure]) -> str:
    chinese = bool(CJK.search(answer))
    if chinese:
        lines = [f"工具 {f.tool} 调用失败（{f.code}）：{f.message}" for f in failures]
        prefix = "注意：本次运行中有操作未能完成，以下回答可能不准确。"
    else:
        lines = [f"The tool {f.tool} failed ({f.code}): {f.message}" for f in failures]
        prefix = "Note: some actions in this run did not complete; the answer below may be wrong."
    return "\n".join([prefix, *lines, "", answer]).strip()


def _reports(answer: str, failure: UnreportedFailure) -> bool:
    if failure.code and failure.code in answer:
        return True
    if failure.message and failure.message[:40] in answer:
        return True
    return bool(FAILURE_WORDS.search(answer))


def _error_of(message: Message) -> dict[str, str]:
    try:
        error = json.loads(message.content).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    return {"code": str(error.get("code", "error")), "message": str(error.get("message", ""))}
