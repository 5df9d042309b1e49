"""List and map state: containers changed in place under copy-on-write, with per-element and
per-entry TTL (Flink's ``TtlListState`` and ``TtlMapState``).

- list ``get`` keeps expired elements unless all are expired (then the list is cleared) or
  the timestamps are refreshed on read (then only unexpired ones are kept and refreshed);
- map reads clear an expired entry (returned once with ``ReturnExpiredIfNotCleanedUp``);
  iteration removes expired entries as it goes; ``OnReadAndWrite`` refreshes what is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flinkstate.backend.states import State
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.ttl import is_expired

__all__ = ["ListState", "MapState"]


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
            fresh = [(v, now) for v, ts in raw if not is_expired(ts, ttl, now)]
            if fresh:
                t.put_container(pk, fresh)
        out = []
        any_unexpired = False
        for v, ts in raw:
            if not is_expired(ts, ttl, now):
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
        keep = [e for e in raw if not is_expired(e[1], self._ttl_ms, now)]
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
        if is_expired(ts, self._ttl_ms, now):
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
        if is_expired(ts, self._ttl_ms, now):
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
            if is_expired(ts, self._ttl_ms, now):
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
        ttl = self._ttl_ms
        dead = [uk for uk, e in raw.items() if is_expired(e[1], ttl, now)]
        for uk in dead:
            self._expired_entry(pk, uk)
