"""Subscription regular expressions (KIP-848's `subscribed_topic_regex`), pure: compiled with RE2,
a linear-time engine with the syntax of the RE2/J library Kafka's coordinator uses, so no pattern
can make matching backtrack for minutes (Python's `re` took 66 s for `(a+)+b` against a topic
name of 30 `a`s). A topic is subscribed when the pattern matches its whole name, as Kafka's
`Pattern.matcher(topic).matches()`.

A pattern longer than `MAX_REGEX_LENGTH` (1024 characters: the heartbeat schema's bound) or that
RE2 refuses (bad syntax, Perl features RE2 leaves out such as backreferences and look-around, or
a program over its memory budget) is INVALID_REGULAR_EXPRESSION.
"""

from __future__ import annotations

from typing import Iterable

import re2

from kraft.broker.groups.errors import GroupError
from kraft.server.groups import MAX_REGEX_LENGTH

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a client's bad pattern is its error answer, not a line on stderr
# RE2's memory budget per pattern (its default is 8 MiB); re2 keeps the last 128 patterns compiled,
# so this bounds what they hold. A pattern whose program does not fit is refused as invalid.
_OPTIONS.max_mem = 1 << 20


def _invalid(regex: str, why: str, field: str) -> GroupError:
    return GroupError("INVALID_REGULAR_EXPRESSION",
                      f"{field} `{regex[:100]}` is not a valid regular expression: {why}.")


def compile_regex(regex: str, field: str = "SubscribedTopicRegex") -> re2._Regexp:
    """The compiled pattern (re2 caches the last 128), or GroupError INVALID_REGULAR_EXPRESSION
    naming the request's `field` (ListTransactions' TransactionalIdPattern uses it too)."""
    if len(regex) > MAX_REGEX_LENGTH:
        raise _invalid(regex, f"{len(regex)} characters, at most {MAX_REGEX_LENGTH}", field)
    try:
        return re2.compile(regex, _OPTIONS)
    except re2.error as e:
        reason = e.args[0] if e.args else "refused"
        raise _invalid(regex, reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason),
                       field) from None


def matching(regex: str, names: Iterable[str]) -> frozenset[str]:
    """The names the pattern matches whole (linear in the names' total length)."""
    fullmatch = compile_regex(regex).fullmatch
    return frozenset(name for name in names if fullmatch(name))
