#!/usr/bin/env bash
# The gateway's request-level Kafka rules against a real Apache Kafka broker:
# every gateway test that runs on groupTargets (an in-process kgate node and,
# with KGATE_COMPARE_KAFKA, a broker) runs here with a fresh broker from
# scripts/kafka-broker.sh, so the codes kgate's tests expect are checked to
# be Kafka's own on every run of make test.
#
# Environment: GO (default go), KAFKA_RULES_PORT (default 19492; the
# broker's controller listens on the next port).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
port="${KAFKA_RULES_PORT:-19492}"
dir="$(mktemp -d "${TMPDIR:-/tmp}/kgate-kafka-rules.XXXXXX")"
trap 'KAFKA_BROKER_PORT=$port KAFKA_CONTROLLER_PORT=$((port + 1)) scripts/kafka-broker.sh stop "$dir" || true; rm -rf "$dir"' EXIT

# The tests that call groupTargets, by name.
tests="$(awk '
	/^func Test[A-Za-z0-9_]*\(t \*testing\.T\)/ { name = $2; sub(/\(.*/, "", name) }
	/groupTargets\(t, func/ && name != "" { print name; name = "" }
' gateway/*_test.go | sort -u | paste -sd'|' -)"
[[ -n "$tests" ]] || { echo "kafka-rules: no test calls groupTargets" >&2; exit 1; }

addr="$(KAFKA_BROKER_PORT=$port KAFKA_CONTROLLER_PORT=$((port + 1)) scripts/kafka-broker.sh start "$dir")"
n="$(tr '|' '\n' <<<"$tests" | wc -l)"
echo "kafka-rules: Apache Kafka on $addr; $n tests: ${tests//|/ }"
set +e
KGATE_COMPARE_KAFKA="$addr" "${GO:-go}" test -count=1 -v -run "^($tests)\$" ./gateway/ >"$dir/out" 2>&1
rc=$?
set -e
grep -E '^(--- |\s+--- |ok|FAIL|panic)|_test\.go:' "$dir/out" || true
# Each test must have run against the broker too, not only against kgate.
ran="$(grep -cE '^\s+--- PASS: [^ ]+/kafka ' "$dir/out" || true)"
if [[ "$rc" -eq 0 && "$ran" -ne "$n" ]]; then
	echo "kafka-rules: $ran of $n tests passed against Kafka" >&2
	exit 1
fi
exit "$rc"
