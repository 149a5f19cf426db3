#!/bin/sh
# ClickHouse's parser (what the SQL guard uses) against sqlglot's ClickHouse dialect on the attack
# corpus (tests/reliability/sql_corpus.py) and the apps' queries. sqlglot is not a dependency of
# vidnexus: it runs from a scratch virtualenv.
#   SQLGLOT_PYTHON=/path/to/venv/bin/python OUT=/tmp/sql-parsers sh bench/sql-parsers/run.sh
# Result of 2026-11-23 (sqlglot 30.30.0): bench/results/sql-parsers-2026-11-23.json
set -e
cd "$(dirname "$0")/../.."
: "${SQLGLOT_PYTHON:?set SQLGLOT_PYTHON to a python with sqlglot installed (pip install sqlglot==30.30.0)}"
export OUT=${OUT:-/tmp/sql-parsers}
.venv/bin/python bench/sql-parsers/clickhouse_side.py | cut -c1-120
"$SQLGLOT_PYTHON" bench/sql-parsers/sqlglot_side.py > "$OUT/report.txt" 2>&1
head -16 "$OUT/report.txt"
echo "full report: $OUT/report.txt; data: $OUT/comparison.json"
