"""Operators named by uid or by operator id, resolved one way for every argument and option, on Flink 1.x and 2.x alike.

An operator is named by its uid (recorded in `_metadata` from Flink 2.0; Flink 1.x records only the
operator id, which is Flink's murmur3_128 hash of the uid) or by that operator id (32 hex digits).
Options keyed by "operator/state" (`ttl`, `row_fields`, PyFlink declarations) and the uids a user
gives are resolved here: each operator part must match exactly one operator and each state one of
its states, else an InvalidArgumentError names the key and lists what exists, before any state is
read. Resolved keys are spelled "<operator id>/<state>" (`state_key`), the one spelling lookups use;
a key without an operator ("state") stands for that state in every operator that has it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.operator_ids import operator_id

if TYPE_CHECKING:
    from flinkstate.flink.meta.handles import OperatorState

__all__ = ["KeyedFacts", "NamedState", "ResolvedOptions", "find_operator", "lookup", "operator_name", "operators_text",
           "resolve_options", "state_key", "uid_hash"]

V = TypeVar("V")

#: per option: does it take a bare "state" key, what states it applies to (for messages)
_OPTIONS = {"ttl": (True, "TTL state"), "row_fields": (False, "keyed state"), "pyflink": (True, "PyFlink state")}


def uid_hash(uid: str) -> str:
    """The operator id (hex) Flink derives from a uid: murmur3_128 of its UTF-8 bytes."""
    return operator_id(uid)


def _matches(op: OperatorState, given: str) -> bool:
    """given names op: its recorded uid, its operator id, or (no uid recorded) the uid whose hash is its id."""
    return given in (op.uid, op.operator_id) or (not op.uid and uid_hash(given) == op.operator_id)


def find_operator(operators: Sequence[OperatorState], given: str) -> OperatorState | None:
    """The one operator given names (by uid or operator id), None when none does; several is an InvalidArgumentError."""
    found = [op for op in operators if _matches(op, given)]
    if len(found) > 1:
        raise InvalidArgumentError(f"operator {given!r} names several operators: {', '.join(op.operator_id for op in found)}")
    return found[0] if found else None


def operator_name(op: OperatorState, uids: Iterable[str] = ()) -> str:
    """The name an operator goes by here: its recorded uid, else the one of uids Flink hashes to its id, else the id (hex)."""
    if op.uid:
        return op.uid
    for uid in uids:
        if uid_hash(uid) == op.operator_id:
            return uid
    return op.operator_id


def _stateful(op: OperatorState) -> bool:
    return op.coordinator_state is not None or any(
        s.managed_keyed is not None or s.managed_operator is not None or s.raw_keyed is not None or s.raw_operator is not None
        for s in op.subtasks)


def operators_text(operators: Sequence[OperatorState], uids: Iterable[str] = ()) -> str:
    """The operators holding state, for a message: name here, and the operator id when it differs."""
    uids = tuple(uids)
    return ", ".join(_label(op, uids) for op in operators if _stateful(op))


def _label(op: OperatorState, uids: tuple[str, ...]) -> str:
    name = operator_name(op, uids)
    return name if name == op.operator_id else f"{name} (id {op.operator_id})"


def state_key(op: OperatorState, state: str) -> str:
    """The resolved option key of one state of one operator."""
    return f"{op.operator_id}/{state}"


def lookup(resolved: Mapping[str, V], op: OperatorState, state: str) -> V | None:
    """An option's value for a state of an operator: its "operator/state" entry, else its bare "state" one."""
    got = resolved.get(state_key(op, state))
    return resolved.get(state) if got is None else got


@dataclass(frozen=True)
class KeyedFacts:
    """What a keyed state of a checkpoint is, as far as options care: kept with TTL, written by a PyFlink job."""

    ttl: bool = False
    pyflink: bool = False


@dataclass(frozen=True)
class NamedState:
    """One key of an option, resolved: the operator it names (None: a bare state name, in every operator) and the state."""

    option: str
    given: str
    operator: OperatorState | None
    state: str

    @property
    def key(self) -> str:
        """The resolved key ("<operator id>/<state>", or the bare state)."""
        return self.state if self.operator is None else state_key(self.operator, self.state)


@dataclass(frozen=True)
class ResolvedOptions:
    """Options with their operators resolved (keys as `state_key` spells them), and what each key named."""

    ttl: dict[str, Any]
    row_fields: dict[str, Any]
    pyflink: dict[str, Any]
    named: tuple[NamedState, ...] = ()
    where: str = ""
    operators: tuple[OperatorState, ...] = ()
    uids: tuple[str, ...] = ()

    def name(self, op_id: str) -> str:
        """The name here of the operator with this id."""
        return next((operator_name(op, self.uids) for op in self.operators if op.operator_id == op_id), op_id)

    def check_states(self, facts: Mapping[str, Mapping[str, KeyedFacts]]) -> None:
        """Refuse a key naming no state its option applies to (facts: operator id -> keyed state -> facts), listing those that exist."""
        for n in self.named:
            what = _OPTIONS[n.option][1]
            fits = {op_id: sorted(s for s, f in states.items() if _applies(n.option, f)) for op_id, states in facts.items()}
            if n.operator is None:
                if any(n.state in names for names in fits.values()):
                    continue
                have = sorted(f"{self.name(op_id)}/{s}" for op_id, names in fits.items() for s in names)
                raise InvalidArgumentError(f"{n.option} {n.given!r}: no operator of {self.where} has a {what} {n.state!r}; "
                                           f"{what}s: {have or 'none'}")
            names = fits.get(n.operator.operator_id, [])
            if n.state in names:
                continue
            label = _label(n.operator, self.uids)
            if n.state in facts.get(n.operator.operator_id, {}):
                why = f"state {n.state!r} of operator {label} is not a {what}"
            else:
                why = f"operator {label} has no {what} {n.state!r}"
            raise InvalidArgumentError(f"{n.option} {n.given!r}: {why} in {self.where}; its {what}s: {names or 'none'}")


def _applies(option: str, f: KeyedFacts) -> bool:
    return f.ttl if option == "ttl" else f.pyflink if option == "pyflink" else True


def _resolve_key(option: str, given: str, operators: Sequence[OperatorState], uids: tuple[str, ...], where: str) -> NamedState:
    """One "operator/state" (or, where the option allows it, "state") key: the operator its leading part names.

    A uid or state name may hold "/": every split whose leading part names an operator is a candidate;
    none is a bare state (or an error), more than one is an error.
    """
    bare, _ = _OPTIONS[option]
    found = []
    for i, ch in enumerate(given):
        if ch == "/" and 0 < i < len(given) - 1:
            op = find_operator(operators, given[:i])
            if op is not None:
                found.append(NamedState(option, given, op, given[i + 1 :]))
    if len(found) > 1:
        raise InvalidArgumentError(f"{option} {given!r} can be read as several operator/state pairs: "
                                   f"{', '.join(f'{operator_name(n.operator, uids)}/{n.state}' for n in found if n.operator)}")
    if found:
        return found[0]
    if bare and "/" not in given:
        return NamedState(option, given, None, given)
    hint = " (a uid is matched by Flink's hash of it: this metadata records operator ids)" if any(not op.uid for op in operators) else ""
    raise InvalidArgumentError(f"{option} {given!r}: {given.rsplit('/', 1)[0]!r} names no operator of {where} by uid or "
                               f"operator id{hint}; operators: {operators_text(operators, uids)}")


def _rekey(option: str, given: Mapping[str, V] | None, operators: Sequence[OperatorState], uids: tuple[str, ...],
           where: str, named: list[NamedState]) -> dict[str, V]:
    out: dict[str, V] = {}
    by: dict[str, str] = {}
    for k, v in (given or {}).items():
        n = _resolve_key(option, k, operators, uids, where)
        if n.key in out and out[n.key] != v:
            raise InvalidArgumentError(f"{option} {by[n.key]!r} and {k!r} name the same state with different values")
        out[n.key], by[n.key] = v, k
        named.append(n)
    return out


def resolve_options(operators: Sequence[OperatorState], where: str, *, uids: Iterable[str] = (),
                    ttl: Mapping[str, Any] | None = None, row_fields: Mapping[str, Any] | None = None,
                    pyflink: Mapping[str, Any] | None = None) -> ResolvedOptions:
    """Resolve the uids and the operators of option keys against a checkpoint's operators (where: its path, for messages).

    A uid naming no operator, or a key whose operator part names none, is an InvalidArgumentError listing
    the operators; the states are checked once they are known (`ResolvedOptions.check_states`).
    """
    uids = tuple(uids)
    unmatched = [u for u in uids if find_operator(operators, u) is None]
    if unmatched:
        raise InvalidArgumentError(f"uid {', '.join(map(repr, unmatched))} names no operator of {where} "
                                   f"(operators: {operators_text(operators, uids)})")
    named: list[NamedState] = []
    return ResolvedOptions(ttl=_rekey("ttl", ttl, operators, uids, where, named),
                           row_fields=_rekey("row_fields", row_fields, operators, uids, where, named),
                           pyflink=_rekey("pyflink", pyflink, operators, uids, where, named), named=tuple(named), where=where,
                           operators=tuple(operators), uids=uids)
