#!/usr/bin/env bash
# Runs schemathesis 4.x (pip install schemathesis) over apid's OpenAPI
# document against a fresh meta-core on its embedded SQLite, every daemon
# running. Every phase runs (examples, coverage, fuzzing, stateful), and
# every answer is held to the document: no server error (5xx), and no
# status code, content type, header or response body the document does not
# give for that operation. Twice: as an anonymous client (every admin route
# must answer its documented 401) and with the admin token meta-core made.
#
#   cargo build --workspace --bins && bench/fuzz.sh [MAX_EXAMPLES]   # default 50
#
# The binaries come from BIN_DIR: target/release when it holds a build,
# else target/debug. SEED fixes schemathesis's seed. WORKERS is its
# number of workers, 1 by default: on the Python 3.11.7 it was run with,
# several workers fail a run now and then with "AST constructor recursion
# depth mismatch" while schemathesis builds its strategies on threads.
# CHECKS replaces the list of checks (`all` adds the checks of what the
# server accepts and refuses, which the document does not promise).
# Settings per operation are in bench/fuzz.toml. Each run's JSON report is
# kept in FUZZ_REPORT_DIR (default target/fuzz). The last line sums up
# both runs (operations, test cases, failures, errors); the exit status
# is non-zero on any failure or error in either.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v schemathesis >/dev/null || { echo "pip install schemathesis" >&2; exit 2; }
examples="${1:-50}"
if [ -z "${BIN_DIR:-}" ]; then
  BIN_DIR=target/debug
  [ -x target/release/meta-core ] && BIN_DIR=target/release
fi
BIN_DIR="$(cd "$BIN_DIR" && pwd)"
[ -x "$BIN_DIR/meta-core" ] || { echo "no meta-core in $BIN_DIR: cargo build --workspace --bins" >&2; exit 2; }
reports="${FUZZ_REPORT_DIR:-target/fuzz}"
mkdir -p "$reports"
reports="$(cd "$reports" && pwd)"
work="$(mktemp -d /tmp/meta-core-fuzz.XXXXXX)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/files/plugin" "$work/files/watch"
export META_CORE_PATH="$work/meta-core" META_CORE_RUN_DIR="$work/run" FILES_PATH="$work/files"
export META_CORE_HTTP_HOST=127.0.0.1 META_CORE_HTTP_PORT="$port" META_CORE_BIN_DIR="$BIN_DIR"
export RUST_LOG=warn
echo "fuzz: binaries from $BIN_DIR, meta-core in $work, port $port"
"$BIN_DIR/meta-core" run >"$work/meta-core.log" 2>&1 &
mc=$!
trap 'kill $mc 2>/dev/null; wait $mc 2>/dev/null; rm -rf "$work"' EXIT
# Every daemon running and ready (a debug build on a busy machine takes
# its time), then the document as apid serves it.
ready() {
  local s
  s=$("$BIN_DIR/meta-core" status --json 2>/dev/null) || return 1
  python3 -c '
import json, sys
s = json.loads(sys.argv[1])
ok = s["role"] == "leader" and all(d["state"] == "running" and d["ready"] for d in s["daemons"])
sys.exit(0 if ok else 1)' "$s"
}
for i in $(seq 600); do
  ready && break
  kill -0 $mc 2>/dev/null || { cat "$work/meta-core.log" >&2; exit 2; }
  [ "$i" = 600 ] && { echo "meta-core not ready after 60 s" >&2; cat "$work/meta-core.log" >&2; exit 2; }
  sleep 0.1
done
curl -sf "http://127.0.0.1:$port/api/openapi.json" >"$work/openapi.json"
token=$("$BIN_DIR/meta-core" admin-token)
# What the document's examples name, so that the cases built from them
# reach a record and a file rather than a 404: the example RID, owning the
# example CID (the midhash256 of "hello world"), whose filePath is a real
# file, and the example path of POST /file/cid.
rid=01M8N10DTXEQRADXEPK8EBGMCQ cid=bagacbabaec7v3fu2ygzh3e2sybg3fbzmisry2hbtpmck6vx3yftea6vzq35r4
printf 'hello world' >"$FILES_PATH/watch/hello.txt"
printf 'plugin output' >"$FILES_PATH/plugin/a.mkv"
curl -sf -X PUT -H 'Content-Type: application/json' "http://127.0.0.1:$port/meta/$rid" \
  -d "{\"title\":\"Hello\",\"filePath\":\"$FILES_PATH/watch/hello.txt\",\"cids/$cid\":\"1\"}" >/dev/null
# Left out: the two routes that empty the store (POST /api/snapshot/wipe,
# POST /api/metadata/clear). They answer as documented, but run mid-run
# they would wipe the records the other cases and the stateful phase
# wrote. Nor the console's buttons and log tails (POST /api/tree/stop,
# POST /api/daemons/{daemon}/restart, GET /api/logs/{daemon}): they would
# stop or restart the tree under test, and a log tail never ends;
# tests/tests/suite/console.rs drives them. Nothing else is left out.
excluded='^/api/(snapshot/wipe|metadata/clear|tree/stop|daemons/.*/restart|logs/.*)$'
checks=${CHECKS:-not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance}
fuzz() { # <label> <report name> [schemathesis options...]
  local label="$1" name="$2"
  shift 2
  echo "=== $label"
  rm -f "$reports/$name.json"
  local rc=0
  # The event streams never end: schemathesis reads one for at most the
  # request timeout (or 20 events) and checks what came.
  schemathesis --no-color --config-file bench/fuzz.toml run "$work/openapi.json" \
    --url "http://127.0.0.1:$port" \
    --checks "$checks" --max-examples "$examples" \
    --phases examples,coverage,fuzzing,stateful \
    --exclude-path-regex "$excluded" \
    --workers "${WORKERS:-1}" ${SEED:+--seed "$SEED"} \
    --report json --report-json-path "$reports/$name.json" "$@" || rc=$?
  return "$rc"
}
status=0
fuzz "without a token" anonymous || status=1
fuzz "with the admin token" admin -H "Authorization: Bearer $token" || status=1
# One line for both runs, from schemathesis's JSON reports.
python3 - "$reports/anonymous.json" "$reports/admin.json" <<'EOF' || status=1
import json, sys
parts, bad = [], False
for label, path in zip(("anonymous", "admin"), sys.argv[1:]):
    try:
        r = json.load(open(path))
    except (OSError, ValueError) as e:
        parts.append(f"{label}: no report ({e})")
        bad = True
        continue
    ops, cases = r["operations"], r["test_cases"]
    failures = sum(f["count"] for f in r["failures"])
    errors = len(r["errors"]) + cases["errored"]
    bad |= failures > 0 or errors > 0 or r["exit_code"] != 0
    parts.append(
        f"{label}: {ops['tested']}/{ops['selected']} operations, "
        f"{cases['generated']} cases, {failures} failures, {errors} errors"
    )
print("fuzz summary: " + "; ".join(parts) + ("; FAILED" if bad else "; clean"))
sys.exit(1 if bad else 0)
EOF
exit $status
