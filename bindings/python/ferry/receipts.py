"""Write receipts (``ferry_receipt_t``): where a write transaction's changes are on their way
to the server.

Every commit returns a receipt (:meth:`ferry.Database.commit`, also kept as
:attr:`ferry.Database.last_receipt` for ``with db.write():`` blocks). Read its state with
:meth:`ferry.Database.receipt_state` or :meth:`ferry.Database.read_receipt`; wait for a state
with :meth:`ferry.SyncSession.wait_for_receipt` (or its ``async`` twin). Receipts live in the
database file: after a restart, open the session again and wait again.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from . import _native
from .values import from_native


class ReceiptState(enum.IntEnum):
    """``ferry_receipt_state_t``, in order; ``ACKNOWLEDGED`` and ``REJECTED`` are final."""

    LOCAL = 0
    """Committed on this device, not sent yet (or sent before a restart and not answered)."""
    UPLOADED = 1
    """Sent to the server; its answer has not come back yet."""
    ACKNOWLEDGED = 2
    """Durable on the server, and accepted."""
    REJECTED = 3
    """The server reverted writes of the transaction (a compensating write, error 231)."""


def _state(raw: int) -> Union[ReceiptState, int]:
    try:
        return ReceiptState(raw)
    except ValueError:
        return raw  # a state this binding does not know yet


@dataclass(frozen=True)
class Receipt:
    """A receipt's state, copied. ``compensating_writes`` (``REJECTED`` only) are the objects
    of this transaction that the server reverted, as :class:`ferry.CompensatingWrite`."""

    receipt: int
    state: Union[ReceiptState, int]
    compensating_writes: list[Any] = field(default_factory=list)

    @classmethod
    def _from_native(cls, raw: _native.Receipt) -> "Receipt":
        from .sync import CompensatingWrite  # sync imports database, which imports this module

        writes = []
        for i in range(raw.compensating_writes_count):
            w = raw.compensating_writes[i]
            writes.append(CompensatingWrite(_text(w.object_type), from_native(w.primary_key), _text(w.reason)))
        return cls(int(raw.receipt), _state(raw.state), writes)


def _text(raw: Optional[bytes]) -> str:
    return raw.decode("utf-8", "replace") if raw is not None else ""


# ferry_db_read_receipt calls back on the calling thread before it returns: the result is kept
# here under the call's id for that call only.
_reads: dict[int, list[Any]] = {}
_read_ids = itertools.count(1)


def _on_read(userdata: Optional[int], receipt: Any, error: Any) -> None:
    try:
        slot = _reads.get(userdata or 0)
        if slot is not None and receipt:
            slot.append(Receipt._from_native(receipt.contents))
    except BaseException:  # noqa: BLE001 - nothing may unwind into C
        pass


_READ_TRAMPOLINE = _native.RECEIPT_CB(_on_read)
