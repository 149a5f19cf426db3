"""sqlglot's ClickHouse dialect on the same corpus, compared with ClickHouse's own parse tree.

Run with the scratch venv's interpreter after clickhouse_side.py:
    $SQLGLOT_PYTHON $OUT/sqlglot_side.py
Reads $OUT/clickhouse.json, writes $OUT/comparison.json and prints
the report (tables and disagreements). Imports vidnexus/sql_allowlist.py (pure Python, no deps)
read-only from ROOT to apply the project's own allow-lists to sqlglot's tree.
"""
from __future__ import annotations

import importlib.util
import json
import os

OUT = os.environ.get("OUT", "/tmp/sql-parsers")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.makedirs(OUT, exist_ok=True)
import logging
import re
import sys
from collections import Counter, defaultdict

import sqlglot
from sqlglot import exp

logging.getLogger("sqlglot").setLevel(logging.ERROR)  # "falling back to parsing as a Command" warnings

_spec = importlib.util.spec_from_file_location("sql_allowlist", os.path.join(ROOT, "vidnexus/sql_allowlist.py"))
allow = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(allow)

DATA = json.load(open(os.path.join(OUT, "clickhouse.json")))
OUTSIDE = set(DATA["meta"]["outside_names"])
POLICY_DB = DATA["meta"].get("policy_database", "default")


# ---------------------------------------------------------------- facts from sqlglot's tree

def func_names(f: exp.Func) -> dict:
    """Name as the user wrote it (Anonymous keeps it), sqlglot's normalised name, and the name the
    ClickHouse generator would emit (what would run if the sqlglot text were executed)."""
    if isinstance(f, exp.Anonymous):
        ident = f.this if isinstance(f.this, exp.Identifier) else None
        written = f.name
        return {"written": written, "quoted": bool(ident and ident.quoted), "class": "Anonymous",
                "normalised": written, "emitted": written}
    try:
        rendered = f.sql(dialect="clickhouse")
    except Exception:  # noqa: BLE001
        rendered = ""
    m = re.match(r"`?([A-Za-z_][A-Za-z0-9_]*)`?\s*\(", rendered)
    return {"written": None, "quoted": False, "class": type(f).__name__, "normalised": f.sql_name(),
            "emitted": m.group(1) if m else None, "rendered": rendered[:80]}


def table_fn(t: exp.Table):
    return t.this if isinstance(t.this, exp.Func) else None


def facts(stmt: exp.Expression) -> dict:
    funcs, tfuncs, tables, apply_names = [], [], [], []
    for n in stmt.walk():
        if isinstance(n, exp.Func):
            funcs.append(func_names(n))
        if isinstance(n, exp.Table):
            f = table_fn(n)
            if f is not None:
                tfuncs.append(func_names(f))
            elif isinstance(n.this, exp.Identifier):
                tables.append({"db": n.db or None, "name": n.name})
        if isinstance(n, exp.Apply):
            apply_names.append(n.expression.name)
    if isinstance(stmt, exp.Insert) and isinstance(stmt.this, exp.Func):
        tfuncs.append(func_names(stmt.this))
    kind = type(stmt).__name__
    if isinstance(stmt, exp.Command):
        kind += f" {stmt.this}"
    return {
        "kind": kind, "functions": funcs, "table_functions": tfuncs, "tables": tables,
        "apply_functions": apply_names,
        "settings": bool(stmt.args.get("settings")), "format": bool(stmt.args.get("format")),
        "into": bool(stmt.args.get("into")),
        "placeholder": any(isinstance(n, (exp.Placeholder, exp.Parameter)) for n in stmt.walk()),
        "sql": stmt.sql(dialect="clickhouse")[:300],
    }


def names_seen(f: dict) -> set[str]:
    """All names under which sqlglot's tree shows a call (written, normalised, emitted)."""
    out = set()
    for fn in f["functions"] + f["table_functions"]:
        out |= {x for x in (fn["written"], fn["normalised"], fn["emitted"]) if x}
    out |= set(f["apply_functions"])
    return out


# ---------------------------------------------------------------- a guard built on sqlglot's tree
# The project's rules (vidnexus/sql_guard.py check_tree) ported to sqlglot nodes, with the same
# allow-lists; deny by default on node classes as the project's guard is on EXPLAIN AST kinds.

_OK_NODES = (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery, exp.From, exp.Join, exp.Table,
             exp.TableAlias, exp.Alias, exp.Column, exp.Identifier, exp.Star, exp.Literal, exp.Array, exp.Tuple,
             exp.Paren, exp.Where, exp.Group, exp.Having, exp.Order, exp.Ordered, exp.Limit, exp.Offset, exp.With,
             exp.CTE, exp.Window, exp.Boolean, exp.Null, exp.DataType, exp.Lambda, exp.Interval, exp.Distinct,
             exp.Dot, exp.Bracket, exp.Final, exp.Binary, exp.Unary, exp.Func, exp.In, exp.Between, exp.Is, exp.Var,
             exp.Values)
_OK_NODES += tuple(getattr(exp, n) for n in ("DataTypeParam", "Neg", "Not", "Case", "If", "WindowSpec", "Slice")
                   if hasattr(exp, n))


class Refused(Exception):
    pass


def check_table(db: str | None, name: str) -> None:
    if not db or db == POLICY_DB:
        return
    if db == "system" and name in allow.SYSTEM_TABLES:
        return
    raise Refused(f"table {db}.{name} is not allowed")


def check_select(stmt: exp.Expression) -> None:
    if stmt.args.get("settings") or stmt.args.get("format") or stmt.args.get("into"):
        raise Refused("SETTINGS/FORMAT/INTO not allowed")
    for n in stmt.walk():
        if isinstance(n, (exp.Placeholder, exp.Parameter)):
            raise Refused("query parameters")
        if not isinstance(n, _OK_NODES):
            raise Refused(f"node {type(n).__name__} not allowed")
        if isinstance(n, (exp.Select, exp.Union)) and (n.args.get("settings") or n.args.get("format")):
            raise Refused("SETTINGS/FORMAT not allowed")
        if isinstance(n, exp.Values):
            if not allow.table_function_allowed("values"):
                raise Refused("values")
        if isinstance(n, exp.Table):
            f = table_fn(n)
            if f is not None:
                nm = func_names(f)["emitted"] or ""
                if not allow.table_function_allowed(nm):
                    raise Refused(f"table function {nm}() not allowed")
            else:
                check_table(n.db or None, n.name)
        elif isinstance(n, exp.Func):
            p = n.parent
            if isinstance(p, exp.Table) and p.this is n:
                continue  # checked as a table function
            fn = func_names(n)
            nm = fn["emitted"] or fn["normalised"]
            if not (allow.function_allowed(nm) or allow.function_allowed(fn["normalised"])):
                raise Refused(f"function {nm}() not allowed")
        if isinstance(n, exp.In) and isinstance(n.args.get("field"), exp.Column):
            c = n.args["field"]
            check_table(c.table or None, c.name)


def sqlglot_guard(stmts: list[exp.Expression]) -> str:
    if len(stmts) != 1:
        raise Refused("one statement per request")
    s = stmts[0]
    if isinstance(s, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)):
        check_select(s)
        return "select"
    if isinstance(s, exp.Describe):
        if not isinstance(s.this, exp.Table) or table_fn(s.this) is not None:
            raise Refused("DESCRIBE only of a table")
        check_table(s.this.db or None, s.this.name)
        return "describe"
    raise Refused(f"{type(s).__name__} not allowed" + (" (sqlglot kept it as opaque text)" if isinstance(s, exp.Command) else ""))


# ---------------------------------------------------------------- comparison

CH_TO_SQLGLOT = {  # ClickHouse statement node -> sqlglot classes that mean the same statement
    "SelectWithUnionQuery": {"Select", "Union", "Intersect", "Except", "Subquery"},
    "Explain": {"Command EXPLAIN", "Describe"}, "DescribeQuery": {"Describe"}, "InsertQuery": {"Insert"},
    "AlterQuery": {"Alter", "Command ALTER"}, "DeleteQuery": {"Delete"}, "TruncateQuery": {"TruncateTable"},
    "OptimizeQuery": {"Optimize", "Command OPTIMIZE"}, "Rename": {"Command RENAME", "Rename"},
    "DropQuery": {"Drop"}, "DetachQuery": {"Command DETACH", "Detach"}, "CreateQuery": {"Create"},
    "CreateSQLFunctionQuery": {"Create"}, "CreateUserQuery": {"Command CREATE", "Create"},
    "GrantQuery": {"Grant", "Command GRANT"}, "UndropQuery": {"Command UNDROP"}, "SYSTEM": {"Command SYSTEM"},
    "KillQueryQuery": {"Kill", "Command KILL"}, "Set": {"Set"}, "UseQuery": {"Use"},
    "BackupQuery": {"Command BACKUP"}, "ShowProcesslistQuery": {"Command SHOW", "Show"},
    "ShowTables": {"Command SHOW", "Show"}, "ShowCreateTableQuery": {"Command SHOW", "Show"},
    "ExistsTableQuery": {"Command EXISTS", "Exists"}, "SHOW": {"Command SHOW", "Show"},
    "ShowGrantsQuery": {"Command SHOW", "Show"},
}


def guard_on(sql: str):
    try:
        stmts = [x for x in sqlglot.parse(sql, read="clickhouse") if x is not None]
    except Exception as e:  # noqa: BLE001
        return None, f"parse error: {str(e).splitlines()[0][:80]}"
    try:
        return stmts, "ALLOW " + sqlglot_guard(stmts)
    except Refused as e:
        return stmts, f"refuse: {e}"
    except Exception as e:  # noqa: BLE001
        return stmts, f"refuse (guard crashed: {e})"


def name_sweep() -> dict:
    """Every function and table function ClickHouse knows, called once: does sqlglot's tree keep
    the name, and does the sqlglot guard decide as the ClickHouse guard does on that name?"""
    ident = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    out = {"scalar": Counter(), "table": Counter(), "unsafe": [], "renamed": [], "not_seen_as_function": [],
           "false_refusals": [], "parse_errors": []}
    for name, is_agg, ci, alias_to in DATA["meta"]["system_functions"]:
        if not ident.fullmatch(name):
            continue
        ch_allows = allow.function_allowed(name)
        stmts, verdict = guard_on(f"SELECT {name}(x) FROM t")
        out["scalar"]["names"] += 1
        if stmts is None:
            out["scalar"]["parse_error"] += 1
            out["parse_errors"].append([name, verdict])
            continue
        fns = [func_names(f) for f in stmts[0].find_all(exp.Func)] if stmts else []
        seen = {x for f in fns for x in (f["written"], f["emitted"]) if x}
        if name in seen:
            out["scalar"]["kept_exactly"] += 1
        elif name.lower() in {x.lower() for x in seen}:
            out["scalar"]["kept_other_case"] += 1
        elif fns:
            out["scalar"]["renamed"] += 1
            out["renamed"].append([name, sorted({f["class"] + "->" + str(f["emitted"] or f["normalised"]) for f in fns})])
        else:
            out["scalar"]["no_function_node"] += 1
            out["not_seen_as_function"].append([name, stmts[0].sql(dialect="clickhouse")[:80]])
        sg_allows = verdict.startswith("ALLOW")
        if sg_allows and not ch_allows:
            out["unsafe"].append([name, verdict, stmts[0].sql(dialect="clickhouse")[:80]])
        if ch_allows and not sg_allows:
            out["false_refusals"].append([name, verdict])
    for name in DATA["meta"]["system_table_functions"]:
        if not ident.fullmatch(name):
            continue
        out["table"]["names"] += 1
        stmts, verdict = guard_on(f"SELECT * FROM {name}('x')")
        if stmts is None:
            out["table"]["parse_error"] += 1
            out["parse_errors"].append([f"FROM {name}()", verdict])
            continue
        tfs = [func_names(tf) for tb in stmts[0].find_all(exp.Table) if (tf := table_fn(tb)) is not None]
        if any(name in (f["written"], f["emitted"]) for f in tfs):
            out["table"]["kept_exactly"] += 1
        else:
            out["table"]["not_a_table_function_in_sqlglot"] += 1
            out["not_seen_as_function"].append([f"FROM {name}()", stmts[0].sql(dialect="clickhouse")[:80]])
        if verdict.startswith("ALLOW") and not allow.table_function_allowed(name):
            out["unsafe"].append([f"FROM {name}('x')", verdict, stmts[0].sql(dialect="clickhouse")[:80]])
        if allow.table_function_allowed(name) and not verdict.startswith("ALLOW"):
            out["false_refusals"].append([f"FROM {name}('x')", verdict])
    return out


def main() -> None:
    results = []
    for r in DATA["queries"]:
        q = r["query"]
        rec = {k: r.get(k) for k in ("category", "source", "query")}
        ch = {"parses": "canonical" in r, "error": r.get("canonical_error") or r.get("explain_error"),
              "kind": r.get("kind"), "functions": r.get("functions"), "table_functions": r.get("table_functions"),
              "tables": (r.get("tables") or []) + (r.get("in_tables") or []),
              "outside": r.get("outside", []), "apply_functions": r.get("apply_functions"),
              "settings": r.get("has_set"), "format_or_into": bool(r.get("union_extra_children")),
              "several_statements": r.get("canonical_error") == "one statement per request",
              "guard": r["guard"]}
        # ClickHouse never ran the tree walk when it refused at formatQuery; count its statements.
        ch["statements"] = "several" if ch["several_statements"] else (1 if ch["parses"] else 0)
        sg: dict = {}
        try:
            stmts = [s for s in sqlglot.parse(q, read="clickhouse") if s is not None]
            sg["parses"] = True
            sg["statements"] = len(stmts)
            sg["trees"] = [facts(s) for s in stmts]
            sg["kind"] = sg["trees"][0]["kind"] if stmts else None
            sg["opaque_command"] = any(t["kind"].startswith("Command") for t in sg["trees"])
        except Exception as e:  # noqa: BLE001
            stmts = []
            sg.update(parses=False, error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}", statements=0)
        try:
            sg["guard"] = {"allowed": True, "kind": sqlglot_guard(stmts)} if sg["parses"] else \
                {"allowed": False, "message": "not parseable"}
        except Refused as e:
            sg["guard"] = {"allowed": False, "message": str(e)}
        except Exception as e:  # noqa: BLE001
            sg["guard"] = {"allowed": False, "message": f"guard crashed: {e}"}

        diffs = []
        if ch["parses"] != sg["parses"] and not ch["several_statements"]:
            diffs.append("parse: ClickHouse " + ("parses" if ch["parses"] else f"refuses ({ch['error'][:90]})")
                         + ", sqlglot " + ("parses" if sg["parses"] else f"refuses ({sg['error'][:90]})"))
        if ch["several_statements"] and sg.get("statements") != 2 and sg["parses"]:
            diffs.append(f"statements: ClickHouse several, sqlglot {sg['statements']}")
        if ch["several_statements"] and not sg["parses"]:
            diffs.append(f"statements: ClickHouse several, sqlglot parse error ({sg['error'][:90]})")
        if ch["parses"] and sg["parses"] and ch["kind"]:
            if sg["statements"] != 1:
                diffs.append(f"statements: ClickHouse 1, sqlglot {sg['statements']}")
            elif sg["kind"] not in CH_TO_SQLGLOT.get(ch["kind"], set()):
                diffs.append(f"kind: ClickHouse {ch['kind']}, sqlglot {sg['kind']}")
            elif sg["opaque_command"]:
                diffs.append(f"opaque: sqlglot kept {sg['kind']} as unparsed text (no tree to check)")
        t = None
        read_kind = ch["kind"] in ("SelectWithUnionQuery", "Explain", "DescribeQuery")
        if ch["parses"] and sg["parses"] and sg["statements"] == 1:
            t = sg["trees"][0]
            seen = names_seen(t)
            seen_lower = {x.lower() for x in seen}
            for name in ch["outside"]:
                if name in seen:
                    continue
                if name.lower() in seen_lower:
                    diffs.append(f"outside call {name}: sqlglot renamed it ({sorted(x for x in seen if x.lower() == name.lower())})")
                else:
                    diffs.append(f"outside call {name}: missing from sqlglot's tree")
            # table functions: ClickHouse Function under TableExpression vs sqlglot Table(this=Func)
            if not read_kind:  # DDL/writes: EXPLAIN AST shows their tables as plain Identifiers; both refuse by kind
                t = None
        if ch["parses"] and sg["parses"] and sg["statements"] == 1 and t is not None:
            ch_tf = set(ch["table_functions"] or [])
            sg_tf = {fn["emitted"] or fn["normalised"] for fn in t["table_functions"]}
            if any(isinstance(n, exp.Values) for n in stmts[0].walk()):
                sg_tf.add("values (as exp.Values)")
            if {x.lower() for x in ch_tf} != {x.lower().replace(" (as exp.values)", "") for x in sg_tf}:
                diffs.append(f"table functions: ClickHouse {sorted(ch_tf)}, sqlglot {sorted(sg_tf)}")
            sg_tables = {(f"{x['db']}." if x["db"] else "") + x["name"] for x in t["tables"]}
            in_cols = {f"{c.args['field'].table}.{c.args['field'].name}" for c in stmts[0].find_all(exp.In)
                       if isinstance(c.args.get("field"), exp.Column) and c.args["field"].table}
            if set(ch["tables"]) - sg_tables - in_cols or (sg_tables - set(ch["tables"])):
                diffs.append(f"tables: ClickHouse {sorted(ch['tables'])}, sqlglot {sorted(sg_tables)}"
                             + (f" (+ IN column {sorted(in_cols)})" if in_cols else ""))
            if bool(ch["settings"]) != (t["settings"]) and ch["kind"] == "SelectWithUnionQuery":
                diffs.append(f"SETTINGS: ClickHouse {ch['settings']}, sqlglot {t['settings']}")
            if ch["format_or_into"] != (t["format"] or t["into"]):
                diffs.append(f"FORMAT/INTO: ClickHouse {ch['format_or_into']}, sqlglot {t['format'] or t['into']}")
        if ch["guard"]["allowed"] != sg["guard"]["allowed"]:
            diffs.append(f"verdict: ClickHouse guard {'allows' if ch['guard']['allowed'] else 'refuses'}, "
                         f"sqlglot guard {'allows' if sg['guard']['allowed'] else 'refuses'}")
        unsafe = sg["guard"]["allowed"] and bool(ch["outside"])
        rec.update(clickhouse=ch, sqlglot=sg, differences=diffs, unsafe_allow=unsafe)
        results.append(rec)

    # --- tables
    cats = [c for c in dict.fromkeys(r["category"] for r in results) if c != "supplement"]
    print(f"sqlglot {sqlglot.__version__}; ClickHouse {DATA['meta']['clickhouse_version']} (chdb); "
          f"{len(results)} queries\n")
    print(f"{'category':20} {'n':>4} {'CH exact':>9} {'sg agrees':>10} {'sg differs':>11} {'verdict≠':>9} {'unsafe':>7}")
    tot = Counter()
    for c in cats:
        rs = [r for r in results if r["category"] == c]
        row = Counter(n=len(rs), ch=len(rs),  # ClickHouse's parser is the ground truth: exact by definition
                      agree=sum(not r["differences"] for r in rs), differ=sum(bool(r["differences"]) for r in rs),
                      verdict=sum(r["clickhouse"]["guard"]["allowed"] != r["sqlglot"]["guard"]["allowed"] for r in rs),
                      unsafe=sum(r["unsafe_allow"] for r in rs))
        tot += row
        print(f"{c:20} {row['n']:4} {row['ch']:9} {row['agree']:10} {row['differ']:11} {row['verdict']:9} {row['unsafe']:7}")
    print(f"{'total':20} {tot['n']:4} {tot['ch']:9} {tot['agree']:10} {tot['differ']:11} {tot['verdict']:9} {tot['unsafe']:7}")
    rs = [r for r in results if r["category"] == "supplement"]
    print(f"{'(supplement, not corpus)':24} n={len(rs)} agree={sum(not r['differences'] for r in rs)} "
          f"differ={sum(bool(r['differences']) for r in rs)} "
          f"verdict≠={sum(r['clickhouse']['guard']['allowed'] != r['sqlglot']['guard']['allowed'] for r in rs)} "
          f"unsafe={sum(r['unsafe_allow'] for r in rs)}")

    kinds = Counter()
    for r in results:
        if r["category"] == "supplement":
            continue
        for d in r["differences"]:
            kinds[re.split(r"[:(]", d)[0].strip().split(" ")[0] if not d.startswith("outside") else
                  "outside call " + ("renamed" if "renamed" in d else "missing")] += 1
    print("\ndifference kinds (a query can have several):", dict(kinds))

    print("\nDISAGREEMENTS")
    for i, r in enumerate(results):
        if not r["differences"]:
            continue
        ch, sg = r["clickhouse"], r["sqlglot"]
        print(f"\n[{i}] ({r['category']}{', ' + r['source'] if r['source'] != 'corpus' else ''}) {r['query'][:140]!r}")
        if ch["parses"]:
            print(f"   CH: {ch['kind']} fn={ch['functions']} tf={ch['table_functions']} tables={ch['tables']} "
                  f"outside={ch['outside']} guard={'ALLOW' if ch['guard']['allowed'] else 'refuse: ' + ch['guard']['message'][:70]}")
        else:
            print(f"   CH: refused at parse: {ch['error'][:120]}")
        if sg["parses"]:
            for t in sg["trees"]:
                fns = [(f['written'] or f['class']) + ('`q`' if f['quoted'] else '') +
                       (f"->{f['emitted']}" if f['written'] is None else '') for f in t['functions']]
                print(f"   sg: {t['kind']} fn={fns} tf={[f['emitted'] or f['normalised'] for f in t['table_functions']]} "
                      f"tables={[(x['db'] + '.' if x['db'] else '') + x['name'] for x in t['tables']]}"
                      f"{' apply=' + str(t['apply_functions']) if t['apply_functions'] else ''}")
            print(f"   sg guard: {'ALLOW' if sg['guard']['allowed'] else 'refuse: ' + sg['guard']['message'][:90]}"
                  f"{'   <<< UNSAFE: ClickHouse would run an outside call' if r['unsafe_allow'] else ''}")
        else:
            print(f"   sg: parse error {sg['error'][:140]}")
        for d in r["differences"]:
            print(f"   - {d}")

    sweep = name_sweep()
    print("\nNAME SWEEP (every name in system.functions / system.table_functions, one call each)")
    print("  scalar/aggregate:", dict(sweep["scalar"]), " table functions:", dict(sweep["table"]))
    print("  sqlglot guard ALLOWS, ClickHouse guard refuses (unsafe):", len(sweep["unsafe"]))
    for u in sweep["unsafe"]:
        print("    ", u)
    print("  ClickHouse guard allows, sqlglot guard refuses (false refusals):", len(sweep["false_refusals"]))
    for u in sweep["false_refusals"]:
        print("    ", u)
    print("  not seen as a function by sqlglot:", sweep["not_seen_as_function"])
    print("  parse errors:", len(sweep["parse_errors"]), sweep["parse_errors"][:15])
    print("  renamed (first 40 of", len(sweep["renamed"]), "):", sweep["renamed"][:40])
    meta = {k: v for k, v in DATA["meta"].items() if not k.startswith("system_")}
    out = {"meta": {**meta, "sqlglot_version": sqlglot.__version__}, "totals": dict(tot),
           "difference_kinds": dict(kinds), "name_sweep": {k: (dict(v) if isinstance(v, Counter) else v)
                                                           for k, v in sweep.items()}, "queries": results}
    with open(os.path.join(OUT, "comparison.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False, default=str)


if __name__ == "__main__":
    main()
