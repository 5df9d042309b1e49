"""Keyed state objects with Flink's method semantics, TTL included (FLIP-25).

Each state object reads the backend's current key (and namespace) and stores entries in a
`StateTable`. With TTL, values are stored with their last-access timestamp and follow
Flink's ``AbstractTtlState`` family:

- expired means ``last_access + ttl <= now`` (saturating add, ``TtlUtils.expired``);
- reading an expired entry clears it; it is returned once only with
  ``ReturnExpiredIfNotCleanedUp``;
- ``OnReadAndWrite`` refreshes the timestamp of unexpired entries that are read;
- list ``get`` keeps expired elements unless all are expired (then the list is cleared) or
  the timestamps are refreshed on read (then only unexpired ones are kept), as
  ``TtlListState``; map iteration removes expired entries as it goes (``TtlMapState``);
- reducing/aggregating treat an expired accumulator as absent (``TtlReduceFunction``);
- incremental cleanup checks ``cleanup_size`` entries of the state on every access
  (``TtlIncrementalCleanup``), and on every record if asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from flinkstate.errors import InvalidArgumentError
from flinkstate.ttl import MAX_TIMESTAMP

from flinkstate.backend.tables import StateTable

if TYPE_CHECKING:
    from flinkstate.backend.keyed import KeyedStateBackend
    from flinkstate.descriptors import KeyedStateDescriptor

__all__ = ["ValueState", "ListState", "MapState", "ReducingState", "AggregatingState", "State"]

_CLEANUP_BUCKETS_PER_ACCESS = 16


def _expired(ts: int, ttl: int, now: int) -> bool:
    e = ts + ttl
    if e > MAX_TIMESTAMP:
        e = MAX_TIMESTAMP
    return e <= now


class State:
    """Base of the keyed state objects (not instantiated by users: `backend.get_state(desc)`)."""

    kind = ""

    def __init__(self, backend: KeyedStateBackend, desc: KeyedStateDescriptor, table: StateTable) -> None:
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
        """The stored user value after the TTL read rules (None if absent or expired and hidden)."""
        pk = self._pk()
        t = self._t
        v = t.get(pk)
        if v is None or self._ttl is None:
            return v
        val, ts = v
        now = self._now()
        if _expired(ts, self._ttl_ms, now):
            t.remove(pk)
            return val if self._return_expired else None
        if self._update_on_read:
            t.put(pk, (val, now))
        return val

    def _cleanup_entry(self, pk: Any, now: int) -> None:
        v = self._t.get(pk)
        if v is not None and _expired(v[1], self._ttl_ms, now):
            self._t.remove(pk)

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
            return self._t.get(self._pk())
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

    def __init__(self, backend: KeyedStateBackend, desc: Any, table: StateTable) -> None:
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
        cur = self._t.get(pk)
        if self._ttl is None:
            self._t.put(pk, value if cur is None else self._reduce(cur, value))
            return
        now = self._now()
        if cur is None or _expired(cur[1], self._ttl_ms, now):
            self._t.put(pk, (value, now))
        else:
            self._t.put(pk, (self._reduce(cur[0], value), now))


class AggregatingState(_SingleValueState):
    """Flink's AggregatingState: add(v) with the AggregateFunction, get() = get_result(acc), clear()."""

    kind = "aggregating"

    def __init__(self, backend: KeyedStateBackend, desc: Any, table: StateTable) -> None:
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
        cur = self._t.get(pk)
        if self._ttl is None:
            acc = self._fn.create_accumulator() if cur is None else cur
            self._t.put(pk, self._fn.add(value, acc))
            return
        now = self._now()
        acc = self._fn.create_accumulator() if cur is None or _expired(cur[1], self._ttl_ms, now) else cur[0]
        self._t.put(pk, (self._fn.add(value, acc), now))


class ListState(State):
    """Flink's ListState: get(), add(v), add_all(vs), update(vs), clear()."""

    kind = "list"

    def get(self) -> list[Any]:
        """The elements (a new list; empty when there are none)."""
        self._access()
        pk = self._pk()
        t = self._t
        raw = t.get(pk)
        if raw is None:
            return []
        if self._ttl is None:
            return list(raw)
        now = self._now()
        ttl = self._ttl_ms
        if self._update_on_read:
            fresh = [(v, now) for v, ts in raw if not _expired(ts, ttl, now)]
            if fresh:
                t.put_container(pk, fresh)
        out = []
        any_unexpired = False
        for v, ts in raw:
            if not _expired(ts, ttl, now):
                any_unexpired = True
                out.append(v)
            elif self._return_expired:
                out.append(v)
        if not any_unexpired:
            t.remove(pk)
        return out

    def add(self, value: Any) -> None:
        """Append one element (None is refused, as in Flink)."""
        self._access()
        if value is None:
            raise InvalidArgumentError("You cannot add null to a ListState.")
        item = value if self._ttl is None else (value, self._now())
        pk = self._pk()
        t = self._t
        c = t.container_for_write(pk, list)
        if c is None:
            t.put_container(pk, [item])
        else:
            c.append(item)
            t.changes.add(pk)

    def add_all(self, values: Iterable[Any]) -> None:
        """Append several elements (an empty list changes nothing)."""
        self._access()
        if values is None:
            raise InvalidArgumentError("List of values to add cannot be null.")
        vals = list(values)
        if any(v is None for v in vals):
            raise InvalidArgumentError("You cannot add null to a ListState.")
        if not vals:
            return
        if self._ttl is not None:
            now = self._now()
            vals = [(v, now) for v in vals]
        pk = self._pk()
        t = self._t
        c = t.container_for_write(pk, list)
        if c is None:
            t.put_container(pk, vals)
        else:
            c.extend(vals)
            t.changes.add(pk)

    def update(self, values: Iterable[Any]) -> None:
        """Replace the elements (an empty list clears the state)."""
        self._access()
        if values is None:
            raise InvalidArgumentError("List of values to update cannot be null.")
        vals = list(values)
        if any(v is None for v in vals):
            raise InvalidArgumentError("You cannot add null to a ListState.")
        pk = self._pk()
        if not vals:
            self._t.remove(pk)
            return
        if self._ttl is not None:
            now = self._now()
            vals = [(v, now) for v in vals]
        self._t.put_container(pk, vals)

    def clear(self) -> None:
        """Remove the list of the current key and namespace."""
        self._access()
        self._t.remove(self._pk())

    def _cleanup_entry(self, pk: Any, now: int) -> None:
        raw = self._t.get(pk)
        if raw is None:
            return
        keep = [e for e in raw if not _expired(e[1], self._ttl_ms, now)]
        if len(keep) == len(raw):
            return
        if keep:
            self._t.put_container(pk, keep)
        else:
            self._t.remove(pk)


_MISSING = object()


class MapState(State):
    """Flink's MapState: get, put, put_all, remove, contains, keys, values, items, is_empty, clear."""

    kind = "map"

    def _expired_entry(self, pk: Any, uk: Any) -> None:
        t = self._t
        c = t.container_for_write(pk, dict)
        if c is not None:
            c.pop(uk, None)
            if not c:
                t.remove(pk)
        t.changes.add((pk, uk))

    def get(self, user_key: Any) -> Any:
        """The value of `user_key`, or None."""
        self._access()
        pk = self._pk()
        t = self._t
        raw = t.get(pk)
        if raw is None:
            return None
        e = raw.get(user_key, _MISSING)
        if e is _MISSING:
            return None
        if self._ttl is None:
            return e
        v, ts = e
        now = self._now()
        if _expired(ts, self._ttl_ms, now):
            self._expired_entry(pk, user_key)
            return v if self._return_expired else None
        if self._update_on_read:
            self._write(pk, user_key, (v, now))
        return v

    def _write(self, pk: Any, user_key: Any, item: Any) -> None:
        t = self._t
        c = t.container_for_write(pk, dict)
        if c is None:
            t.put_container(pk, {user_key: item})
        else:
            c[user_key] = item
        t.changes.add((pk, user_key))

    def put(self, user_key: Any, value: Any) -> None:
        """Set the value of `user_key`."""
        self._access()
        self._write(self._pk(), user_key, value if self._ttl is None else (value, self._now()))

    def put_all(self, mapping: Mapping[Any, Any]) -> None:
        """Set several user keys at once."""
        self._access()
        if not mapping:
            return
        pk = self._pk()
        t = self._t
        now = self._now() if self._ttl is not None else 0
        items = dict(mapping) if self._ttl is None else {k: (v, now) for k, v in mapping.items()}
        c = t.container_for_write(pk, dict)
        if c is None:
            t.put_container(pk, items)
        else:
            c.update(items)
        for uk in items:
            t.changes.add((pk, uk))

    def remove(self, user_key: Any) -> None:
        """Remove `user_key` (the map of the key is dropped when it becomes empty)."""
        self._access()
        pk = self._pk()
        t = self._t
        raw = t.get(pk)
        if raw is None or user_key not in raw:
            return
        c = t.container_for_write(pk, dict)
        del c[user_key]
        if not c:
            t.remove(pk)
        t.changes.add((pk, user_key))

    def contains(self, user_key: Any) -> bool:
        """True when `user_key` has a (visible) entry."""
        self._access()
        pk = self._pk()
        raw = self._t.get(pk)
        if raw is None or user_key not in raw:
            return False
        if self._ttl is None:
            return True
        v, ts = raw[user_key]
        now = self._now()
        if _expired(ts, self._ttl_ms, now):
            self._expired_entry(pk, user_key)
            return self._return_expired
        if self._update_on_read:
            self._write(pk, user_key, (v, now))
        return True

    def items(self) -> list[tuple[Any, Any]]:
        """(user_key, value) pairs; expired entries are removed as they are met."""
        self._access()
        pk = self._pk()
        raw = self._t.get(pk)
        if raw is None:
            return []
        if self._ttl is None:
            return list(raw.items())
        now = self._now()
        out = []
        for uk, (v, ts) in list(raw.items()):
            if _expired(ts, self._ttl_ms, now):
                self._expired_entry(pk, uk)
                if self._return_expired:
                    out.append((uk, v))
            else:
                if self._update_on_read:
                    self._write(pk, uk, (v, now))
                out.append((uk, v))
        return out

    def keys(self) -> list[Any]:
        """The user keys (see `items`)."""
        return [k for k, _ in self.items()]

    def values(self) -> list[Any]:
        """The values (see `items`)."""
        return [v for _, v in self.items()]

    def __iter__(self) -> Any:
        return iter(self.items())

    def is_empty(self) -> bool:
        """True when the key has no map entries (as Flink: entries not yet cleaned up count)."""
        self._access()
        raw = self._t.get(self._pk())
        return not raw

    def clear(self) -> None:
        """Remove every entry of the current key and namespace."""
        self._access()
        pk = self._pk()
        t = self._t
        raw = t.remove(pk)
        if raw:
            for uk in raw:
                t.changes.add((pk, uk))

    def _cleanup_entry(self, pk: Any, now: int) -> None:
        raw = self._t.get(pk)
        if raw is None:
            return
        limit = now - self._ttl_ms  # expired iff ts + ttl <= now (no saturation below MAX_TIMESTAMP - ttl)
        dead = [uk for uk, e in raw.items() if e[1] <= limit and _expired(e[1], self._ttl_ms, now)]
        for uk in dead:
            self._expired_entry(pk, uk)


STATE_CLASSES: dict[str, type[State]] = {
    "value": ValueState,
    "list": ListState,
    "map": MapState,
    "reducing": ReducingState,
    "aggregating": AggregatingState,
}
