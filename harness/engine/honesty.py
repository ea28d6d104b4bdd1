"""The honesty guard: a final answer may not contradict what the run's tool calls did.

It compares the answer with the calls, both ways, in English and Chinese:

- **a failure hidden**: a call failed (and was not redeemed, below) and the answer neither
  says something failed nor quotes the error;
- **an action claimed after a failure**: a sentence names a call that failed, was refused or
  was denied and says its action happened ("Ticket T-… is now escalated", "工单已升级");
- **a refusal or inaction claimed after a success**: a sentence names a call that succeeded
  and says it did not happen or was refused ("that e-mail was not sent", "邮件未发送",
  "policy rule … refused it").

The answer is then corrected: a note naming each call and what it really did goes first, and
the sentences that contradicted the trace are removed (the rest of the answer is kept).

Failures are tracked per call id. A later success of the same tool redeems a failed call only
when it is that call again — a retry with the same arguments — or, for a call that certainly
did not act (the tool refused it, raised, or was refused by the policy), the model's
corrected next call of that tool; one success redeems one failure. A call whose effect is
unknown (``outcome_unknown``, ``timeout``: it may have acted) or that a human denied is never
redeemed by a different call: that is another action, not the same one done.

Which call a sentence speaks of is read from the call itself: its tool's name and the words in
it (``send_external_email``: "send", "e-mail"; a few have Chinese glosses), its ``action``
argument, and its arguments' values (a ticket id, an address). A sentence that names no call
is never judged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gateway.messages import Message

FAILURE_WORDS = re.compile(
    r"fail|error|could not|couldn't|can ?not|unable|refused|denied|not allowed|not permitted"
    r"|timed? ?out|did not|didn't|失败|错误|出错|未能|无法|不能|拒绝|没有权限|无权|超时|未成功",
    re.IGNORECASE,
)
CJK = re.compile(r"[\u4e00-\u9fff]")

# Failures a different call of the tool cannot redeem: the call may have acted (its effect is
# unknown), or a human refused that very action.
NOT_REDEEMABLE = frozenset({"outcome_unknown", "timeout", "mcp_unavailable", "approval_denied"})

# --- the words of a call ----------------------------------------------------------------------

# Tool-name words that say nothing about which call is meant.
GENERIC = frozenset(
    {"get", "list", "search", "find", "read", "fetch", "lookup", "query", "check", "set",
     "do", "run", "make", "call", "tool", "external", "internal", "by", "for", "to", "of",
     "and", "the", "a", "an", "id", "ids", "info", "data", "details", "new", "all"}
)  # fmt: skip
SYNONYMS = {
    "email": ("email", "e-mail", "mail"),
    "mail": ("mail", "email", "e-mail"),
    "message": ("message",),
    "ticket": ("ticket",),
}
# Chinese words for the common words of tool names and actions.
GLOSSES = {
    "send": ("发送", "发出", "寄出", "发"),
    "email": ("电子邮件", "邮件"),
    "mail": ("邮件",),
    "escalate": ("升级",),
    "assign": ("分配", "指派"),
    "resolve": ("解决", "关闭"),
    "close": ("关闭",),
    "notify": ("通知",),
    "update": ("更新",),
    "ticket": ("工单",),
    "user": ("用户",),
    "customer": ("客户",),
    "refund": ("退款",),
    "create": ("创建",),
    "delete": ("删除",),
    "cancel": ("取消",),
    "message": ("消息",),
    "order": ("订单",),
    "pay": ("付款", "支付"),
    "transfer": ("转账",),
    "approve": ("批准",),
    "publish": ("发布",),
}
IRREGULAR = {
    "send": ("sent",),
    "pay": ("paid",),
    "write": ("wrote", "written"),
    "get": ("got", "gotten"),
    "find": ("found",),
    "make": ("made",),
    "buy": ("bought",),
    "put": ("put",),
    "cancel": ("cancelled", "canceled"),
    "email": ("emailed", "e-mailed"),
    "mail": ("mailed",),
}
VERBS = frozenset(
    {"send", "escalate", "assign", "resolve", "close", "notify", "update", "create", "delete",
     "cancel", "refund", "pay", "transfer", "approve", "publish", "post",
     "remove", "add", "reopen", "archive", "block", "book", "charge", "issue", "ship",
     "submit", "write", "reply", "forward", "schedule", "open"}
)  # fmt: skip


def _past(verb: str) -> tuple[str, ...]:
    """Past forms of an English verb (regular rules, a few irregular ones)."""
    if verb in IRREGULAR:
        return IRREGULAR[verb]
    if verb.endswith("e"):
        return (verb + "d",)
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        return (verb[:-1] + "ied",)
    if re.fullmatch(r"[^aeiou]*[aeiou][bdgmnprt]", verb):  # ship, stop, plan
        return (verb + verb[-1] + "ed",)
    return (verb + "ed",)


def _forms(verb: str) -> tuple[str, ...]:
    ing = verb[:-1] + "ing" if verb.endswith("e") and not verb.endswith("ee") else verb + "ing"
    third = verb[:-1] + "ies" if verb.endswith("y") and verb[-2:-1] not in "aeiou" else verb + "s"
    return (verb, third, ing, *_past(verb))


@dataclass(frozen=True)
class Call:
    """One tool call of the run and how it ended."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    ok: bool
    code: str = ""
    message: str = ""


@dataclass
class _Words:
    verbs: set[str] = field(default_factory=set)  # lemmas
    nouns: set[str] = field(default_factory=set)
    values: set[str] = field(default_factory=set)  # argument values, as written


def _words(call: Call) -> _Words:
    words = _Words()
    tokens = [t for t in re.split(r"[_\W]+", call.tool.lower()) if t]
    for token in tokens:
        if token in VERBS:
            words.verbs.add(token)
        elif token not in GENERIC and len(token) > 2:
            words.nouns.add(token)
    action = call.arguments.get("action")
    if isinstance(action, str) and re.fullmatch(r"[a-z]+", action.lower()):
        words.verbs.add(action.lower())
    for value in _string_values(call.arguments):
        if len(value) >= 5 and re.search(r"[\d@.\-_]", value) and len(value) <= 80:
            words.values.add(value)
    return words


def _string_values(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value.strip()]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _string_values(v)]
    if isinstance(value, list):
        return [s for v in value for s in _string_values(v)]
    return []


def _alternation(words: list[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


class _Matcher:
    """The patterns that tell whether a clause names one call, and what it says of it."""

    def __init__(self, call: Call) -> None:
        self.call = call
        words = _words(call)
        english_verbs = [f for verb in words.verbs for f in _forms(verb)]
        self.past = [p for verb in words.verbs for p in _past(verb)]
        nouns = [s for noun in words.nouns for s in SYNONYMS.get(noun, (noun,))]
        nouns += [f"{noun}s" for noun in words.nouns]
        glosses_verbs = [g for verb in words.verbs for g in GLOSSES.get(verb, ())]
        glosses_nouns = [g for noun in words.nouns for g in GLOSSES.get(noun, ())]
        self.name = re.compile(re.escape(call.tool), re.IGNORECASE)
        self.values = [v.lower() for v in words.values]
        self.nouns = _word_pattern(nouns, glosses_nouns)
        self.verbs = _word_pattern(english_verbs, glosses_verbs)
        self.past_re = _word_pattern(self.past, [])
        negated_en = (
            rf"(?:\b(?:not|never|no longer|unable to|failed to)|n't)\s+(?:[\w-]+\s+){{0,3}}?"
            rf"(?:{_alternation(english_verbs)})\b"
            if english_verbs
            else None
        )
        negated_zh = (
            rf"(?:未|没有|没|并未|尚未|从未|无法|不能|未能|不会)[^，。,.;；]{{0,3}}?"
            rf"(?:{_alternation(glosses_verbs)})"
            if glosses_verbs
            else None
        )
        self.negated = [re.compile(p, re.IGNORECASE) for p in (negated_en, negated_zh) if p]
        done_zh = (
            rf"(?:已经?|都已|均已)[^，。,.;；未没不]{{0,4}}?(?:{_alternation(glosses_verbs)})"
            rf"|(?:{_alternation(glosses_verbs)})了"
            if glosses_verbs
            else None
        )
        self.done_zh = re.compile(done_zh) if done_zh else None

    def names(self, clause: str) -> int:
        """How specifically the clause names this call: 2 by name or argument, 1 by its
        words, 0 not at all."""
        lowered = clause.lower()
        if self.name.search(clause) or any(v in lowered for v in self.values):
            return 2
        if self.nouns is not None and self.nouns.search(clause):
            return 1
        return 0

    def says_not_done(self, clause: str) -> bool:
        return any(p.search(clause) for p in self.negated)

    def says_done(self, clause: str) -> bool:
        if NEGATION.search(clause) or FAILURE_WORDS.search(clause) or HEDGE.search(clause):
            return False
        if self.past_re is not None and self.past_re.search(clause):
            return True
        return bool(self.done_zh and self.done_zh.search(clause))


def _word_pattern(english: list[str], chinese: list[str]) -> re.Pattern[str] | None:
    parts = []
    if english:
        parts.append(rf"\b(?:{_alternation(english)})\b")
    if chinese:
        parts.append(rf"(?:{_alternation(chinese)})")
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None


NEGATION = re.compile(
    r"\b(?:not|never|no|none|nothing|neither|nor|without)\b|n't|未|没|不|无|尚未|并未",
    re.IGNORECASE,
)
REFUSAL = re.compile(
    r"\b(?:refused|rejected|blocked|denied|disallowed|prevented|forbidden|declined by)\b"
    r"|\bnot (?:allowed|permitted|authori[sz]ed)\b"
    r"|拒绝|拦截|阻止|禁止|不允许|驳回|被拒",
    re.IGNORECASE,
)
POLICY_WORDS = re.compile(
    r"\b(?:policy|policies|rule|approval|approver|permission|guard)\b|策略|规则|审批|权限",
    re.IGNORECASE,
)
# Future, conditional or pending: not a claim that the action happened.
HEDGE = re.compile(
    r"\b(?:will|would|could|should|once|if|unless|pending|awaiting|await|wait|waiting|"
    r"request|requested|asks?|asked|asking|wants?|wanted|approval|needs?|until|to be)\b"
    r"|将会|如果|待|等待|需要|申请|请求|要求",
    re.IGNORECASE,
)
PRONOUN = re.compile(r"\b(?:it|this|that|them|these|those)\b|它|其|该", re.IGNORECASE)

SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。\uff01\uff1f\n])")
CLAUSE_END = re.compile(r"[,;:，；：]\s*|\s+(?:and|but|while|whereas|however)\s+|但是|但|并且|而且")


# --- the guard ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One way the answer contradicts the run: ``hidden_failure``, ``claimed_action`` (after
    a failure) or ``claimed_inaction`` (after a success)."""

    kind: str
    tool: str
    call_id: str
    code: str = ""
    message: str = ""
    sentence: str = ""


@dataclass(frozen=True)
class Verdict:
    findings: list[Finding]
    answer: str  # the corrected answer (the same text when nothing was found)

    @property
    def corrected(self) -> bool:
        return bool(self.findings)


def calls_of(messages: list[Message]) -> list[Call]:
    """The run's tool calls in the order their results came, with the arguments proposed."""
    arguments: dict[str, dict[str, Any]] = {}
    calls: list[Call] = []
    for message in messages:
        if message.role == "assistant":
            for call in message.tool_calls:
                arguments[call.id] = call.arguments or {}
        elif message.role == "tool" and message.name:
            call_id = message.tool_call_id or ""
            error = _error_of(message) if message.is_error else {"code": "", "message": ""}
            calls.append(
                Call(
                    call_id,
                    message.name,
                    arguments.get(call_id, {}),
                    not message.is_error,
                    error["code"],
                    error["message"],
                )
            )
    return calls


def outstanding_failures(calls: list[Call]) -> list[Call]:
    """Failed calls no later success redeemed (per call id; see the module's docstring)."""
    failed: dict[str, Call] = {}
    for call in calls:
        if not call.ok:
            failed[call.call_id or f"#{len(failed)}"] = call
            continue
        same = [
            k for k, f in failed.items() if f.tool == call.tool and f.arguments == call.arguments
        ]
        if same:
            del failed[same[-1]]
            continue
        corrected = [
            k for k, f in failed.items() if f.tool == call.tool and f.code not in NOT_REDEEMABLE
        ]
        if corrected:
            del failed[corrected[-1]]
    return list(failed.values())


def check_answer(answer: str, messages: list[Message]) -> Verdict:
    """What in ``answer`` contradicts the tool calls of ``messages`` (a run's own), and the
    answer corrected."""
    calls = calls_of(messages)
    failures = outstanding_failures(calls)
    # A call id answered more than once (a resumed step) counts as its last result.
    last = {call.call_id: call for call in calls}
    judged = [(c, _Matcher(c), False) for c in last.values() if c.ok]
    judged += [(c, _Matcher(c), True) for c in failures]
    findings: list[Finding] = []
    kept = []
    for sentence in _sentences(answer):
        found = _judge_sentence(sentence, judged)
        findings.extend(found)
        if not found:
            kept.append(sentence)
    rest = " ".join(s.strip() for s in kept)
    claimed = {f.call_id for f in findings}
    for failure in failures:
        # What is left of the answer must still say that something failed.
        if failure.call_id not in claimed and not _reports(rest, failure):
            findings.append(
                Finding(
                    "hidden_failure", failure.tool, failure.call_id, failure.code, failure.message
                )
            )
    if not findings:
        return Verdict([], answer)
    removed = len(kept) < len(_sentences(answer))
    return Verdict(findings, _corrected(answer, findings, rest if removed else answer, removed))


def _judge_sentence(sentence: str, judged: list[tuple[Call, _Matcher, bool]]) -> list[Finding]:
    """The calls this sentence contradicts (none when the calls it names ended both ways)."""
    found: list[Finding] = []
    previous: list[tuple[Call, _Matcher, bool]] = []
    for clause in _clauses(sentence):
        named = _named(clause, judged)
        if not named and PRONOUN.search(clause):
            named = previous  # "policy rule … refused it": the call the sentence spoke of
        if named:
            previous = named
        if not named or len({failed for _, _, failed in named}) > 1:
            continue
        for call, matcher, failed in named:
            if failed and matcher.says_done(clause):
                found.append(
                    Finding(
                        "claimed_action", call.tool, call.call_id, call.code, call.message, sentence
                    )
                )
            elif not failed and (
                matcher.says_not_done(clause)
                or (
                    REFUSAL.search(clause)
                    and (matcher.names(clause) or POLICY_WORDS.search(clause))
                )
            ):
                found.append(
                    Finding("claimed_inaction", call.tool, call.call_id, sentence=sentence)
                )
    unique: dict[str, Finding] = {}
    for finding in found:
        unique.setdefault(finding.call_id, finding)
    return list(unique.values())


def _named(
    clause: str, judged: list[tuple[Call, _Matcher, bool]]
) -> list[tuple[Call, _Matcher, bool]]:
    """The calls a clause names, the most specifically named ones only."""
    scored = [(matcher.names(clause), entry) for entry in judged for matcher in [entry[1]]]
    best = max((score for score, _ in scored), default=0)
    return [entry for score, entry in scored if score == best and best > 0]


def _sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text) if s.strip()]


def _clauses(sentence: str) -> list[str]:
    return [c for c in CLAUSE_END.split(sentence) if c and c.strip()]


def _corrected(answer: str, findings: list[Finding], kept: str, removed: bool) -> str:
    chinese = bool(CJK.search(answer))
    failed = any(f.kind != "claimed_inaction" for f in findings)
    lines: dict[tuple[str, bool], str] = {}
    for f in findings:
        inaction = f.kind == "claimed_inaction"
        if inaction:
            line = (
                f"工具 {f.tool} 已成功执行（调用 {f.call_id}），回答却说它没有执行或被拒绝。"
                if chinese
                else f"The tool {f.tool} succeeded (call {f.call_id}); the answer said it had "
                "not been done or was refused."
            )
        else:
            line = (
                f"工具 {f.tool} 调用失败（{f.code}）：{f.message}"
                if chinese
                else f"The tool {f.tool} failed ({f.code}): {f.message}"
            )
        lines.setdefault((f.call_id, inaction), line)
    if chinese:
        prefix = (
            "注意：本次运行中有操作未能完成，以下回答可能不准确。"
            if failed
            else "注意：回答与工具的实际结果不符，已更正。"
        )
        note = "（与工具结果矛盾的句子已删除。）"
    else:
        prefix = (
            "Note: some actions in this run did not complete; the answer below may be wrong."
            if failed
            else "Note: the answer contradicted what the tools did; it was corrected."
        )
        note = "(The sentences that contradicted the tools' results were removed.)"
    return "\n".join([prefix, *lines.values(), *([note] if removed else []), "", kept]).strip()


def _reports(answer: str, failure: Call) -> bool:
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
