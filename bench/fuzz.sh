#!/usr/bin/env bash
# Runs schemathesis (pip install schemathesis) over apid's OpenAPI document
# against a fresh meta-core on its embedded SQLite, every daemon running:
# server errors, status codes, content types and response schemas are held
# to the document, twice: as an anonymous client (every admin route must
# answer its documented 401) and with the admin token meta-core made.
# Prints schemathesis's summaries; exits non-zero if either run failed.
#   cargo build --release --bins && bench/fuzz.sh [MAX_EXAMPLES]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v schemathesis >/dev/null || { echo "pip install schemathesis" >&2; exit 2; }
examples="${1:-50}"
work="$(mktemp -d /tmp/meta-core-fuzz.XXXXXX)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/files/plugin"
export META_CORE_PATH="$work/meta-core" META_CORE_RUN_DIR="$work/run" FILES_PATH="$work/files"
export META_CORE_HTTP_HOST=127.0.0.1 META_CORE_HTTP_PORT="$port" META_CORE_BIN_DIR="$PWD/target/release"
export RUST_LOG=warn
target/release/meta-core run >"$work/meta-core.log" 2>&1 &
mc=$!
trap 'kill $mc 2>/dev/null; wait $mc 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$port/api/openapi.json" >"$work/openapi.json"
token=$(target/release/meta-core admin-token)
# The two routes that empty the store are left out: they would wipe what
# the other cases write.
fuzz() { # <label> [schemathesis options...]
  echo "=== $1"
  shift
  schemathesis run "$work/openapi.json" --url "http://127.0.0.1:$port" \
    -c not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    -n "$examples" --exclude-path-regex '/api/snapshot/wipe|/api/metadata/clear' "$@" 2>&1 | tail -40
  return "${PIPESTATUS[0]}"
}
status=0
fuzz "without a token" || status=1
fuzz "with the admin token" -H "Authorization: Bearer $token" || status=1
exit $status
