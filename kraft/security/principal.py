"""Kafka's ssl.principal.mapping.rules: from a client certificate's subject (RFC 2253/4514 form,
e.g. `CN=alice,O=kraft`) to the principal's name.

    RULE:^CN=(.*?),O=kraft$/$1/L, RULE:^CN=([^,]*).*$/$1/, DEFAULT

Rules are tried in order; the first whose pattern matches the whole subject gives the name
(`$1`... are the groups; a trailing `L`/`U` lower/upper-cases it); DEFAULT is the subject itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RULE = re.compile(r"RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)")


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, subject: str) -> str | None:
        if self.pattern is None:
            return subject
        match = self.pattern.fullmatch(subject)
        if match is None:
            return None
        name = re.sub(r"\$(\d+)", lambda m: match.group(int(m.group(1))) or "", self.replacement)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def parse_rules(text: str) -> list[Rule]:
    """ValueError naming the part it could not read."""
    rules: list[Rule] = []
    pos = 0
    while pos < len(text):
        if text[pos] in ", \t\n":
            pos += 1
            continue
        if text.startswith("DEFAULT", pos):
            rules.append(Rule(None))
            pos += len("DEFAULT")
            continue
        match = _RULE.match(text, pos)
        if match is None:
            raise ValueError(f"expected DEFAULT or RULE:pattern/replacement/[LU] at {text[pos:pos + 40]!r}")
        try:
            pattern = re.compile(match.group(1).replace("\\/", "/"))
        except re.error as e:
            raise ValueError(f"bad pattern {match.group(1)!r}: {e}") from None
        rules.append(Rule(pattern, match.group(2).replace("\\/", "/"), match.group(3)))
        pos = match.end()
    return rules or [Rule(None)]


def map_subject(rules: list[Rule], subject: str) -> str | None:
    """The principal name of `subject`, or None when no rule matches (Kafka refuses the client)."""
    for rule in rules:
        name = rule.apply(subject)
        if name is not None:
            return name
    return None
