"""Ground truth: ClickHouse's own parser (chdb), via vidnexus.sql_guard.SqlGuard.

Run with the project's interpreter (it has chdb); reads nothing but the project, changes nothing:
    .venv/bin/python $OUT/clickhouse_side.py
Writes $OUT/clickhouse.json.
"""
import importlib, json, os, re, sys, time

OUT = os.environ.get("OUT", "/tmp/sql-parsers")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.makedirs(OUT, exist_ok=True)

sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "reliability"))
import sql_corpus  # noqa: E402
from vidnexus.apps import APP_REFS  # noqa: E402
from vidnexus.connectors.chdb_store import ChdbStore  # noqa: E402
from vidnexus.sql_guard import RefusedQuery, SqlGuard, parse_ast  # noqa: E402

CANARY, URL = "/tmp/canary.txt", "http://127.0.0.1:1/canary"
# Names that reach outside the store (ClickHouse's names are case-sensitive: FILE/URL/... are unknown).
IN_FUNCTIONS = {"in", "notin", "globalin", "globalnotin", "nullin", "notnullin", "globalnullin", "globalnotnullin"}
OUTSIDE = sorted(set(sql_corpus.OUTSIDE_TABLE_FUNCTIONS) | {"file", "dictGet", "getSetting", "sleep"})


# Not part of the corpus: statement shapes the guard allows (SHOW TABLES, EXISTS, EXPLAIN, ...) that
# the corpus has only in refused forms, and follow-ups of disagreements found on the corpus.
SUPPLEMENT = [
    "SHOW TABLES", "SHOW TABLES LIKE 'hud%'", "EXISTS hud_reads", "EXISTS TABLE hud_reads",
    "SHOW CREATE TABLE hud_reads", "DESCRIBE hud_reads", "DESCRIBE TABLE hud_reads", "EXPLAIN SELECT 1",
    "EXPLAIN AST SELECT count() FROM hud_reads", "SELECT 1 UNION ALL SELECT 2", "WITH 1 AS x SELECT x",
    "SELECT * FROM hud_reads, dictionary('d')", "SELECT * FROM (SELECT 1) AS a, dictionary('d')",
    "SELECT * FROM hud_reads AS h JOIN dictionary('d') AS d ON 1 = 1",
    "DESCRIBE url('{url}', 'LineAsString')", "DESCRIBE TABLE file('{canary}', 'LineAsString')",
]


def tree_facts(rows):
    facts = {"ast_rows": rows}
    try:
        tree = parse_ast(rows)
    except RefusedQuery as e:
        facts["tree_error"] = str(e)
        return facts
    parents = {}
    funcs, tfuncs, tables, in_tables, kinds = [], [], [], [], set()
    for n in tree.walk():
        kinds.add(n.kind)
        for c in n.children:
            parents[id(c)] = n
        if n.kind == "Function":
            p = parents.get(id(n))
            funcs.append(n.name)
            if p is not None and p.kind in ("TableExpression", "InsertQuery"):
                tfuncs.append(n.name)
            if n.name.lower() in IN_FUNCTIONS and n.children and len(n.children[0].children) == 2:
                rhs = n.children[0].children[1]  # `x IN db.table` reads a table
                if rhs.kind == "Identifier":
                    in_tables.append(rhs.name)
        elif n.kind == "TableIdentifier":
            tables.append(n.name)
    facts.update(
        kind=tree.kind, kind_text=tree.text, functions=sorted(set(funcs)), table_functions=sorted(set(tfuncs)),
        tables=sorted(set(tables)), in_tables=sorted(set(in_tables)), node_kinds=sorted(kinds), has_set="Set" in kinds,
        has_query_parameter="QueryParameter" in kinds,
        union_extra_children=(len(tree.children) - 1) if tree.kind == "SelectWithUnionQuery" else None,
        outside=sorted({f for f in funcs if f in OUTSIDE}),
    )
    return facts


def apply_functions(canonical):
    """`* APPLY f`: EXPLAIN AST prints a bare ColumnsApplyTransformer row without the name, so
    take it from the canonical text (ClickHouse's own formatting)."""
    return sorted(set(re.findall(r"\bAPPLY\s*\(?\s*`?([A-Za-z_][A-Za-z0-9_]*)", canonical)))


def main():
    t0 = time.time()
    s = ChdbStore(None)
    g = SqlGuard(s)
    out = []
    sources = []
    for cat, q in sql_corpus.corpus():
        sources.append((cat, "corpus", q.format(canary=CANARY, url=URL)))
    for app, ref in APP_REFS.items():
        demo = importlib.import_module(ref.split(":")[0]).DEMO
        for name, q in demo.queries.items():
            sources.append(("app query", f"{app}:{name}", q))
    for q in SUPPLEMENT:
        sources.append(("supplement", "not corpus", q.format(canary=CANARY, url=URL)))
    for cat, src, q in sources:
        rec = {"category": cat, "source": src, "query": q}
        try:
            rec["canonical"] = g.canonical(q)
        except RefusedQuery as e:
            rec["canonical_error"] = str(e)
        if "canonical" in rec:
            try:
                rows = [str(r[0]) for r in s.query("EXPLAIN AST " + rec["canonical"]).rows]
                rec.update(tree_facts(rows))
                if "ColumnsApplyTransformer" in rec.get("node_kinds", ()):
                    rec["apply_functions"] = apply_functions(rec["canonical"])
                    rec["outside"] = sorted(set(rec["outside"]) | {f for f in rec["apply_functions"] if f in OUTSIDE})
            except Exception as e:  # noqa: BLE001
                rec["explain_error"] = str(e)[:300]
        try:
            c = g.check(q)
            rec["guard"] = {"allowed": True, "kind": c.kind}
        except RefusedQuery as e:
            rec["guard"] = {"allowed": False, "message": str(e)}
        out.append(rec)
    functions = [list(r) for r in s.query("SELECT name, is_aggregate, case_insensitive, alias_to FROM system.functions ORDER BY name").rows]
    table_functions = [r[0] for r in s.query("SELECT name FROM system.table_functions ORDER BY name").rows]
    meta = {"system_functions": functions, "system_table_functions": table_functions,"clickhouse_version": s.query("SELECT version()").scalar(), "outside_names": OUTSIDE,
            "policy_database": g.policy.database, "canary": CANARY, "url": URL, "seconds": round(time.time() - t0, 2)}
    with open(os.path.join(OUT, "clickhouse.json"), "w") as f:
        json.dump({"meta": meta, "queries": out}, f, indent=1, ensure_ascii=False)
    print({k: v for k, v in meta.items() if not k.startswith("system_")}, len(out), "queries")


if __name__ == "__main__":
    main()
