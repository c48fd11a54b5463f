#!/usr/bin/env bash
# The failover benchmark: leader kills under a live consumer group, for
# each client library, against three kgate nodes and against a local
# three-broker Apache Kafka cluster, printed as one table.
#
# Usage: scripts/failover-bench.sh [kgate-bench failover flags...]
#
# For each target and client: a producer writes 200 records/s round robin
# to 6 partitions; 3 consumers of one client library share a group
# (cooperative-sticky, 6 s session, heartbeat every 1 s, commits every 1 s).
# Every 10 s (once the group is healthy again) the kgate Raft leader, or the
# Kafka broker coordinating the group, is killed with SIGKILL and started
# again 5 s later. kgate-bench failover measures per kill how long until a
# new leader is named, the producer has a record produced after the kill
# acknowledged, and every consumer has fetched one, and counts kills after
# which the group's members or generation changed, acknowledged records
# never consumed, records consumed twice and committed offsets that went
# backwards. With FAILOVER_PAUSES, each target and client then also has a
# run of pauses: the leader (coordinator) is frozen with SIGSTOP for each
# hold in turn and resumed with SIGCONT (kgate-bench failover -fault pause),
# counting the members lost per hold. Extra flags are passed to every
# kgate-bench failover run.
#
# Environment:
#   FAILOVER_TARGETS      targets, in order (default "kgate kafka")
#   FAILOVER_CLIENTS      clients, in order (default "franz-go franz-go-tuned java librdkafka
#                         librdkafka-tuned"; the tuned ones run with the settings
#                         docs/operations.md gives: franz-go MetadataMinAge 250ms and retry
#                         backoff at least 500ms, librdkafka reconnect.backoff.max.ms=1000)
#   FAILOVER_KILLS        kills per client against kgate (default 100; 0: no kill runs)
#   FAILOVER_KAFKA_KILLS  kills per client against Kafka (default 20; 0: no kill runs)
#   FAILOVER_PAUSES       comma-separated holds of the pause runs, e.g. 3s,6s,10s,15s,20s
#                         (default none: no pause runs)
#   FAILOVER_PAUSE_ROUNDS pauses per client and target (default 2 per hold)
#   FAILOVER_PAUSE_CLIENTS clients of the pause runs (default FAILOVER_CLIENTS)
#   FAILOVER_PYTHON       python with confluent_kafka (default /usr/bin/python3)
#   KEEP_WORK=1           keep the work directory (logs, JSON results)
# Ports: kgate as scripts/bench-node.sh (BENCH_CLUSTER_PORT_BASE, default
# 29100), Kafka as scripts/kafka-cluster.sh (KAFKA_CLUSTER_PORT_BASE, 32100).

# Functions are called from traps and as "target_$name".
# shellcheck disable=SC2317
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
readonly SCRIPT_DIR REPO_ROOT
cd "$REPO_ROOT"

read -r -a TARGETS <<<"${FAILOVER_TARGETS:-kgate kafka}"
read -r -a CLIENTS <<<"${FAILOVER_CLIENTS:-franz-go franz-go-tuned java librdkafka librdkafka-tuned}"
readonly TARGETS CLIENTS
readonly KILLS="${FAILOVER_KILLS:-100}"
readonly KAFKA_KILLS="${FAILOVER_KAFKA_KILLS:-20}"
readonly PAUSES="${FAILOVER_PAUSES:-}"
read -r -a PAUSE_CLIENTS <<<"${FAILOVER_PAUSE_CLIENTS:-${CLIENTS[*]}}"
IFS=, read -r -a holds <<<"$PAUSES"
readonly PAUSE_ROUNDS="${FAILOVER_PAUSE_ROUNDS:-$((2 * ${#holds[@]}))}"
readonly PAUSE_CLIENTS
readonly PYTHON="${FAILOVER_PYTHON:-/usr/bin/python3}"
readonly EXTRA=("$@")
readonly JAR="$REPO_ROOT/test/clients/java/target/kgate-e2e-java.jar"
export BENCH_CLUSTER_NODES=3

log() { echo "failover-bench: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/kgate-failover-bench.XXXXXX")"
readonly WORK
KGATE_DIR="" KAFKA_DIR=""
FAILED=0
RESULTS=()

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -z "$KGATE_DIR" ]] || "$SCRIPT_DIR/bench-node.sh" stop "$KGATE_DIR" || true
	[[ -z "$KAFKA_DIR" ]] || "$SCRIPT_DIR/kafka-cluster.sh" stop "$KAFKA_DIR" || true
	rm -rf "$WORK"/kgate/node*/data "$WORK"/kafka/node*/data
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

# run_bench NAME DIR KILLS CLIENT ARGS...: one kgate-bench failover run with
# CLIENT's consumers; its JSON result goes to WORK/NAME.json, its log to
# WORK/NAME.log.
run_bench() {
	local name="$1" dir="$2" kills="$3" client="$4" pids="" i
	shift 4
	for i in 1 2 3; do
		pids+="${pids:+,}$i=$(cat "$dir/node$i/pid")"
	done
	local -a cargs
	local conf="${KGATE_E2E_RDKAFKA_CONF:-}"
	case "$client" in
	franz-go) cargs=(-client franz-go) ;;
	franz-go-tuned) cargs=(-client "franz-go (tuned)" -metadata-min-age 250ms -retry-backoff-min 500ms) ;;
	# java.io.tmpdir in WORK: snappy-java unpacks its native library there,
	# and a JVM the benchmark kills leaves it behind.
	java) cargs=(-client java -consumer-cmd "java -Djava.io.tmpdir=$WORK -cp $JAR kgate.e2e.ClusterConsumer") ;;
	librdkafka) cargs=(-client librdkafka -consumer-cmd "$PYTHON $REPO_ROOT/test/clients/confluent-kafka-python/cluster_consumer.py") ;;
	librdkafka-tuned)
		cargs=(-client "librdkafka (tuned)" -consumer-cmd "$PYTHON $REPO_ROOT/test/clients/confluent-kafka-python/cluster_consumer.py")
		conf=reconnect.backoff.max.ms=1000
		;;
	esac
	log "$name: $kills rounds (log: $WORK/$name.log)"
	RESULTS+=("$WORK/$name.json")
	if ! KGATE_E2E_RDKAFKA_CONF="$conf" bin/kgate-bench failover -json -kills "$kills" -pids "$pids" "${cargs[@]}" "$@" "${EXTRA[@]}" \
		>"$WORK/$name.json" 2>"$WORK/$name.log"; then
		log "$name: failed (log: $WORK/$name.log)"
		FAILED=1
	fi
}

target_kgate() {
	local kafka admin a c
	KGATE_DIR="$WORK/kgate"
	mkdir -p "$KGATE_DIR"
	kafka="$("$SCRIPT_DIR/bench-node.sh" addrs kafka)"
	admin="$("$SCRIPT_DIR/bench-node.sh" addrs admin)"
	for i in 1 2 3; do "$SCRIPT_DIR/bench-node.sh" start "$KGATE_DIR" "$i" >/dev/null; done
	for a in ${admin//,/ }; do
		local deadline=$((SECONDS + 60))
		until curl -fsS --max-time 2 "http://$a/v1/cluster" 2>/dev/null | grep -q '"leader_id":[0-9]'; do
			((SECONDS < deadline)) || die "the kgate cluster did not form"
			sleep 0.2
		done
	done
	local restart
	restart="$(printf '%q ' "$SCRIPT_DIR/bench-node.sh" start "$KGATE_DIR"){id}"
	for c in "${CLIENTS[@]}"; do
		((KILLS == 0)) || run_bench "kgate-$c" "$KGATE_DIR" "$KILLS" "$c" -label kgate-3node -brokers "$kafka" -admin "$admin" -restart "$restart"
	done
	for c in "${PAUSE_CLIENTS[@]}"; do
		[[ -z "$PAUSES" ]] || run_bench "kgate-pause-$c" "$KGATE_DIR" "$PAUSE_ROUNDS" "$c" -label kgate-3node -brokers "$kafka" -admin "$admin" \
			-restart "$restart" -fault pause -pause "$PAUSES"
	done
	"$SCRIPT_DIR/bench-node.sh" stop "$KGATE_DIR"
	KGATE_DIR=""
}

target_kafka() {
	local brokers c p
	KAFKA_DIR="$WORK/kafka"
	mkdir -p "$KAFKA_DIR"
	brokers="$("$SCRIPT_DIR/kafka-cluster.sh" addrs)"
	for i in 1 2 3; do "$SCRIPT_DIR/kafka-cluster.sh" start "$KAFKA_DIR" "$i" >/dev/null; done
	local deadline=$((SECONDS + 120))
	for i in 1 2 3; do
		until port_open "$((${KAFKA_CLUSTER_PORT_BASE:-32100} + 10 + i))" && grep -qF "Kafka Server started" "$KAFKA_DIR/node$i/broker.log"; do
			((SECONDS < deadline)) || die "the Kafka cluster did not start (logs: $KAFKA_DIR/node*/broker.log)"
			sleep 0.5
		done
	done
	local restart
	restart="$(printf '%q ' "$SCRIPT_DIR/kafka-cluster.sh" start "$KAFKA_DIR"){id}"
	for c in "${CLIENTS[@]}"; do
		((KAFKA_KILLS == 0)) || run_bench "kafka-$c" "$KAFKA_DIR" "$KAFKA_KILLS" "$c" -label kafka-3broker -brokers "$brokers" -admin "" -restart "$restart"
	done
	for c in "${PAUSE_CLIENTS[@]}"; do
		[[ -z "$PAUSES" ]] || run_bench "kafka-pause-$c" "$KAFKA_DIR" "$PAUSE_ROUNDS" "$c" -label kafka-3broker -brokers "$brokers" -admin "" \
			-restart "$restart" -fault pause -pause "$PAUSES"
	done
	"$SCRIPT_DIR/kafka-cluster.sh" stop "$KAFKA_DIR"
	KAFKA_DIR=""
}

for t in "${TARGETS[@]}"; do
	[[ "$t" == kgate || "$t" == kafka ]] || die "unknown target $t (want kgate or kafka)"
done
[[ "$KILLS" =~ ^[0-9]+$ && "$KAFKA_KILLS" =~ ^[0-9]+$ && "$PAUSE_ROUNDS" =~ ^[0-9]+$ ]] || die "FAILOVER_KILLS, FAILOVER_KAFKA_KILLS and FAILOVER_PAUSE_ROUNDS must be counts"
for c in "${CLIENTS[@]}" "${PAUSE_CLIENTS[@]}"; do
	case "$c" in
	franz-go | franz-go-tuned) ;;
	java) [[ -f "$JAR" ]] || die "$JAR missing: make deps" ;;
	librdkafka | librdkafka-tuned) "$PYTHON" -c 'import confluent_kafka' 2>/dev/null || die "$PYTHON has no confluent_kafka: make deps" ;;
	*) die "unknown client $c (want franz-go, franz-go-tuned, java, librdkafka or librdkafka-tuned)" ;;
	esac
done
mkdir -p bin
go build -o bin/kgate ./cmd/kgate
go build -o bin/kgate-bench ./cmd/kgate-bench
for t in "${TARGETS[@]}"; do
	"target_$t"
done
echo
bin/kgate-bench failover-summary "${RESULTS[@]}"
exit "$FAILED"
