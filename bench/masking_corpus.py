"""A seeded corpus for measuring masking: documents with planted personal data, look-alikes
that must stay readable, and the ground truth of both.

    .venv/bin/python bench/masking_corpus.py [--mb 5] [--seed 13] [--out corpus.jsonl]

Four kinds of document, as runs carry them: support tickets in English prose, one-line JSON
order records, English chat transcripts and Chinese chat transcripts. Every planted value is
checked by the library that defines it (``phonenumbers``, ``python-stdnum``) before it is
used, so a miss is the masker's fault and not the corpus's. Look-alikes are what real text
is full of: order, ticket and invoice numbers, tracking numbers (``YT…``, ``JD…``) whose digits
fail Luhn and which are no IBAN, timestamps and dates, amounts, SKUs, URLs, IP addresses.

Used by ``bench/traces.py``; ``generate()`` is the entry point.
"""

from __future__ import annotations

import argparse
import json
import random
import string
from dataclasses import dataclass, field
from pathlib import Path

import phonenumbers
from phonenumbers import PhoneNumberFormat, PhoneNumberType
from stdnum import iban as std_iban
from stdnum import luhn, verhoeff
from stdnum.br import cpf
from stdnum.cn import ric
from stdnum.es import dni, nie
from stdnum.in_ import aadhaar
from stdnum.us import ssn

# Kinds of planted value (the bench reports recall per kind).
KINDS = (
    "phone",
    "email",
    "card",
    "iban",
    "cn_resident_id",
    "us_ssn",
    "uk_nino",
    "es_dni",
    "es_nie",
    "in_aadhaar",
    "br_cpf",
)


@dataclass
class Document:
    text: str
    planted: list[tuple[str, str]] = field(default_factory=list)  # (kind, value as written)
    lookalikes: list[str] = field(default_factory=list)  # must be found verbatim after masking
    genre: str = ""


class Planter:
    """Valid values of each kind, written the ways people write them."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._templates = {
            region: [
                phonenumbers.example_number_for_type(region, kind)
                for kind in (PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE)
            ]
            for region in ("CN", "US", "CA", "GB", "DE", "FR", "ES", "IT", "JP", "IN")
        }
        self._us_area_codes = ["212", "718", "503", "646", "415", "312", "617", "206", "305"]

    # --- phones ----------------------------------------------------------------------------

    def phone(self, region: str | None = None) -> str:
        rng = self.rng
        region = region or rng.choice(list(self._templates))
        for _ in range(200):
            template = rng.choice(self._templates[region])
            national = str(template.national_number)
            keep = max(2, len(national) - 6)
            digits = national[:keep] + "".join(rng.choice(string.digits) for _ in national[keep:])
            if region in ("US", "CA") and rng.random() < 0.6:
                digits = (
                    rng.choice(self._us_area_codes)
                    + str(rng.randint(2, 9))
                    + "".join(rng.choice(string.digits) for _ in range(6))
                )
                region = "US"
            number = phonenumbers.parse(digits, region)
            if phonenumbers.is_valid_number(number):
                return self._write_phone(number, region)
        raise RuntimeError(f"no valid {region} number generated")

    def _write_phone(self, number: phonenumbers.PhoneNumber, region: str) -> str:
        rng = self.rng
        national = phonenumbers.format_number(number, PhoneNumberFormat.NATIONAL)
        international = phonenumbers.format_number(number, PhoneNumberFormat.INTERNATIONAL)
        digits = str(number.national_number)
        forms = [national, international, international.replace(" ", "-", 1)]
        if region in ("US", "CA"):
            a, b, c = digits[:3], digits[3:6], digits[6:]
            forms += [f"{a}-{b}-{c}", f"{a}.{b}.{c}", f"{a} {b} {c}", f"+1 ({a}) {b}-{c}"]
            forms += [f"1-{a}-{b}-{c}", f"+1.{a}.{b}.{c}"]
        elif region == "CN" and len(digits) == 11:  # a mobile
            forms += [digits, f"{digits[:3]}-{digits[3:7]}-{digits[7:]}", f"+86{digits}"]
        elif region == "FR":
            forms += [national.replace(" ", "."), national.replace(" ", "")]
        elif region == "JP":
            forms += [national.replace("-", " ")]
        elif region == "IN":
            forms += [digits[:5] + " " + digits[5:], "+91-" + digits]
        elif region == "DE":
            forms += [national.replace(" ", "/", 1), national.replace(" ", "-")]
        else:
            forms += [national.replace(" ", "-"), "00" + international[1:]]
        written = rng.choice(forms)
        check = phonenumbers.parse(written, region)
        if not phonenumbers.is_valid_number(check) or check.national_number != int(digits):
            return national
        return written

    # --- the rest ----------------------------------------------------------------------------

    def email(self) -> str:
        rng = self.rng
        first = rng.choice(["zhang", "li", "maria", "john", "anna", "wei", "priya", "luca", "yuki"])
        last = rng.choice(
            ["wang", "smith", "garcia", "rossi", "tanaka", "sharma", "muller", "chen"]
        )
        sep = rng.choice([".", "_", "", "-"])
        local = f"{first}{sep}{last}"
        if rng.random() < 0.3:
            local += str(rng.randint(1, 9999))
        if rng.random() < 0.1:
            local += "+orders"
        domain = rng.choice(
            ["example.com", "mail.example.org", "corp.example.co.uk", "example.cn", "qq.com"]
        )
        value = f"{local}@{domain}"
        return value.capitalize() if rng.random() < 0.1 else value

    def card(self) -> str:
        rng = self.rng
        prefix, length = rng.choice(
            [
                ("4", 16),
                ("51", 16),
                ("55", 16),
                ("2221", 16),
                ("34", 15),
                ("37", 15),
                ("6011", 16),
                ("62", 16),
                ("62", 19),
                ("3530", 16),
            ]
        )
        body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
        number = body + luhn.calc_check_digit(body)
        assert luhn.is_valid(number)
        style = rng.random()
        if length == 15 and style < 0.5:
            return f"{number[:4]} {number[4:10]} {number[10:]}"
        if length == 16 and style < 0.4:
            return " ".join(number[i : i + 4] for i in range(0, 16, 4))
        if length == 16 and style < 0.6:
            return "-".join(number[i : i + 4] for i in range(0, 16, 4))
        return number

    _IBAN_SHAPES = {  # country: BBAN as (digits, letters) runs
        "DE": "n18",
        "GB": "a4n14",
        "NL": "a4n10",
        "AT": "n16",
        "CH": "n17",
        "IE": "a4n14",
        "PL": "n24",
        "DK": "n14",
        "SE": "n20",
        "LU": "n16",
    }

    def iban(self) -> str:
        rng = self.rng
        for _ in range(500):
            country = rng.choice(list(self._IBAN_SHAPES))
            shape = self._IBAN_SHAPES[country]
            bban = ""
            for part in ("".join(x) for x in _runs(shape)):
                alphabet = string.ascii_uppercase if part[0] == "a" else string.digits
                bban += "".join(rng.choice(alphabet) for _ in range(int(part[1:])))
            check = std_iban.calc_check_digits(country + "00" + bban)
            value = country + check + bban
            if std_iban.is_valid(value):
                if rng.random() < 0.5:
                    return " ".join(value[i : i + 4] for i in range(0, len(value), 4))
                return value
        raise RuntimeError("no valid IBAN generated")

    def cn_resident_id(self) -> str:
        rng = self.rng
        for _ in range(200):
            area = rng.choice(["110105", "310104", "440305", "510107", "330106", "420102"])
            birth = f"{rng.randint(1950, 2005)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
            body = area + birth + f"{rng.randint(0, 999):03d}"
            value = body + ric.calc_check_digit(body)
            if ric.is_valid(value):
                return value if rng.random() < 0.9 else value.lower()
        raise RuntimeError("no valid resident ID generated")

    def us_ssn(self) -> str:
        rng = self.rng
        while True:
            value = f"{rng.randint(1, 899):03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"
            if ssn.is_valid(value):
                return value if rng.random() < 0.85 else value.replace("-", " ")

    def uk_nino(self) -> str:
        rng = self.rng
        while True:
            first = rng.choice("ABCEGHJKLMNOPRSTWXYZ")
            second = rng.choice("ABCEGHJKLMNPRSTWXYZ")
            if first + second in ("BG", "GB", "KN", "NK", "NT", "TN", "ZZ"):
                continue
            digits = "".join(rng.choice(string.digits) for _ in range(6))
            suffix = rng.choice("ABCD")
            if rng.random() < 0.5:
                return f"{first}{second} {digits[:2]} {digits[2:4]} {digits[4:]} {suffix}"
            return f"{first}{second}{digits}{suffix}"

    def es_dni(self) -> str:
        body = f"{self.rng.randint(1_000_000, 99_999_999):08d}"
        value = body + dni.calc_check_digit(body)
        assert dni.is_valid(value)
        return value if self.rng.random() < 0.8 else f"{body}-{value[-1]}"

    def es_nie(self) -> str:
        body = self.rng.choice("XYZ") + f"{self.rng.randint(0, 9_999_999):07d}"
        value = body + nie.calc_check_digit(body)
        assert nie.is_valid(value)
        return value

    def in_aadhaar(self) -> str:
        rng = self.rng
        while True:
            body = str(rng.randint(2, 9)) + "".join(rng.choice(string.digits) for _ in range(10))
            value = body + verhoeff.calc_check_digit(body)
            if aadhaar.is_valid(value):
                if rng.random() < 0.7:
                    return f"{value[:4]} {value[4:8]} {value[8:]}"
                return value

    def br_cpf(self) -> str:
        rng = self.rng
        while True:
            value = "".join(rng.choice(string.digits) for _ in range(11))
            if cpf.is_valid(value):  # about one in a hundred has both check digits right
                return cpf.format(value) if rng.random() < 0.7 else value

    def value(self, kind: str) -> str:
        return getattr(self, kind)()


def _runs(shape: str) -> list[str]:
    parts, current = [], ""
    for char in shape:
        if char.isalpha() and current:
            parts.append(current)
            current = ""
        current += char
    return [*parts, current]


class LookAlikes:
    """Readable values that resemble personal data and must not be masked."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def _digits(self, n: int) -> str:
        return str(self.rng.randint(1, 9)) + "".join(
            self.rng.choice(string.digits) for _ in range(n - 1)
        )

    def tracking(self) -> str:
        while True:
            prefix = self.rng.choice(["YT", "JD", "SF", "ZT", "YT", "JD"])
            digits = self._digits(self.rng.choice([13, 15, 16]))
            value = prefix + digits
            if not luhn.is_valid(digits) and not std_iban.is_valid(value):
                return value

    def order(self) -> str:
        rng = self.rng
        return rng.choice(
            [
                f"ORD-{rng.randint(10000, 99999)}",
                f"ORD-2025-{rng.randint(0, 999999):06d}",
                f"#{rng.randint(100000, 99999999)}",
                f"T-2025{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}-{rng.randint(1, 999):03d}",
                f"INV-2025-{rng.randint(1, 9999):04d}",
            ]
        )

    def timestamp(self) -> str:
        rng = self.rng
        y, mo, d = rng.randint(2019, 2027), rng.randint(1, 12), rng.randint(1, 28)
        h, mi, s = rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
        return rng.choice(
            [
                f"{y}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}.{rng.randint(0, 999999):06d}+00:00",
                f"{y}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}",
                f"{d:02d}/{mo:02d}/{y} {h:02d}:{mi:02d}",
                f"{y}/{mo:02d}/{d:02d}",
                f"{d:02d}.{mo:02d}.{y}",
                f"{y}{mo:02d}{d:02d}{h:02d}{mi:02d}{s:02d}",
                str(rng.randint(1_500_000_000, 1_800_000_000)),
                str(rng.randint(1_500_000_000_000, 1_800_000_000_000)),
            ]
        )

    def amount(self) -> str:
        rng = self.rng
        value = rng.randint(100, 99_999_999) / 100
        return rng.choice(
            [
                f"${value:,.2f}",
                f"USD {value:,.2f}",
                f"€{value:,.2f}",
                f"¥{value:,.2f}",
                f"{value:.2f}",
                f"{value:,.2f} EUR",
                f"{rng.randint(1000000, 99999999)}.{rng.randint(0, 99):02d}",
            ]
        )

    def sku(self) -> str:
        rng = self.rng
        return rng.choice(
            [
                f"SKU-{rng.randint(1000, 9999)}-{rng.choice(['BLK', 'WHT', 'RED'])}-XL",
                f"SKU{self._digits(10)}",
                f"PN {rng.randint(10, 99)}-{rng.randint(1000, 9999)}-{rng.randint(10, 99)}",
                f"EAN {self._digits(13)}",
            ]
        )

    def url(self) -> str:
        rng = self.rng
        return rng.choice(
            [
                f"https://shop.example.com/orders/{self._digits(10)}?ref=mail&ts={self._digits(10)}",
                f"https://track.example.net/p/{self.tracking()}",
                f"https://cdn.example.com/img/{rng.randint(1000, 9999)}/{self._digits(8)}.png",
                f"http://10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
                f":{rng.randint(1024, 65535)}/health",
            ]
        )

    def ip(self) -> str:
        rng = self.rng
        return rng.choice(
            [
                ".".join(str(rng.randint(1, 255)) for _ in range(4)),
                f"192.168.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                f"2001:db8:{rng.randint(0, 65535):x}::{rng.randint(1, 65535):x}",
            ]
        )

    def value(self) -> str:
        kind = self.rng.choice(
            ["tracking", "tracking", "order", "order", "timestamp", "amount", "sku", "url", "ip"]
        )
        return getattr(self, kind)()


# --- documents ---------------------------------------------------------------------------

_EN_FILLER = [
    "The customer says the parcel has been stuck in customs for a week and wants an update.",
    "I checked the warehouse system and the item was picked but never scanned at the dock.",
    "Please escalate to billing, the refund has not arrived after ten working days.",
    "She asked us to confirm the delivery address before the courier tries again.",
    "Our records show two payment attempts; the first one was declined by the bank.",
    "He would prefer to be contacted in the afternoon, European time.",
    "The replacement unit was shipped with the wrong power adapter.",
    "Customer is polite but frustrated; this is the third contact about the same issue.",
]
_ZH_FILLER = [
    "您好，我的快递已经一个星期没有更新物流信息了。",
    "请问退款什么时候能到账，已经超过十个工作日了。",
    "好的，我这边帮您查询一下订单状态，请稍等。",
    "麻烦您核对一下收货地址，快递员会再次派送。",
    "系统显示您有两次付款记录，第一次被银行拒绝了。",
    "我们会尽快为您处理，感谢您的耐心等待。",
]
_EN_LEADS = {
    "phone": ["call me on", "my number is", "phone:", "reach her at", "mobile", "tel."],
    "email": ["email", "write to", "e-mail:", "contact", "mail"],
    "card": ["card", "card number", "charged to", "the card"],
    "iban": ["IBAN", "refund to IBAN", "account", "bank account"],
    "cn_resident_id": ["resident ID", "ID number", "身份证"],
    "us_ssn": ["SSN", "social security number", "SSN:"],
    "uk_nino": ["NI number", "National Insurance number", "NINO"],
    "es_dni": ["DNI", "DNI:", "documento"],
    "es_nie": ["NIE", "NIE:"],
    "in_aadhaar": ["Aadhaar", "Aadhaar no.", "UID"],
    "br_cpf": ["CPF", "CPF:", "CPF nº"],
}
_ZH_LEADS = {
    "phone": ["我的手机是", "电话", "联系电话：", "手机号"],
    "email": ["邮箱", "邮箱是", "电子邮件："],
    "card": ["卡号", "银行卡"],
    "cn_resident_id": ["身份证号", "身份证", "证件号码："],
}
# Kinds by how often they occur (phones and e-mails dominate real traffic).
_WEIGHTS = {
    "phone": 30,
    "email": 20,
    "card": 10,
    "iban": 8,
    "cn_resident_id": 8,
    "us_ssn": 5,
    "uk_nino": 4,
    "es_dni": 4,
    "es_nie": 3,
    "in_aadhaar": 4,
    "br_cpf": 4,
}


class Writer:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.planter = Planter(self.rng)
        self.lookalikes = LookAlikes(self.rng)

    def kind(self, kinds: list[str] | None = None) -> str:
        kinds = kinds or list(_WEIGHTS)
        return self.rng.choices(kinds, weights=[_WEIGHTS[k] for k in kinds])[0]

    def ticket(self) -> Document:
        rng, doc = self.rng, Document("", genre="ticket")
        parts = [f"Ticket {self._look(doc, 'order')} opened {self._look(doc, 'timestamp')}."]
        for _ in range(rng.randint(3, 8)):
            parts.append(rng.choice(_EN_FILLER))
            roll = rng.random()
            if roll < 0.3:
                kind = self.kind()
                value = self._plant(doc, kind)
                parts.append(f"{rng.choice(_EN_LEADS[kind])} {value}{rng.choice(['.', ',', ''])}")
            elif roll < 0.8:
                parts.append(f"Ref {self._look(doc)}, see {self._look(doc)}.")
        doc.text = " ".join(parts)
        return doc

    def order(self) -> Document:
        rng, doc = self.rng, Document("", genre="order")
        record = {
            "order_id": self._look(doc, "order"),
            "created_at": self._look(doc, "timestamp"),
            "customer": {
                "email": self._plant(doc, "email"),
            },
            "items": [
                {"sku": self._look(doc, "sku"), "qty": rng.randint(1, 5), "price": self._amount()}
                for _ in range(rng.randint(1, 4))
            ],
            "shipping": {"carrier_tracking": self._look(doc, "tracking"), "ip": self._ip(doc)},
            "total": self._amount(),
        }
        if rng.random() < 0.7:
            record["customer"]["phone"] = self._plant(doc, "phone")
        if rng.random() < 0.4:
            record["payment"] = {"card": self._plant(doc, "card"), "status": "captured"}
        if rng.random() < 0.2:
            record["refund"] = {"iban": self._plant(doc, "iban")}
        if rng.random() < 0.2:
            kind = self.kind(["cn_resident_id", "us_ssn", "uk_nino", "es_dni", "in_aadhaar"])
            record["customer"]["tax_id"] = self._plant(doc, kind)
        if rng.random() < 0.3:
            record["links"] = {"self": self._look(doc, "url")}
        doc.text = json.dumps(record, ensure_ascii=False)
        return doc

    def chat_en(self) -> Document:
        rng, doc = self.rng, Document("", genre="chat_en")
        lines = []
        minute = rng.randint(0, 50)
        for turn in range(rng.randint(4, 10)):
            who = "Customer" if turn % 2 == 0 else "Agent"
            text = rng.choice(_EN_FILLER)
            if who == "Customer" and rng.random() < 0.35:
                kind = self.kind()
                text += f" {rng.choice(_EN_LEADS[kind])} {self._plant(doc, kind)}"
            elif rng.random() < 0.4:
                text += f" Your order {self._look(doc)} is noted."
            lines.append(f"[14:{minute + turn:02d}] {who}: {text}")
        doc.text = "\n".join(lines)
        return doc

    def chat_zh(self) -> Document:
        rng, doc = self.rng, Document("", genre="chat_zh")
        lines = []
        for turn in range(rng.randint(4, 10)):
            who = "客户" if turn % 2 == 0 else "客服"
            text = rng.choice(_ZH_FILLER)
            if who == "客户" and rng.random() < 0.4:
                kind = self.kind(["phone", "email", "card", "cn_resident_id"])
                value = (
                    self._plant(doc, kind, self.planter.phone("CN"))
                    if kind == "phone" and rng.random() < 0.7
                    else self._plant(doc, kind)
                )
                text += f"{rng.choice(_ZH_LEADS[kind])}{rng.choice(['', ' '])}{value}。"
            elif rng.random() < 0.4:
                text += f"订单号{rng.choice(['', ' '])}{self._look(doc)}，金额{self._amount()}元。"
            lines.append(f"{who}：{text}")
        doc.text = "\n".join(lines)
        return doc

    def document(self) -> Document:
        return self.rng.choice([self.ticket, self.order, self.chat_en, self.chat_zh])()

    def _plant(self, doc: Document, kind: str, value: str | None = None) -> str:
        value = value or self.planter.value(kind)
        doc.planted.append((kind, value))
        return value

    def _look(self, doc: Document, kind: str | None = None) -> str:
        value = getattr(self.lookalikes, kind)() if kind else self.lookalikes.value()
        doc.lookalikes.append(value)
        return value

    def _ip(self, doc: Document) -> str:
        return self._look(doc, "ip")

    def _amount(self) -> str:
        return self.lookalikes.amount()


def generate(megabytes: float = 5.0, seed: int = 13) -> list[Document]:
    """Documents totalling about ``megabytes`` of UTF-8, the same for the same seed."""
    writer = Writer(seed)
    documents, size = [], 0
    while size < megabytes * 1_000_000:
        document = writer.document()
        documents.append(document)
        size += len(document.text.encode())
    return documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out", type=Path, help="write JSON lines here (default: summary only)")
    args = parser.parse_args()
    documents = generate(args.mb, args.seed)
    counts: dict[str, int] = {}
    for document in documents:
        for kind, _ in document.planted:
            counts[kind] = counts.get(kind, 0) + 1
    if args.out:
        with args.out.open("w", encoding="utf-8") as out:
            for d in documents:
                line = {"text": d.text, "planted": d.planted, "lookalikes": d.lookalikes}
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
    size = sum(len(d.text.encode()) for d in documents)
    looks = sum(len(d.lookalikes) for d in documents)
    print(f"{len(documents)} documents, {size / 1e6:.2f} MB, {sum(counts.values())} planted")
    print(f"{looks} look-alikes; planted by kind: {json.dumps(counts)}")


if __name__ == "__main__":
    main()
