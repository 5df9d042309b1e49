"""Keyed state objects with Flink's method semantics, TTL included (FLIP-25): the base class
and the single-value states (value, reducing, aggregating); list and map state are in
`container_states`.

Each state object reads the backend's current key (and namespace) and stores entries in a
`StateTable`. With TTL, values are stored with their last-access timestamp and follow
Flink's ``AbstractTtlState`` family:

- expired means ``last_access + ttl <= now`` (saturating add, ``TtlUtils.expired``);
- reading an expired entry clears it; it is returned once only with
  ``ReturnExpiredIfNotCleanedUp``;
- ``OnReadAndWrite`` refreshes the timestamp of unexpired entries that are read;
- reducing/aggregating treat an expired accumulator as absent unless expired values are
  returned (``TtlReduceFunction``/``TtlAggregateFunction`` ``getUnexpired``), and copy an
  accumulator a running snapshot still references before folding into it;
- incremental cleanup checks ``cleanup_size`` entries of the state on every access
  (``TtlIncrementalCleanup``), and on every record if asked.
"""

from __future__ import annotations

import copy
import datetime
import decimal
from typing import TYPE_CHECKING, Any

from flinkstate.backend.tables import StateTable
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.ttl import is_expired

if TYPE_CHECKING:
    from flinkstate.backend.context import KeyContext
    from flinkstate.core.descriptors import KeyedStateDescriptor

__all__ = ["State", "ValueState", "ReducingState", "AggregatingState"]

_CLEANUP_BUCKETS_PER_ACCESS = 16

# values of these types cannot be changed in place: no copy-on-read needed
_IMMUTABLE = frozenset({int, float, str, bytes, bool, type(None), decimal.Decimal,
                        datetime.datetime, datetime.date, datetime.time, datetime.timedelta})


class State:
    """Base of the keyed state objects (not instantiated by users: `backend.get_state(desc)`)."""

    kind = ""

    def __init__(self, backend: KeyContext, desc: KeyedStateDescriptor, table: StateTable) -> None:
        self._be = backend
        self.descriptor = desc
        self._t = table
        self._namespaced = desc.namespace_type is not None
        self._ns: Any = None
        self._ns_set = False
        ttl = desc.ttl if desc.ttl_enabled else None
        self._ttl = ttl
        self._ttl_ms = ttl.ttl_ms if ttl else 0
        self._update_on_read = bool(ttl and ttl.update_type == "OnReadAndWrite")
        self._return_expired = bool(ttl and ttl.state_visibility == "ReturnExpiredIfNotCleanedUp")
        inc = ttl.incremental_cleanup if ttl else None
        self._cleanup_size = inc.cleanup_size if inc else 0
        self.cleanup_every_record = bool(inc and inc.run_cleanup_for_every_record and inc.cleanup_size > 0)
        self._cursor_bucket = -1
        self._cursor_keys: list[Any] = []

    @property
    def name(self) -> str:
        """The state's name (from its descriptor)."""
        return self.descriptor.name

    def set_current_namespace(self, namespace: Any) -> None:
        """Namespace of this state object (overrides the backend's current namespace)."""
        if not self._namespaced:
            raise InvalidArgumentError(f"state {self.name!r} has no namespace_type; it cannot take a namespace")
        self._ns = namespace
        self._ns_set = True

    def _pk(self) -> Any:
        key = self._be._key
        if key is None:
            raise InvalidArgumentError(f"state {self.name!r} accessed without a current key: call set_current_key first")
        if not self._namespaced:
            return key
        return (key, self._ns if self._ns_set else self._be._namespace)

    def _now(self) -> int:
        return self._be.clock()

    # ------------------------------------------------------------------ incremental TTL cleanup
    def incremental_cleanup(self) -> None:
        """Check the next `cleanup_size` entries of the state and drop what expired."""
        n = self._cleanup_size
        if n <= 0:
            return
        keys = self._cursor_keys
        if not keys:
            t = self._t
            buckets = t.buckets
            mask = t.mask
            i = self._cursor_bucket
            for _ in range(_CLEANUP_BUCKETS_PER_ACCESS):
                i = (i + 1) & mask
                if buckets[i]:
                    keys = list(buckets[i])
                    break
            self._cursor_bucket = i
            self._cursor_keys = keys
            if not keys:
                return
        now = self._now()
        while n > 0 and keys:
            n -= 1
            self._cleanup_entry(keys.pop(), now)

    def _cleanup_entry(self, pk: Any, now: int) -> None:
        raise NotImplementedError

    def _access(self) -> None:
        if self._cleanup_size:
            self.incremental_cleanup()


class _SingleValueState(State):
    """Value, reducing and aggregating state share storage: one value per key and namespace."""

    def _get_raw(self) -> Any:
        """The stored user value after the TTL read rules (None if absent or expired and hidden).

        As ``CopyOnWriteStateMap.get``: while a running snapshot may reference a mutable value,
        the caller gets (and the table keeps) a deep copy, so mutating it in place before
        `update` cannot leak into that snapshot.
        """
        pk = self._pk()
        t = self._t
        v = t.get(pk)
        if v is None:
            return None
        if self._ttl is None:
            if t.clock.hold >= 0 and type(v) not in _IMMUTABLE:
                v = t.own(pk, v)
            return v
        val, ts = v
        now = self._now()
        if is_expired(ts, self._ttl_ms, now):
            t.remove(pk)
            if not self._return_expired:
                return None
            return copy.deepcopy(val) if t.clock.hold >= 0 and type(val) not in _IMMUTABLE else val
        if self._update_on_read:
            v = (val, now)
            t.put(pk, v)
        if t.clock.hold >= 0 and type(val) not in _IMMUTABLE:
            val = t.own(pk, v)[0]
        return val

    def _cleanup_entry(self, pk: Any, now: int) -> None:
        v = self._t.get(pk)
        if v is not None and is_expired(v[1], self._ttl_ms, now):
            self._t.remove(pk)

    def _unexpired_for_update(self, pk: Any) -> Any:
        """The stored value/accumulator a user function may fold into, or None.

        As Flink's ``TtlReduceFunction``/``TtlAggregateFunction`` (``getUnexpired``): an expired
        value counts as absent unless the visibility is ReturnExpiredIfNotCleanedUp. As
        ``CopyOnWriteStateMap.transform``: the value is deep-copied first when a running
        snapshot may still reference it, so a user function that mutates its argument in
        place cannot leak into that snapshot.
        """
        t = self._t
        cur = t.get(pk)
        if cur is None:
            return None
        if self._ttl is not None:
            if not self._return_expired and is_expired(cur[1], self._ttl_ms, self._now()):
                return None
            cur = cur[0]
        if t.shared(pk):
            cur = copy.deepcopy(cur)
        return cur

    def clear(self) -> None:
        """Remove the value of the current key and namespace."""
        if self._cleanup_size:
            self.incremental_cleanup()
        self._t.remove(self._pk())


class ValueState(_SingleValueState):
    """Flink's ValueState: value(), update(v), clear(). update(None) clears."""

    kind = "value"

    def value(self) -> Any:
        """The value of the current key and namespace, or None."""
        if self._cleanup_size:
            self.incremental_cleanup()
        if self._ttl is None:  # fast path
            t = self._t
            pk = self._pk()
            v = t.get(pk)
            if v is not None and t.clock.hold >= 0 and type(v) not in _IMMUTABLE:
                v = t.own(pk, v)  # a running snapshot may reference it: hand out a copy
            return v
        return self._get_raw()

    def update(self, value: Any) -> None:
        """Set the value (None clears it, as Flink's heap backend does)."""
        if self._cleanup_size:
            self.incremental_cleanup()
        if value is None:
            self._t.remove(self._pk())
        elif self._ttl is None:
            self._t.put(self._pk(), value)
        else:
            self._t.put(self._pk(), (value, self._now()))


class ReducingState(_SingleValueState):
    """Flink's ReducingState: add(v) folds with the descriptor's reduce_function; get(); clear()."""

    kind = "reducing"

    def __init__(self, backend: KeyContext, desc: Any, table: StateTable) -> None:
        super().__init__(backend, desc, table)
        self._reduce = desc.reduce_function
        if self._reduce is None:
            raise InvalidArgumentError(f"reducing state {desc.name!r} needs a reduce_function in its descriptor")

    def get(self) -> Any:
        """The reduced value, or None."""
        self._access()
        return self._get_raw()

    def add(self, value: Any) -> None:
        """Fold `value` into the state."""
        self._access()
        if value is None:
            raise InvalidArgumentError("You cannot add null to a ReducingState.")
        pk = self._pk()
        t = self._t
        cur = self._unexpired_for_update(pk)
        new = value if cur is None else self._reduce(cur, value)
        t.put_container(pk, new if self._ttl is None else (new, self._now()))


class AggregatingState(_SingleValueState):
    """Flink's AggregatingState: add(v) with the AggregateFunction, get() = get_result(acc), clear()."""

    kind = "aggregating"

    def __init__(self, backend: KeyContext, desc: Any, table: StateTable) -> None:
        super().__init__(backend, desc, table)
        self._fn = desc.aggregate_function
        if self._fn is None:
            raise InvalidArgumentError(f"aggregating state {desc.name!r} needs an aggregate_function in its descriptor")

    def get(self) -> Any:
        """The aggregate's result, or None when nothing was added."""
        self._access()
        acc = self._get_raw()
        return None if acc is None else self._fn.get_result(acc)

    def add(self, value: Any) -> None:
        """Add `value` to the accumulator (created on first use)."""
        self._access()
        pk = self._pk()
        cur = self._unexpired_for_update(pk)
        acc = self._fn.add(value, self._fn.create_accumulator() if cur is None else cur)
        self._t.put_container(pk, acc if self._ttl is None else (acc, self._now()))
