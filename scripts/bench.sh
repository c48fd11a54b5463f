#!/usr/bin/env bash
# Benchmark kgate against Apache Kafka with the same load tool and settings.
#
# Usage: scripts/bench.sh [kgate-bench flags...]
#
# Builds bin/kgate and bin/kgate-bench, starts a single kgate node on a
# temporary data directory, runs kgate-bench against it (label "kgate") and
# stops it; then starts a local Apache Kafka broker with
# scripts/kafka-broker.sh, runs the same benchmark (label "kafka") and stops
# it; finally prints both result tables. Everything started is stopped on exit,
# including on Ctrl-C. Exits non-zero if any target failed.
#
# Flags are passed to kgate-bench (default: -partitions 1,8 -records 200000);
# see `go run ./cmd/kgate-bench -h`.
#
# Environment:
#   BENCH_TARGETS        targets to run, in order (default "kgate kafka")
#   KGATE_START_TIMEOUT  seconds to wait for kgate's Kafka port (default 60)
#   KEEP_WORK=1          keep the work directory (logs, results) on success

# Functions are called from traps and as "run_$target".
# shellcheck disable=SC2317
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
readonly SCRIPT_DIR REPO_ROOT
cd "$REPO_ROOT"

readonly HOST=127.0.0.1
readonly KGATE_KAFKA_PORT=29092
readonly KGATE_START_TIMEOUT="${KGATE_START_TIMEOUT:-60}"
readonly STOP_TIMEOUT=30
read -r -a TARGETS <<<"${BENCH_TARGETS:-kgate kafka}"
readonly TARGETS

if (($# > 0)); then
	BENCH_ARGS=("$@")
else
	BENCH_ARGS=(-partitions "1,8" -records 200000)
fi
readonly BENCH_ARGS

log() { echo "bench: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/kgate-bench.XXXXXX")"
readonly WORK
KGATE_PID=""
KAFKA_STARTED=""
FAILED=0

stop_kgate() {
	[[ -n "$KGATE_PID" ]] || return 0
	local pid="$KGATE_PID" deadline=$((SECONDS + STOP_TIMEOUT))
	KGATE_PID=""
	kill -TERM "$pid" 2>/dev/null || return 0
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			log "kgate (pid $pid) still running after ${STOP_TIMEOUT}s; killing"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		sleep 0.2
	done
	wait "$pid" 2>/dev/null || true
}

stop_kafka() {
	[[ -n "$KAFKA_STARTED" ]] || return 0
	KAFKA_STARTED=""
	scripts/kafka-broker.sh stop "$WORK/kafka" || true
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_kgate
	stop_kafka
	rm -rf "$WORK/kgate-data" "$WORK/kafka/data"
	if ((rc != 0 || FAILED)) || [[ -n "${KEEP_WORK:-}" ]]; then
		log "logs and results kept in $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# bench TARGET BROKERS: runs kgate-bench, keeping its table in WORK/TARGET.out.
bench() {
	log "benchmarking $1 at $2: ${BENCH_ARGS[*]}"
	if ! bin/kgate-bench -brokers "$2" -label "$1" "${BENCH_ARGS[@]}" >"$WORK/$1.out"; then
		log "$1: benchmark failed"
		FAILED=1
	fi
}

run_kgate() {
	local deadline
	port_open "$KGATE_KAFKA_PORT" && die "port $HOST:$KGATE_KAFKA_PORT is already in use"
	mkdir -p "$WORK/kgate-data"
	log "starting kgate (log: $WORK/kgate.log)"
	bin/kgate serve --data-dir "$WORK/kgate-data" \
		--kafka-addr "$HOST:$KGATE_KAFKA_PORT" \
		--raft-addr "$HOST:29093" \
		--gossip-addr "$HOST:29094" \
		--admin-addr "$HOST:29095" \
		>"$WORK/kgate.log" 2>&1 </dev/null &
	KGATE_PID=$!
	deadline=$((SECONDS + KGATE_START_TIMEOUT))
	until port_open "$KGATE_KAFKA_PORT"; do
		if ! kill -0 "$KGATE_PID" 2>/dev/null; then
			KGATE_PID=""
			tail -n 30 "$WORK/kgate.log" >&2
			log "kgate exited during startup"
			FAILED=1
			return
		fi
		if ((SECONDS >= deadline)); then
			tail -n 30 "$WORK/kgate.log" >&2
			log "kgate not listening on $HOST:$KGATE_KAFKA_PORT after ${KGATE_START_TIMEOUT}s"
			stop_kgate
			FAILED=1
			return
		fi
		sleep 0.2
	done
	bench kgate "$HOST:$KGATE_KAFKA_PORT"
	stop_kgate
}

run_kafka() {
	local addr
	KAFKA_STARTED=1
	if ! addr="$(scripts/kafka-broker.sh start "$WORK/kafka")"; then
		log "the Kafka broker did not start"
		FAILED=1
		return
	fi
	bench kafka "$addr"
	stop_kafka
}

mkdir -p bin
for t in "${TARGETS[@]}"; do
	case "$t" in
	kgate)
		log "building bin/kgate"
		go build -o bin/kgate ./cmd/kgate
		;;
	kafka) ;;
	*) die "unknown target $t (want kgate or kafka)" ;;
	esac
done
log "building bin/kgate-bench"
go build -o bin/kgate-bench ./cmd/kgate-bench

for t in "${TARGETS[@]}"; do
	"run_$t"
done

for t in "${TARGETS[@]}"; do
	echo
	echo "== $t"
	if [[ -s "$WORK/$t.out" ]]; then
		cat "$WORK/$t.out"
	else
		echo "(no results)"
	fi
done
exit "$FAILED"
