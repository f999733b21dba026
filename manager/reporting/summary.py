"""Condition messages that fit on one line of `kubectl get esc` (at most LIMIT characters).

A pass may wait for many objects or hit a long API error; the conditions carry a summary
(how many, the first one, where the rest is) and the detail goes to structured status
fields (`status.awaited`, `status.failure`) and Events. The same holds for the
ExternalSecretsManager's per-controller entries (status.ControllerState.line), whose whole
messages go to Events about the ESM. Every function here returns at most
`limit` characters whatever its inputs: the bound holds by construction, not by luck.
"""

from __future__ import annotations

from collections.abc import Sequence

LIMIT = 160
ELLIPSIS = "…"
MIN_ROOM = 24  # below this, cutting only the first item would leave it unreadable

SEE_AWAITED = "see status.awaited"
SEE_FAILURE = "see status.failure"
SEE_EVENTS = "see kubectl describe esc cluster"
SEE_ESM_EVENTS = "see kubectl describe esm cluster"


def clip(text: str, limit: int = LIMIT) -> str:
    """`text` if it fits in `limit` characters, else its start and an ellipsis."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    return text[:limit - len(ELLIPSIS)].rstrip() + ELLIPSIS


def framed(head: str, middle: str, tail: str, limit: int = LIMIT) -> str:
    """`head + middle + tail`, cutting `middle` so that the whole fits in `limit`; if even
    head and tail leave too little room, the whole line is cut instead."""
    room = limit - len(head) - len(tail)
    if room >= MIN_ROOM or (room >= 0 and len(middle) <= room):
        return clip(head + clip(middle, room) + tail, limit)
    return clip(head + middle + tail, limit)


def counted(lead: str, items: Sequence[str], see: str, limit: int = LIMIT) -> str:
    """"<lead>: <first> and M more; <see>", at most `limit` characters.

    `lead` says `{objects}` where the count goes ("Waiting for {objects}" becomes "Waiting
    for 3 objects"); each item says what it is ("Deployment ns/name: 0 of 1 available")."""
    objects = f"{len(items)} object" if len(items) == 1 else f"{len(items)} objects"
    if not items:
        return clip(f"{lead.format(objects=objects)}; {see}", limit)
    head = f"{lead.format(objects=objects)}: "
    more = len(items) - 1
    tail = f" and {more} more; {see}" if more else f"; {see}"
    return framed(head, items[0], tail, limit)


def fitted(message: str, see: str, limit: int = LIMIT) -> str:
    """`message` if it fits, else its start and where the whole text is."""
    if len(message) <= limit:
        return message
    return framed("", message, f" ({see})", limit)
