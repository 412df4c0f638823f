#!/usr/bin/env bash
# Runs a benchmark on an earlier revision and on the working tree, one
# after the other in the same session, and prints both, so a change is
# judged by figures measured side by side on the same machine.
#
#   bench/compare.sh <rev> store     # cargo bench -p bench --bench store
#   bench/compare.sh <rev> search    # cargo bench -p bench --bench search
#   bench/compare.sh <rev> http      # cargo bench -p bench --bench http
#   bench/compare.sh <rev> sse       # cargo bench -p bench --bench sse
#   bench/compare.sh <rev> watch     # cargo bench -p watcherd --bench watch
#
# (`storaged` and `apid` are the old names of store and http.) A revision
# from before the bench package ran these from storaged and apid: the
# command follows the tree it runs in.
#
# The earlier revision is checked out in a scratch worktree with its own
# target directory; the benchmark's own knobs (BENCH_RECORDS, ...) apply to
# both runs. Output: bench/out/compare-<bench>-<rev>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bench/compare.sh <rev> store|search|http|sse|watch"
rev=${1:?$usage}
which=${2:?$usage}
case "$which" in
  storaged) which=store ;;
  apid) which=http ;;
esac
case "$which" in
  store|search) old=storaged ;;
  http|sse) old=apid ;;
  watch) old=watcherd ;;
  *) echo "unknown benchmark $which; $usage" >&2; exit 2 ;;
esac
# The package that holds the benchmark in the tree at <dir>.
package() {
  if [ "$which" != watch ] && [ -f "$1/bench/Cargo.toml" ]; then echo bench; else echo "$old"; fi
}
short=$(git rev-parse --short "$rev")
scratch=$(mktemp -d /tmp/meta-core-bench-XXXXXX)
trap 'git worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
git worktree add --detach "$scratch/tree" "$rev" >/dev/null
mkdir -p bench/out
out=bench/out/compare-$which-$short.txt
run() { # <dir> <label>
  echo "=== $2"
  local p
  p=$(package "$1")
  (cd "$1" && cargo build --release --bins --locked -q && cargo bench -p "$p" --bench "$which" 2>/dev/null)
}
{
  echo "bench/compare.sh $rev $which, $(date -u +%FT%TZ), $(nproc) cores"
  run "$scratch/tree" "before: $short"
  run . "after: working tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'))"
} | tee "$out"
echo "written to $out"
