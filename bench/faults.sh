#!/usr/bin/env bash
# The fault suite's long runs (issue 26): the two scenarios of
# tests/tests/suite/faults.rs, crashes under load (every daemon and the
# supervisor SIGKILLed ROUNDS times each, in a random order, at random
# moments) and failover under load (the leader's supervisor SIGKILLed
# ROUNDS times, a standby taking over each time), each run REPEATS times
# on release binaries. Prints one table of what every run did and lost;
# exits non-zero if anything was lost.
#   bench/faults.sh [ROUNDS] [REPEATS]     (default 10 1)
# META_CORE_FAULT_SEED=<n> replays a run's order of kills and moments.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-10}"
repeats="${2:-1}"
report="$(mktemp /tmp/meta-core-faults.XXXXXX)"
trap 'rm -f "$report"' EXIT
cargo build --release --workspace --bins --locked
status=0
for _ in $(seq "$repeats"); do
  META_CORE_FAULT_ROUNDS="$rounds" META_CORE_FAULT_REPORT="$report" \
    META_CORE_BIN_DIR="$PWD/target/release" \
    cargo test --release --locked -p e2e --test suite -- --nocapture --test-threads 1 \
      faults::sigkill_of_each faults::a_standby_takes_over \
    || status=1
done
python3 - "$report" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cols = ["scenario", "kills", "acked", "lost", "uncertain (committed)", "partial",
        "meta events committed / delivered", "file events committed / delivered",
        "files copied / announced once", "most DB holders", "orphans", "stale mounts",
        "takeover ms median / max", "problems"]
print("| " + " | ".join(cols) + " |")
print("|" + "---|" * len(cols))
for r in runs:
    t = r["takeoverMs"]
    take = f"{statistics.median(t):.1f} / {max(t):.1f}" if t else "—"
    kills = ", ".join(f"{k} ×{n}" for k, n in r["kills"].items())
    m, f = r["meta"], r["filesStream"]
    print("| " + " | ".join(str(c) for c in [
        r["scenario"], kills, r["acked"], r["lost"],
        f'{r["uncertain"]} ({r["uncertainCommitted"]})', r["partial"],
        f'{m["committed"]} / {m["delivered"]} ({m["followers"]} followers, {m["resumes"]} resumes)',
        f'{f["committed"]} / {f["delivered"]} ({f["followers"]} followers, {f["resumes"]} resumes)',
        f'{r["filesCopied"]} / {r["filesAnnouncedOnce"]}', r["mostDbHolders"],
        r["orphans"], r["staleMounts"], take, r["problems"]]) + " |")
takeovers = [x for r in runs for x in r["takeoverMs"]]
if takeovers:
    takeovers.sort()
    p = lambda q: takeovers[min(len(takeovers) - 1, int(q * len(takeovers)))]
    print(f"\ntakeovers: {len(takeovers)}, median {statistics.median(takeovers):.1f} ms, "
          f"p90 {p(0.9):.1f} ms, "
          f"max {takeovers[-1]:.1f} ms (target: the standby serves within 100 ms)")
lost = sum(r["lost"] + r["partial"] + r["problems"] for r in runs)
print(f"\n{len(runs)} runs, {sum(r['acked'] for r in runs)} writes acknowledged, "
      f"{sum(sum(r['kills'].values()) for r in runs)} SIGKILLs; problems: {lost}")
PY
exit "$status"
