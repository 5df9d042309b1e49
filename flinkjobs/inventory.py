"""Inventory of every serializer snapshot class in the Flink jars flinkstate targets, and what flinkstate does with each.

Stdlib only. Reads the class files of Flink 2.3 and 1.20's jars (flink-dist, the table runtime, planner and API, CEP,
the connectors in lib/, flink-scala, flink-python: `harness.flink_lib` keeps them), nested jars included (the planner
loader's), and follows each class's superclass and interfaces transitively: a concrete class that implements
`TypeSerializerSnapshot` (or extends the legacy `TypeSerializerConfigSnapshot`, where a release still has it) is one.
For each it records, per release, the jar and which framework base reads its payload (`SimpleTypeSerializerSnapshot`,
`CompositeTypeSerializerSnapshot`, `GenericTypeSerializerSnapshot`, or its own `readSnapshot`) and whether it overrides
`readOuterSnapshot`: facts the registry's parse grammar is checked against. Then it joins the classes with the registry
(python/flinkstate/flink/serde/registry.py, loaded by path) and writes the table:

    python flinkjobs/inventory.py              # scan the jars (downloading them once), write the table
    python flinkjobs/inventory.py --offline    # re-render from the facts in the checked-in JSON (no jars needed)

schemas/flink-serializers.json (machine-readable: facts, outcome and test per class and release) and
schemas/flink-serializers.md (the same as a table, counts per outcome and release at the top).
"""

from __future__ import annotations

import importlib.util
import io
import json
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
JSON_OUT = ROOT / "schemas" / "flink-serializers.json"
MD_OUT = ROOT / "schemas" / "flink-serializers.md"
REGISTRY = ROOT / "python" / "flinkstate" / "flink" / "serde" / "registry.py"
LINES = ("2.3", "1.20")
_SNAPSHOT = "org/apache/flink/api/common/typeutils/TypeSerializerSnapshot"
_LEGACY = "org/apache/flink/api/common/typeutils/TypeSerializerConfigSnapshot"
_BASES = {"org/apache/flink/api/common/typeutils/SimpleTypeSerializerSnapshot": "simple",
          "org/apache/flink/api/common/typeutils/CompositeTypeSerializerSnapshot": "composite",
          "org/apache/flink/api/common/typeutils/GenericTypeSerializerSnapshot": "generic"}
_ACC_INTERFACE, _ACC_ABSTRACT = 0x0200, 0x0400
OUTCOME_WORDS = {"decoded": "decoded to typed columns", "bytes": "kept as their serialized bytes",
                 "refused": "refused by name (parsed: the rest of the header stays readable)"}


# ------------------------------------------------------------------------------------------------ class files

def parse_class(b: bytes) -> dict[str, Any] | None:
    """A class file's name, access flags, superclass, interfaces and declared method names (JVMS 4.1), or None."""
    if b[:4] != b"\xca\xfe\xba\xbe":
        return None
    count = struct.unpack_from(">H", b, 8)[0]
    pos, i = 10, 1
    utf: dict[int, bytes] = {}
    classes: dict[int, int] = {}
    while i < count:
        tag = b[pos]
        if tag == 1:
            n = struct.unpack_from(">H", b, pos + 1)[0]
            utf[i] = b[pos + 3 : pos + 3 + n]
            pos += 3 + n
        elif tag in (3, 4):
            pos += 5
        elif tag in (5, 6):  # long and double take two constant pool slots
            pos += 9
            i += 1
        elif tag == 7:
            classes[i] = struct.unpack_from(">H", b, pos + 1)[0]
            pos += 3
        elif tag in (8, 16, 19, 20):
            pos += 3
        elif tag in (9, 10, 11, 12, 17, 18):
            pos += 5
        elif tag == 15:
            pos += 4
        else:
            raise ValueError(f"constant pool tag {tag}")
        i += 1
    flags, this, sup, n_ifs = struct.unpack_from(">HHHH", b, pos)
    pos += 8
    ifs = struct.unpack_from(f">{n_ifs}H", b, pos)
    pos += 2 * n_ifs

    def name(c: int) -> str | None:
        return utf[classes[c]].decode("utf-8", "replace") if c else None

    def members(pos: int) -> tuple[int, list[str]]:
        n = struct.unpack_from(">H", b, pos)[0]
        pos += 2
        out = []
        for _ in range(n):
            _, nm, _, attrs = struct.unpack_from(">HHHH", b, pos)
            pos += 8
            for _ in range(attrs):
                pos += 6 + struct.unpack_from(">I", b, pos + 2)[0]
            out.append(utf[nm].decode("utf-8", "replace"))
        return pos, out

    pos, _fields = members(pos)
    _, methods = members(pos)
    return {"name": name(this), "flags": flags, "super": name(sup), "interfaces": [name(c) for c in ifs], "methods": methods}


def _walk(z: zipfile.ZipFile, label: str, out: dict[str, dict[str, Any]]) -> None:
    for info in z.infolist():
        if info.filename.endswith(".class"):
            c = parse_class(z.read(info))
            if c is not None and c["name"] not in out:
                c["jar"] = label
                out[c["name"]] = c
        elif info.filename.endswith(".jar"):  # a jar in a jar (the planner loader's flink-table-planner.jar)
            _walk(zipfile.ZipFile(io.BytesIO(z.read(info))), f"{label}!{info.filename}", out)


def scan(lib: Path) -> dict[str, Any]:
    """Every concrete serializer snapshot class in the jars of lib (log4j's skipped), with its facts."""
    jars = sorted(p for p in lib.glob("*.jar") if not p.name.startswith("log4j"))
    classes: dict[str, dict[str, Any]] = {}
    for jar in jars:
        with zipfile.ZipFile(jar) as z:
            _walk(z, jar.name, classes)
    memo: dict[str, bool] = {}

    def is_snapshot(c: str | None) -> bool:
        if c is None:
            return False
        if c not in memo:
            memo[c] = False  # cycles cannot happen in valid class files; this guards the walk anyway
            k = classes.get(c)
            memo[c] = c in (_SNAPSHOT, _LEGACY) or (k is not None and any(is_snapshot(x) for x in [k["super"], *k["interfaces"]]))
        return memo[c]

    found = {}
    for c, k in classes.items():
        if k["flags"] & (_ACC_INTERFACE | _ACC_ABSTRACT) or not is_snapshot(c):
            continue
        base, reads, legacy = "direct", [], False
        cur: str | None = c
        while cur is not None and cur in classes:
            if cur in _BASES:
                base = _BASES[cur]
                break
            if cur == _LEGACY:
                legacy = True
                break
            reads += [m for m in classes[cur]["methods"] if m in ("readSnapshot", "readOuterSnapshot")]
            cur = classes[cur]["super"]
        found[c.replace("/", ".")] = {"jar": k["jar"], "base": base, "overrides": sorted(set(reads)), "legacy": legacy}
    return {"jars": [p.name for p in jars], "legacy_base_present": _LEGACY in classes, "classes": found}


# ------------------------------------------------------------------------------------------------ the table

def load_registry() -> Any:
    """flink/serde/registry.py, loaded by path (stdlib only: no package import, no pyarrow)."""
    spec = importlib.util.spec_from_file_location("flinkstate_serde_registry", REGISTRY)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def render(facts: dict[str, Any], registry: Any) -> tuple[str, str]:
    """(JSON, markdown) of the inventory: facts per release (`scan`'s, by line) joined with the registry."""
    snapshots = registry.SNAPSHOTS
    names = sorted({c for line in LINES for c in facts[line]["classes"]})
    rows = []
    counts = {line: {o: 0 for o in (*registry.OUTCOMES, "unlisted")} for line in LINES}
    for cls in names:
        entry = snapshots.get(cls)
        per = {}
        for line in LINES:
            f = facts[line]["classes"].get(cls)
            if f is None:
                continue
            outcome = entry.outcome if entry is not None else "unlisted"
            counts[line][outcome] += 1
            per[line] = {**f, "outcome": outcome}
        rows.append({"class": cls, "releases": per, **({"read": entry.read, "kind": entry.kind, "outcome": entry.outcome,
                                                          "test": entry.test, "note": entry.note} if entry is not None else {})})
    beyond = [{"class": s.cls, "read": s.read, "kind": s.kind, "outcome": s.outcome, "test": s.test, "note": s.note}
              for s in snapshots.values() if s.cls not in names]
    doc = {"generated_by": "python flinkjobs/inventory.py", "releases": {line: facts[line]["release"] for line in LINES},
           "jars": {line: facts[line]["jars"] for line in LINES},
           "legacy_config_snapshot_base": {line: facts[line]["legacy_base_present"] for line in LINES},
           "counts": counts, "classes": rows, "registered_beyond_the_jars": beyond}
    return json.dumps(doc, indent=1, sort_keys=True) + "\n", _markdown(doc)


def _short(cls: str) -> str:
    return cls.replace("org.apache.flink.", "o.a.f.")


def _markdown(doc: dict[str, Any]) -> str:
    out = ["# Serializer snapshot classes of Flink's jars, and what flinkstate does with each", "",
           "Generated by `python flinkjobs/inventory.py` (from the jars; `--offline` re-renders from "
           "`flink-serializers.json`): every concrete `TypeSerializerSnapshot` class in " +
           ", ".join(f"Flink {v}" for v in doc["releases"].values()) + " (flink-dist, the table API, runtime and planner, "
           "CEP, the connectors in lib/, flink-scala, flink-python), found through each class file's superclass and "
           "interfaces. `tests/flinkstate/flink/serde/test_snapshot_registry.py` checks this table against the registry "
           "(`python/flinkstate/flink/serde/registry.py`) and the bytecode facts, and that each test it names exists.", "",
           "| outcome | " + " | ".join(f"Flink {line}" for line in LINES) + " |",
           "|---|" + "---|" * len(LINES)]
    for outcome in ("decoded", "bytes", "refused", "unlisted"):
        cells = [str(doc["counts"][line].get(outcome, 0)) for line in LINES]
        out.append(f"| {OUTCOME_WORDS.get(outcome, 'not in the registry')} | " + " | ".join(cells) + " |")
    out.append("| **snapshot classes** | " + " | ".join(str(sum(doc["counts"][line].values())) for line in LINES) + " |")
    legacy = [line for line in LINES if doc["legacy_config_snapshot_base"][line]]
    out += ["", "Legacy `TypeSerializerConfigSnapshot`: " + (f"present in {', '.join(legacy)}" if legacy else
            "absent from every jar scanned (removed before 1.20); its former subclasses' successors are listed below.") , "",
            "Outcomes: **decoded**: values become typed Arrow columns; **bytes**: the snapshot parses, values are read and "
            "imported as their serialized bytes where the layout frames them (a whole value, map value or TTL value, or a "
            "length-prefixed value), else the state is refused by name (what export writes back is export's own table); "
            "**refused**: the snapshot parses (so the rest of the header "
            "and every other state stay readable), a state using it is an UnsupportedSerializerError naming operator, "
            "state and class when read. `read` is how the payload is read (registry grammar: `simple`, `generic`, "
            "`composite[:outer]`, or the class's own reader).", "",
            "| class | " + " | ".join(LINES) + " | read | values | test | note |", "|---|" + "---|" * (len(LINES) + 4)]
    for r in doc["classes"]:
        per = [r["releases"][line]["outcome"] if line in r["releases"] else "—" for line in LINES]
        test = r.get("test", "").split("::")[-1]
        out.append(f"| `{_short(r['class'])}` | " + " | ".join(per) + f" | {r.get('read', '')} | {r.get('kind', '')} | {test} | "
                   f"{r.get('note', '')} |")
    out += ["", "Registered beyond the jars scanned:", "", "| class | outcome | read | test | note |", "|---|---|---|---|---|"]
    for r in doc["registered_beyond_the_jars"]:
        out.append(f"| `{_short(r['class'])}` | {r['outcome']} | {r['read']} | {r['test'].split('::')[-1]} | {r['note']} |")
    return "\n".join(out) + "\n"


def facts_from_json(doc: dict[str, Any]) -> dict[str, Any]:
    """The per-release facts a written inventory holds (what `scan` found), for `render` without the jars."""
    out: dict[str, Any] = {}
    for line in LINES:
        classes = {r["class"]: {k: v for k, v in r["releases"][line].items() if k != "outcome"}
                   for r in doc["classes"] if line in r["releases"]}
        out[line] = {"release": doc["releases"][line], "jars": doc["jars"][line],
                     "legacy_base_present": doc["legacy_config_snapshot_base"][line], "classes": classes}
    return out


def main(argv: list[str]) -> int:
    if "--offline" in argv:
        facts = facts_from_json(json.loads(JSON_OUT.read_text(encoding="utf-8")))
    else:
        sys.path.insert(0, str(HERE))
        import harness

        facts = {}
        for line in LINES:
            lib = harness.flink_lib(line)
            facts[line] = {"release": harness.resolve(line), **scan(lib)}
    text, md = render(facts, load_registry())
    JSON_OUT.write_text(text, encoding="utf-8")
    MD_OUT.write_text(md, encoding="utf-8")
    doc = json.loads(text)
    for line in LINES:
        print(f"Flink {doc['releases'][line]}: " + ", ".join(f"{k} {v}" for k, v in doc["counts"][line].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
