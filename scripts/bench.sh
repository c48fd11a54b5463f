#!/usr/bin/env bash
# Benchmark kgate with kgate-bench, section by section.
#
# Usage: scripts/bench.sh [kgate-bench flags...]
#
# Sections, run in this order (BENCH_SECTIONS selects them):
#
#   produce  Produce/consume throughput against Apache Kafka with the same
#            load tool and settings: starts a single kgate node on a
#            temporary data directory, runs kgate-bench against it (label
#            "kgate") and stops it; then starts a local Apache Kafka broker
#            with scripts/kafka-broker.sh, runs the same benchmark (label
#            "kafka") and stops it. The flags are passed to kgate-bench
#            (default: -partitions 1,8 -records 200000); see
#            `go run ./cmd/kgate-bench -h`; each result also gives the
#            server's and kgate-bench's CPU seconds per GB of records
#            (-server-pid), with its bytes written to disk per byte
#            produced and its peak RSS. Target "kgate-nofsync" runs the same
#            against a node started with --fsync=false (acknowledging before
#            the Raft log is synced, as Kafka does by default). After the
#            throughput runs, targets kgate and kafka also measure produce
#            latency at 1,000 records/s of 1 KiB (acks=all, one partition,
#            no linger; BENCH_LAT_RECORDS records). Target "kgate-sasl-ssl" runs the
#            same against a kgate node with TLS and SASL (SCRAM-SHA-512
#            clients, certificates from `kgate certs`), beside plaintext;
#            "kafka-sasl-ssl" the same against the Kafka broker's SASL_SSL
#            listener (KAFKA_SASL_SSL_PORT, default 19094).
#   groups   Consumer groups on a fresh single kgate node: kgate-bench
#            joinstorm (500 members join one group at once) and kgate-bench
#            groups (10,000 members in 1,000 groups heartbeating every 3s for
#            60s, with the node's CPU use).
#   cluster  A fresh three-node kgate cluster on loopback, started with
#            scripts/bench-node.sh: produce throughput against all three
#            (acks=all, 1 KiB records, 8 partitions), then kgate-bench
#            failover (BENCH_KILLS SIGKILLs of the leader under a live
#            consumer group, each node restarted on its data directory);
#            then (BENCH_CLUSTER_KAFKA=1) a fresh three-broker Apache Kafka
#            (KRaft, scripts/kafka-cluster.sh) and the same produce run
#            against it with replication factor 3.
#   txn      Transactional produce beside idempotent produce, 1 KiB records,
#            8 partitions, one producer, against one kgate node, three kgate
#            nodes (scripts/bench-node.sh) and a local Apache Kafka broker
#            (scripts/kafka-broker.sh), then that broker again formatted
#            with transaction.version=1 (the classic protocol, as kgate
#            offers; Kafka's default for a new cluster is 2), each started
#            fresh in turn: against each, kgate-bench streaming idempotent
#            records, then flushing and waiting after each 100
#            (-flush-records 100), then committing a transaction of each 100
#            (-txn-records 100); one table with the ratios (transactional
#            against idempotent on the same server, kgate against Kafka).
#
# Finally prints every result, and when the produce, groups or cluster
# section ran, the table of issue 16's figures: kgate beside Kafka with the
# ratios and goals (missing figures are "-"). Everything started is stopped on exit,
# including on Ctrl-C. Exits non-zero if any benchmark failed.
#
# Environment:
#   BENCH_SECTIONS        sections to run, in order (default "produce groups cluster txn")
#   BENCH_TARGETS         targets of the produce section, in order (default
#                         "kgate kgate-nofsync kgate-sasl-ssl kafka kafka-sasl-ssl")
#   BENCH_LAT_RECORDS     records of each produce latency run at 1,000 records/s
#                         (default 10000)
#   BENCH_KILLS           leader kills of the failover benchmark (default 20)
#   BENCH_CLUSTER_RECORDS records of the three-node produce run (default 200000)
#   BENCH_CLUSTER_KAFKA   1: the cluster section also runs the three-broker Kafka
#                         (default 1; 0 skips it)
#   BENCH_JOINSTORM_ARGS, BENCH_GROUPS_ARGS, BENCH_FAILOVER_ARGS
#                         extra flags for those kgate-bench subcommands
#   BENCH_TXN_RECORDS     records of each run of the txn section (default 100000)
#   BENCH_TXN_ARGS        extra kgate-bench flags for the txn section's runs
#                         (default "-warmup 20000")
#   BENCH_KGATE_PORT_BASE the single node's ports: Kafka BASE, Raft BASE+1,
#                         gossip BASE+2, admin BASE+3 (default 29092)
#   BENCH_CLUSTER_PORT_BASE  the cluster's ports (see scripts/bench-node.sh; default 29100)
#   KAFKA_BROKER_PORT, KAFKA_CONTROLLER_PORT, KAFKA_SASL_SSL_PORT  the Kafka broker's (see
#                         scripts/kafka-broker.sh)
#   KAFKA_CLUSTER_PORT_BASE  the three Kafka brokers' (see scripts/kafka-cluster.sh; default 32100)
#   KGATE_START_TIMEOUT   seconds to wait for kgate to be ready (default 60)
#   BENCH_IGGY_SERVER     real iggy-server version of the iggy section, unpacked
#                         from ../shared/iggy (IGGY_SHARED) by scripts/iggy-bin.sh
#                         (default 0.8.0; "double" forces the test double)
#   BENCH_IGGY_DIALECT    the double's dialect, current or legacy (default current)
#   BENCH_IGGY_RECORDS    records per run of the iggy section (default 200000)
#   BENCH_IGGY_DELAY      latency the double adds to every reply, e.g. 1ms for a
#                         remote Iggy (default 0)
#   BENCH_IGGY_PORT       the Iggy server's (or double's) TCP port (default 29090)
#   KEEP_WORK=1           keep the work directory (logs, results) on success

# Functions are called from traps and as "run_$target".
# shellcheck disable=SC2317
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
readonly SCRIPT_DIR REPO_ROOT
cd "$REPO_ROOT"

readonly HOST=127.0.0.1
readonly KGATE_PORT_BASE="${BENCH_KGATE_PORT_BASE:-29092}"
readonly KGATE_KAFKA_PORT="$KGATE_PORT_BASE"
readonly KGATE_RAFT_PORT=$((KGATE_PORT_BASE + 1))
readonly KGATE_GOSSIP_PORT=$((KGATE_PORT_BASE + 2))
readonly KGATE_ADMIN_PORT=$((KGATE_PORT_BASE + 3))
readonly KGATE_START_TIMEOUT="${KGATE_START_TIMEOUT:-60}"
readonly STOP_TIMEOUT=30
read -r -a SECTIONS <<<"${BENCH_SECTIONS:-produce groups cluster txn}"
read -r -a TARGETS <<<"${BENCH_TARGETS:-kgate kgate-nofsync kgate-sasl-ssl kafka kafka-sasl-ssl}"
read -r -a JOINSTORM_ARGS <<<"${BENCH_JOINSTORM_ARGS:-}"
read -r -a GROUPS_ARGS <<<"${BENCH_GROUPS_ARGS:-}"
read -r -a FAILOVER_ARGS <<<"${BENCH_FAILOVER_ARGS:-}"
read -r -a TXN_ARGS <<<"${BENCH_TXN_ARGS--warmup 20000}"
readonly SECTIONS TARGETS JOINSTORM_ARGS GROUPS_ARGS FAILOVER_ARGS TXN_ARGS
readonly TXN_RECORDS="${BENCH_TXN_RECORDS:-100000}"
readonly KILLS="${BENCH_KILLS:-20}"
readonly CLUSTER_RECORDS="${BENCH_CLUSTER_RECORDS:-200000}"
readonly CLUSTER_KAFKA="${BENCH_CLUSTER_KAFKA:-1}"
readonly LAT_RECORDS="${BENCH_LAT_RECORDS:-10000}"
readonly KAFKA_CLUSTER_BASE="${KAFKA_CLUSTER_PORT_BASE:-32100}"
export BENCH_CLUSTER_NODES=3

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

# ready ADMIN_ADDR: true once the node's /readyz answers 200.
ready() { curl -fsS -o /dev/null --max-time 2 "http://$1/readyz" 2>/dev/null; }

command -v curl >/dev/null || die "curl not found"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/kgate-bench.XXXXXX")"
readonly WORK
readonly CLUSTER_DIR="$WORK/cluster"
readonly KAFKA_CLUSTER_DIR="$WORK/kafka-cluster"
KGATE_PID=""
IGGY_PID=""
KAFKA_STARTED=""
CLUSTER_STARTED=""
KAFKA_CLUSTER_STARTED=""
LOADAVG=() # "when: /proc/loadavg", one per section
FAILED=0
RESULTS=() # "file|title", printed at the end in order

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

stop_cluster() {
	[[ -n "$CLUSTER_STARTED" ]] || return 0
	CLUSTER_STARTED=""
	"$SCRIPT_DIR/bench-node.sh" stop "$CLUSTER_DIR" || true
}

stop_kafka_cluster() {
	[[ -n "$KAFKA_CLUSTER_STARTED" ]] || return 0
	KAFKA_CLUSTER_STARTED=""
	"$SCRIPT_DIR/kafka-cluster.sh" stop "$KAFKA_CLUSTER_DIR" || true
}

stop_iggy() {
	[[ -n "$IGGY_PID" ]] || return 0
	kill -TERM "$IGGY_PID" 2>/dev/null || true
	wait "$IGGY_PID" 2>/dev/null || true
	IGGY_PID=""
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_kgate
	stop_cluster
	stop_kafka_cluster
	stop_iggy
	stop_kafka
	rm -rf "$WORK/kgate-data" "$WORK/kafka/data" "$CLUSTER_DIR"/node*/data "$WORK/iggy-data" "$KAFKA_CLUSTER_DIR"/node*/data
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

# bench NAME TITLE ARGS...: runs bin/kgate-bench ARGS, keeping its report in
# WORK/NAME.out (and its log in WORK/NAME.log) to print under TITLE.
bench() {
	local name="$1" title="$2"
	shift 2
	log "$title: kgate-bench $*"
	RESULTS+=("$name|$title")
	# tee ignores Ctrl-C: it must outlive kgate-bench, which still logs and
	# reports on its way out (and would die of SIGPIPE without a reader).
	if ! bin/kgate-bench "$@" 2>&1 >"$WORK/$name.out" | (
		trap '' INT
		exec tee "$WORK/$name.log"
	) >&2; then
		log "$title: benchmark failed (log: $WORK/$name.log)"
		FAILED=1
	fi
}

# start_kgate [FLAGS...]: starts a single kgate node on an empty data
# directory with the extra flags and waits until it is ready; sets KGATE_PID.
start_kgate() {
	local deadline p
	for p in "$KGATE_KAFKA_PORT" "$KGATE_RAFT_PORT" "$KGATE_GOSSIP_PORT" "$KGATE_ADMIN_PORT"; do
		port_open "$p" && die "port $HOST:$p is already in use"
	done
	rm -rf "$WORK/kgate-data"
	mkdir -p "$WORK/kgate-data"
	log "starting kgate (log: $WORK/kgate.log)"
	bin/kgate serve --data-dir "$WORK/kgate-data" \
		--kafka-addr "$HOST:$KGATE_KAFKA_PORT" \
		--raft-addr "$HOST:$KGATE_RAFT_PORT" \
		--gossip-addr "$HOST:$KGATE_GOSSIP_PORT" \
		--admin-addr "$HOST:$KGATE_ADMIN_PORT" "$@" \
		>>"$WORK/kgate.log" 2>&1 </dev/null &
	KGATE_PID=$!
	deadline=$((SECONDS + KGATE_START_TIMEOUT))
	until port_open "$KGATE_KAFKA_PORT" && ready "$HOST:$KGATE_ADMIN_PORT"; do
		if ! kill -0 "$KGATE_PID" 2>/dev/null; then
			KGATE_PID=""
			tail -n 30 "$WORK/kgate.log" >&2
			log "kgate exited during startup"
			return 1
		fi
		if ((SECONDS >= deadline)); then
			tail -n 30 "$WORK/kgate.log" >&2
			log "kgate not ready on $HOST:$KGATE_KAFKA_PORT after ${KGATE_START_TIMEOUT}s"
			stop_kgate
			return 1
		fi
		sleep 0.2
	done
}

run_kgate() {
	RESULTS+=("kgate|kgate")
	if ! start_kgate; then
		FAILED=1
		return
	fi
	log "benchmarking kgate at $HOST:$KGATE_KAFKA_PORT: ${BENCH_ARGS[*]}"
	if ! bin/kgate-bench -brokers "$HOST:$KGATE_KAFKA_PORT" -label kgate -server-pid "$KGATE_PID" "${BENCH_ARGS[@]}" \
		-json-file "$WORK/kgate.json" >"$WORK/kgate.out"; then
		log "kgate: benchmark failed"
		FAILED=1
	fi
	latency kgate-lat kgate "$HOST:$KGATE_KAFKA_PORT" "$KGATE_PID"
	stop_kgate
}

# run_kgate-nofsync: the produce benchmark against a node that acknowledges
# before its Raft log is synced (--fsync=false), as Kafka does by default.
run_kgate-nofsync() {
	RESULTS+=("kgate-nofsync|kgate --fsync=false")
	if ! start_kgate --fsync=false; then
		FAILED=1
		return
	fi
	log "benchmarking kgate --fsync=false at $HOST:$KGATE_KAFKA_PORT: ${BENCH_ARGS[*]}"
	if ! bin/kgate-bench -brokers "$HOST:$KGATE_KAFKA_PORT" -label kgate-nofsync -server-pid "$KGATE_PID" "${BENCH_ARGS[@]}" \
		-json-file "$WORK/kgate-nofsync.json" >"$WORK/kgate-nofsync.out"; then
		log "kgate-nofsync: benchmark failed"
		FAILED=1
	fi
	stop_kgate
}

# latency NAME LABEL BROKERS PID: produce latency at 1,000 records/s of
# 1 KiB (acks=all, one partition, each record sent at once) against a
# server already warm from the throughput run, into WORK/NAME.{out,json}.
latency() {
	local name="$1" label="$2" brokers="$3" pid="$4"
	RESULTS+=("$name|$label produce latency at 1,000 records/s of 1 KiB (acks=all, 1 partition, linger 0)")
	log "$label: produce latency at 1,000 records/s ($LAT_RECORDS records)"
	if ! bin/kgate-bench -brokers "$brokers" -label "$label" -server-pid "$pid" -partitions 1 -acks all \
		-record-bytes 1024 -records "$LAT_RECORDS" -rate 1000 -warmup 0 -linger 0 \
		-json-file "$WORK/$name.json" >"$WORK/$name.out"; then
		log "$name: benchmark failed"
		FAILED=1
	fi
}

# run_kgate-sasl-ssl: the produce benchmark through TLS and SASL, the
# clients authenticating with SCRAM-SHA-512 (created by a PLAIN admin).
run_kgate-sasl-ssl() {
	local certs="$WORK/certs"
	RESULTS+=("kgate-sasl-ssl|kgate SASL_SSL (SCRAM-SHA-512)")
	bin/kgate certs -dir "$certs" -names node-1 >/dev/null
	printf 'admin:bench-admin\n' >"$WORK/plain-users"
	if ! start_kgate --kafka-tls-cert "$certs/node-1.pem" --kafka-tls-key "$certs/node-1-key.pem" \
		--sasl-enabled-mechanisms PLAIN,SCRAM-SHA-512 --sasl-plain-users-file "$WORK/plain-users"; then
		FAILED=1
		return
	fi
	log "benchmarking kgate over SASL_SSL at $HOST:$KGATE_KAFKA_PORT: ${BENCH_ARGS[*]}"
	if ! bin/kgate-bench -brokers "$HOST:$KGATE_KAFKA_PORT" -label kgate-sasl-ssl -server-pid "$KGATE_PID" \
		-tls-ca "$certs/ca.pem" -sasl-mechanism SCRAM-SHA-512 -sasl-user bench -sasl-password bench-pw \
		-sasl-create-user-as admin:bench-admin "${BENCH_ARGS[@]}" >"$WORK/kgate-sasl-ssl.out"; then
		log "kgate-sasl-ssl: benchmark failed"
		FAILED=1
	fi
	stop_kgate
}

# run_kafka-sasl-ssl: the produce benchmark against the Kafka broker's
# SASL_SSL listener (TLS, SCRAM-SHA-512), the reference for kgate-sasl-ssl.
run_kafka-sasl-ssl() {
	local certs="$WORK/kafka-certs" port="${KAFKA_SASL_SSL_PORT:-19094}"
	RESULTS+=("kafka-sasl-ssl|kafka SASL_SSL (SCRAM-SHA-512)")
	bin/kgate certs -dir "$certs" -names broker >/dev/null
	KAFKA_STARTED=1
	if ! KAFKA_SASL_SSL_PORT="$port" KAFKA_TLS_CERT="$certs/broker.pem" KAFKA_TLS_KEY="$certs/broker-key.pem" \
		KAFKA_SCRAM_USER=bench:bench-pw scripts/kafka-broker.sh start "$WORK/kafka" >/dev/null; then
		log "the Kafka broker did not start"
		FAILED=1
		return
	fi
	log "benchmarking kafka over SASL_SSL at $HOST:$port: ${BENCH_ARGS[*]}"
	if ! bin/kgate-bench -brokers "$HOST:$port" -label kafka-sasl-ssl -tls-ca "$certs/ca.pem" -server-pid "$(<"$WORK/kafka/broker.pid")" \
		-sasl-mechanism SCRAM-SHA-512 -sasl-user bench -sasl-password bench-pw "${BENCH_ARGS[@]}" >"$WORK/kafka-sasl-ssl.out"; then
		log "kafka-sasl-ssl: benchmark failed"
		FAILED=1
	fi
	stop_kafka
}

run_kafka() {
	local addr
	RESULTS+=("kafka|kafka")
	KAFKA_STARTED=1
	if ! addr="$(KAFKA_SASL_SSL_PORT='' scripts/kafka-broker.sh start "$WORK/kafka")"; then
		log "the Kafka broker did not start"
		FAILED=1
		return
	fi
	log "benchmarking kafka at $addr: ${BENCH_ARGS[*]}"
	if ! bin/kgate-bench -brokers "$addr" -label kafka -server-pid "$(<"$WORK/kafka/broker.pid")" "${BENCH_ARGS[@]}" \
		-json-file "$WORK/kafka.json" >"$WORK/kafka.out"; then
		log "kafka: benchmark failed"
		FAILED=1
	fi
	latency kafka-lat kafka "$addr" "$(<"$WORK/kafka/broker.pid")"
	stop_kafka
}

section_produce() {
	for t in "${TARGETS[@]}"; do
		"run_$t"
	done
}

section_groups() {
	local brokers="$HOST:$KGATE_KAFKA_PORT"
	# Each simulated member has its own connection, as a real client: the
	# groups benchmark's 10,000 members need more than the default bound.
	if ! start_kgate --max-connections 20000; then
		RESULTS+=("joinstorm|kgate joinstorm" "groups|kgate groups")
		FAILED=1
		return
	fi
	bench joinstorm "kgate joinstorm" joinstorm -brokers "$brokers" -label kgate "${JOINSTORM_ARGS[@]}"
	bench groups "kgate groups" groups -brokers "$brokers" -label kgate -leader-pid "$KGATE_PID" "${GROUPS_ARGS[@]}"
	stop_kgate
}

# start_cluster: starts three kgate nodes on fresh data directories and
# waits until every one is ready and they agree on a leader.
start_cluster() {
	local i p a deadline kafka admin
	kafka="$("$SCRIPT_DIR/bench-node.sh" addrs kafka)"
	admin="$("$SCRIPT_DIR/bench-node.sh" addrs admin)"
	for a in ${kafka//,/ } ${admin//,/ }; do
		port_open "${a##*:}" && die "port $a is already in use"
	done
	rm -rf "$CLUSTER_DIR"
	mkdir -p "$CLUSTER_DIR"
	CLUSTER_STARTED=1
	log "starting a three-node kgate cluster (logs: $CLUSTER_DIR/node*/kgate.log)"
	for i in 1 2 3; do
		"$SCRIPT_DIR/bench-node.sh" start "$CLUSTER_DIR" "$i" >/dev/null || return 1
	done
	deadline=$((SECONDS + KGATE_START_TIMEOUT))
	for a in ${admin//,/ }; do
		until ready "$a" && curl -fsS --max-time 2 "http://$a/v1/cluster" | grep -q '"leader_id":[0-9]'; do
			for i in 1 2 3; do
				p="$(cat "$CLUSTER_DIR/node$i/pid")"
				if ! kill -0 "$p" 2>/dev/null; then
					tail -n 30 "$CLUSTER_DIR/node$i/kgate.log" >&2
					log "kgate node $i exited during startup"
					return 1
				fi
			done
			if ((SECONDS >= deadline)); then
				log "the cluster is not ready after ${KGATE_START_TIMEOUT}s ($a)"
				return 1
			fi
			sleep 0.2
		done
	done
}

section_cluster() {
	local kafka admin pids restart
	if ! start_cluster; then
		RESULTS+=("cluster-produce|kgate 3-node produce" "failover|kgate 3-node failover")
		stop_cluster
		FAILED=1
		return
	fi
	kafka="$("$SCRIPT_DIR/bench-node.sh" addrs kafka)"
	admin="$("$SCRIPT_DIR/bench-node.sh" addrs admin)"
	bench cluster-produce "kgate 3-node produce" -brokers "$kafka" -label kgate-3node \
		-partitions 8 -acks all -record-bytes 1024 -records "$CLUSTER_RECORDS" \
		-server-pid "$(cat "$CLUSTER_DIR/node1/pid"),$(cat "$CLUSTER_DIR/node2/pid"),$(cat "$CLUSTER_DIR/node3/pid")" \
		-json-file "$WORK/cluster-produce.json"
	pids="1=$(cat "$CLUSTER_DIR/node1/pid"),2=$(cat "$CLUSTER_DIR/node2/pid"),3=$(cat "$CLUSTER_DIR/node3/pid")"
	restart="$(printf '%q ' "$SCRIPT_DIR/bench-node.sh" start "$CLUSTER_DIR"){id}"
	bench failover "kgate 3-node failover" failover -brokers "$kafka" -admin "$admin" -label kgate-3node \
		-pids "$pids" -restart "$restart" -kills "$KILLS" "${FAILOVER_ARGS[@]}"
	stop_cluster
	[[ "$CLUSTER_KAFKA" == 1 ]] && kafka_cluster_produce
	return 0
}

# start_kafka_cluster: starts three Apache Kafka brokers (KRaft, each also
# a controller) on fresh data directories and waits until each is serving.
start_kafka_cluster() {
	local i port deadline
	for i in 1 2 3; do
		for port in $((KAFKA_CLUSTER_BASE + 10 + i)) $((KAFKA_CLUSTER_BASE + 20 + i)); do
			port_open "$port" && die "port $HOST:$port is already in use"
		done
	done
	rm -rf "$KAFKA_CLUSTER_DIR"
	mkdir -p "$KAFKA_CLUSTER_DIR"
	KAFKA_CLUSTER_STARTED=1
	log "starting a three-broker Kafka cluster (logs: $KAFKA_CLUSTER_DIR/node*/broker.log)"
	for i in 1 2 3; do
		"$SCRIPT_DIR/kafka-cluster.sh" start "$KAFKA_CLUSTER_DIR" "$i" >/dev/null || return 1
	done
	deadline=$((SECONDS + 120))
	for i in 1 2 3; do
		until port_open "$((KAFKA_CLUSTER_BASE + 10 + i))" && grep -qF "Kafka Server started" "$KAFKA_CLUSTER_DIR/node$i/broker.log"; do
			if ! kill -0 "$(<"$KAFKA_CLUSTER_DIR/node$i/pid")" 2>/dev/null; then
				tail -n 30 "$KAFKA_CLUSTER_DIR/node$i/broker.log" >&2
				log "Kafka broker $i exited during startup"
				return 1
			fi
			if ((SECONDS >= deadline)); then
				log "the Kafka cluster is not ready after 120s (broker $i)"
				return 1
			fi
			sleep 0.5
		done
	done
}

# kafka_cluster_produce: the cluster section's produce run against three
# Kafka brokers, topics of replication factor 3 (min.insync.replicas 2,
# acks=all waits for every in-sync replica).
kafka_cluster_produce() {
	if ! start_kafka_cluster; then
		RESULTS+=("kafka-3broker-produce|kafka 3-broker produce (replication factor 3)")
		stop_kafka_cluster
		FAILED=1
		return
	fi
	bench kafka-3broker-produce "kafka 3-broker produce (replication factor 3)" \
		-brokers "$("$SCRIPT_DIR/kafka-cluster.sh" addrs)" -label kafka-3broker -replication-factor 3 \
		-partitions 8 -acks all -record-bytes 1024 -records "$CLUSTER_RECORDS" \
		-server-pid "$(<"$KAFKA_CLUSTER_DIR/node1/pid"),$(<"$KAFKA_CLUSTER_DIR/node2/pid"),$(<"$KAFKA_CLUSTER_DIR/node3/pid")" \
		-json-file "$WORK/kafka-3broker-produce.json"
	stop_kafka_cluster
}

# txn_runs TARGET BROKERS LABEL: the txn section's three runs against one
# server, into WORK/txn-TARGET-{idem,flush,txn}.json.
txn_runs() {
	local target="$1" brokers="$2" label="$3"
	local -a args=(-brokers "$brokers" -partitions 8 -acks all -record-bytes 1024 -records "$TXN_RECORDS" "${TXN_ARGS[@]}")
	kbench "txn-$target-idem" -label "$label" "${args[@]}"
	kbench "txn-$target-flush" -label "$label" "${args[@]}" -flush-records 100
	kbench "txn-$target-txn" -label "$label" "${args[@]}" -txn-records 100
}

section_txn() {
	local addr
	RESULTS+=("txn-table|Transactional produce (transactions of 100 records of 1 KiB, commit each) beside idempotent produce, same run")
	if start_kgate; then
		txn_runs one "$HOST:$KGATE_KAFKA_PORT" kgate
		stop_kgate
	else
		FAILED=1
	fi
	if start_cluster; then
		txn_runs three "$("$SCRIPT_DIR/bench-node.sh" addrs kafka)" kgate-3node
	else
		FAILED=1
	fi
	stop_cluster
	KAFKA_STARTED=1
	# No SASL_SSL listener even when KAFKA_SASL_SSL_PORT is set (for the
	# produce section's kafka-sasl-ssl target), as in run_kafka.
	if addr="$(KAFKA_SASL_SSL_PORT='' scripts/kafka-broker.sh start "$WORK/kafka")"; then
		txn_runs kafka "$addr" kafka
	else
		log "the Kafka broker did not start"
		FAILED=1
	fi
	stop_kafka
	KAFKA_STARTED=1
	if addr="$(KAFKA_SASL_SSL_PORT='' KAFKA_FEATURES=transaction.version=1 scripts/kafka-broker.sh start "$WORK/kafka")"; then
		txn_runs kafka-tv1 "$addr" kafka-tv1
	else
		log "the Kafka broker (transaction.version=1) did not start"
		FAILED=1
	fi
	stop_kafka
	txn_table >"$WORK/txn-table.out"
}

# txn_table prints the txn section's runs: records/s of each mode per
# server, the transactions' rate and commit latency (Flush plus
# EndTransaction), and the ratios.
txn_table() {
	local t name idem flush txn kidem kflush ktxn ktxn1
	kidem="$(kg txn-kafka-idem 8 produce_records_per_sec)"
	kflush="$(kg txn-kafka-flush 8 produce_records_per_sec)"
	ktxn="$(kg txn-kafka-txn 8 produce_records_per_sec)"
	ktxn1="$(kg txn-kafka-tv1-txn 8 produce_records_per_sec)"
	echo "| server | idempotent rec/s | idempotent, flush each 100, rec/s | transactional rec/s (MiB/s) | transactions/s | commit p50 / p99 ms | txn / flush-100 | txn / idempotent | vs Kafka: idempotent, flush-100, txn | txn vs Kafka, transaction.version=1 |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	for t in one three kafka kafka-tv1; do
		case "$t" in
		one) name="kgate, one node" ;;
		three) name="kgate, three nodes" ;;
		kafka) name="Apache Kafka, one broker" ;;
		kafka-tv1) name="Apache Kafka, one broker, transaction.version=1" ;;
		esac
		idem="$(kg "txn-$t-idem" 8 produce_records_per_sec)"
		flush="$(kg "txn-$t-flush" 8 produce_records_per_sec)"
		txn="$(kg "txn-$t-txn" 8 produce_records_per_sec)"
		printf '| %s | %s | %s | %s (%s) | %s | %s / %s | %s | %s | %s | %s |\n' "$name" \
			"$(num "$idem")" "$(num "$flush")" "$(num "$txn")" "$(num1 "$(kg "txn-$t-txn" 8 produce_mib_per_sec)")" \
			"$(num "$(kg "txn-$t-txn" 8 batches_per_sec)")" \
			"$(kg "txn-$t-txn" 8 commit_latency_p50_ms)" "$(kg "txn-$t-txn" 8 commit_latency_p99_ms)" \
			"$(ratio "$txn" "$flush")" "$(ratio "$txn" "$idem")" \
			"$([[ $t == kafka* ]] && echo "-" || echo "$(ratio "$idem" "$kidem"), $(ratio "$flush" "$kflush"), $(ratio "$txn" "$ktxn")")" \
			"$([[ $t == kafka-tv1 ]] && echo "-" || ratio "$txn" "$ktxn1")"
	done
	for t in one three kafka kafka-tv1; do
		for m in idem flush txn; do
			[[ -s "$WORK/txn-$t-$m.json" ]] || echo "txn-$t-$m: no result"
			[[ -s "$WORK/txn-$t-$m.json" ]] && jq -r '.[] | select(.ok | not) | "\(.label) \(.topic): FAIL: \(.error)"' "$WORK/txn-$t-$m.json"
		done
	done
	return 0
}

# The iggy section runs against a real iggy-server when ../shared/iggy has
# one (BENCH_IGGY_SERVER), and then also runs Iggy's own iggy-bench against
# the same server for the native figures (its 0.8.0 client speaks the
# legacy dialect, so only against a 0.7/0.8 server); otherwise against the
# test double, as before.
readonly IGGY_ADDR="$HOST:${BENCH_IGGY_PORT:-29090}"
IGGY_REAL=""
IGGY_BENCH=""
IGGY_VERSION="${BENCH_IGGY_SERVER:-0.8.0}"
if [[ $IGGY_VERSION != double ]] && IGGY_REAL="$(scripts/iggy-bin.sh "iggy-server-$IGGY_VERSION" 2>/dev/null)"; then
	case "$IGGY_VERSION" in
	0.7.* | 0.8.*) IGGY_BENCH="$(scripts/iggy-bin.sh iggy-bench-0.8.0 2>/dev/null)" || IGGY_BENCH="" ;;
	esac
else
	IGGY_REAL=""
fi
readonly IGGY_REAL IGGY_BENCH IGGY_VERSION

# start_iggy: starts the real iggy-server (fresh data directory) or the
# Iggy test double on $IGGY_ADDR; sets IGGY_PID.
start_iggy() {
	local deadline
	port_open "${IGGY_ADDR##*:}" && die "port $IGGY_ADDR is already in use"
	if [[ -n "$IGGY_REAL" ]]; then
		log "starting iggy-server $IGGY_VERSION on $IGGY_ADDR (data: $WORK/iggy-data)"
		rm -rf "$WORK/iggy-data"
		(cd "$WORK" && IGGY_ROOT_USERNAME=iggy IGGY_ROOT_PASSWORD=iggy IGGY_TCP_ADDRESS="$IGGY_ADDR" \
			IGGY_SYSTEM_PATH="$WORK/iggy-data" IGGY_HTTP_ENABLED=false IGGY_QUIC_ENABLED=false \
			IGGY_WEBSOCKET_ENABLED=false exec "$IGGY_REAL") >>"$WORK/iggy.log" 2>&1 </dev/null &
	else
		log "starting the Iggy test double (${BENCH_IGGY_DIALECT:-current}) on $IGGY_ADDR"
		bin/iggy-double -addr "$IGGY_ADDR" -dialect "${BENCH_IGGY_DIALECT:-current}" -delay "${BENCH_IGGY_DELAY:-0}" \
			>>"$WORK/iggy.log" 2>&1 </dev/null &
	fi
	IGGY_PID=$!
	deadline=$((SECONDS + 30))
	until port_open "${IGGY_ADDR##*:}"; do
		((SECONDS < deadline)) && kill -0 "$IGGY_PID" 2>/dev/null || {
			tail -n 20 "$WORK/iggy.log" >&2
			log "Iggy did not start"
			return 1
		}
		sleep 0.1
	done
	sleep 1 # a real server listens a moment before it takes logins
}

# native NAME ARGS...: runs iggy-bench ARGS against $IGGY_ADDR into
# WORK/NAME.native.
native() {
	local name="$1"
	shift
	log "iggy-bench $*"
	if ! timeout 300 "$IGGY_BENCH" "$@" tcp --server-address "$IGGY_ADDR" >"$WORK/$name.native" 2>&1; then
		tail -n 20 "$WORK/$name.native" >&2
		log "iggy-bench $name failed"
		FAILED=1
	fi
}

# kgate-bench in JSON for the comparison table.
kbench() {
	local name="$1"
	shift
	log "kgate-bench $*"
	if ! bin/kgate-bench "$@" -json >"$WORK/$name.json" 2>"$WORK/$name.log"; then
		tail -n 20 "$WORK/$name.log" >&2
		log "kgate-bench $name failed"
		FAILED=1
	fi
}

section_iggy() {
	local records="${BENCH_IGGY_RECORDS:-200000}" kafka mb
	mb=$((records * 1024 / 1000000))
	if ! start_iggy; then
		RESULTS+=("iggy-1node|kgate --backend iggy, one node" "iggy-3node|kgate --backend iggy, three nodes")
		FAILED=1
		return
	fi
	if [[ -n "$IGGY_BENCH" ]]; then
		# Iggy's own client: pinned producers (one stream each, batches of
		# 1,000), pinned consumers, and one producer at 1,000 messages/s
		# sending each message alone. A pinned consumer reads what the
		# producer run before it left (each producer run starts the bench
		# streams afresh), so each consumer run follows its producer run.
		native pp8 -m 1024 -P 1000 -T "${mb}MB" pinned-producer -p 8
		native pc8 -m 1024 -P 1000 -T "${mb}MB" pinned-consumer -c 8
		native pp1 -m 1024 -P 1000 -T "${mb}MB" pinned-producer -p 1
		native pc1 -m 1024 -P 1000 -T "${mb}MB" pinned-consumer -c 1
		native lat -m 1024 -P 1 -b 10000 -r 1024KB pinned-producer -p 1
	fi
	# kgate reads every flag from KGATE_* variables too.
	export KGATE_BACKEND=iggy KGATE_IGGY_ADDR="$IGGY_ADDR"
	RESULTS+=("iggy-1node|kgate --backend iggy, one node")
	if start_kgate; then
		log "benchmarking kgate --backend iggy at $HOST:$KGATE_KAFKA_PORT"
		kbench one -brokers "$HOST:$KGATE_KAFKA_PORT" -label kgate-iggy -partitions 1,8 \
			-acks all -record-bytes 1024 -records "$records"
		# -linger 0: iggy-bench sends each message at once; franz-go's
		# default 10 ms linger would be most of what this measures.
		kbench lat -brokers "$HOST:$KGATE_KAFKA_PORT" -label kgate-iggy -partitions 1 \
			-acks all -record-bytes 1024 -records 10000 -rate 1000 -warmup 0 -linger 0
		stop_kgate
	else
		FAILED=1
	fi
	if start_cluster; then
		kafka="$("$SCRIPT_DIR/bench-node.sh" addrs kafka)"
		kbench three -brokers "$kafka" -label kgate-iggy-3node \
			-partitions 8 -acks all -record-bytes 1024 -records "$records"
	else
		FAILED=1
	fi
	RESULTS+=("iggy-3node|kgate --backend iggy, three nodes")
	stop_cluster
	unset KGATE_BACKEND KGATE_IGGY_ADDR
	stop_iggy
	iggy_table >"$WORK/iggy-table.out"
	RESULTS+=("iggy-table|Iggy backend against $([[ -n $IGGY_REAL ]] && echo "iggy-server $IGGY_VERSION" || echo "the Iggy test double"), same machine, same run")
	for n in one three; do
		[[ -s "$WORK/$n.json" ]] || continue
		jq -r '.[] | "\(.label)  partitions \(.partitions)  produce \(.produce_records_per_sec|floor) rec/s (\(.produce_mib_per_sec*10|floor/10) MiB/s, p50 \(.produce_latency_p50_ms) ms, p99 \(.produce_latency_p99_ms) ms)  consume \(.consume_records_per_sec|floor) rec/s  \(if .ok then "ok" else "FAIL: \(.error)" end)"' \
			"$WORK/$n.json" >>"$WORK/iggy-$([[ $n == one ]] && echo 1node || echo 3node).out"
	done
}

# kv FILE PARTITIONS FIELD: as kg, but empty (not "null") when the field
# is absent (kgate-bench omits the CPU, disk and RSS figures it could not
# measure).
kv() { [[ -s "$WORK/$1.json" ]] && jq -r ".[] | select(.partitions == $2 and .ok) | .$3 // empty" "$WORK/$1.json" || echo ""; }
# kg FILE PARTITIONS FIELD: a field of a kgate-bench JSON result.
kg() { [[ -s "$WORK/$1.json" ]] && jq -r ".[] | select(.partitions == $2) | .$3" "$WORK/$1.json" || echo ""; }
# nat NAME: messages/s of an iggy-bench run; natp99: its p99 latency (ms).
nat() { [[ -s "$WORK/$1.native" ]] && grep -o 'Total throughput: [0-9.]* MB/s, [0-9]* messages/s' "$WORK/$1.native" | tail -1 | awk '{print $5}' || echo ""; }
natp99() { [[ -s "$WORK/$1.native" ]] && grep 'Results: ' "$WORK/$1.native" | grep -o ' p99 latency: [0-9.]* ms' | tail -1 | awk '{print $3}' || echo ""; }
ratio() { [[ -n "$1" && -n "$2" ]] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }' || echo "-"; }
num() { [[ -n "$1" ]] && awk -v a="$1" 'BEGIN { printf "%.0f", a }' || echo "-"; }
num1() { [[ -n "$1" ]] && awk -v a="$1" 'BEGIN { printf "%.1f", a }' || echo "-"; }

# iggy_table prints the comparison: records (messages) of 1,024 bytes per
# second, kgate (one node, acks=all, idempotent) against iggy-bench.
iggy_table() {
	local p kind native kgate
	echo "| figure | iggy-bench (native) | kgate | kgate / native |"
	echo "|---|---|---|---|"
	for p in 1 8; do
		native="$(nat "pp$p")" kgate="$(kg one "$p" produce_records_per_sec)"
		echo "| produce, $p partition(s), records/s | $(num "$native") | $(num "$kgate") | $(ratio "$kgate" "$native") |"
	done
	for p in 1 8; do
		native="$(nat "pc$p")" kgate="$(kg one "$p" consume_records_per_sec)"
		echo "| consume, $p partition(s), records/s | $(num "$native") | $(num "$kgate") | $(ratio "$kgate" "$native") |"
	done
	for kind in produce consume; do
		native="$(kg one 8 "${kind}_records_per_sec")" kgate="$(kg three 8 "${kind}_records_per_sec")"
		echo "| three kgate nodes vs one, $kind, 8 partitions, records/s | one node $(num "$native") | three nodes $(num "$kgate") | $(ratio "$kgate" "$native") |"
	done
	native="$(natp99 lat)" kgate="$(kg lat 1 produce_latency_p99_ms)"
	echo "| p99 produce latency at 1,000 records/s, ms | $native | $kgate | +$([[ -n $native && -n $kgate ]] && awk -v a="$kgate" -v b="$native" 'BEGIN { printf "%.2f ms", a - b }' || echo "-") |"
}

# heartbeat_p99: the groups benchmark's heartbeat p99 (ms), from its report.
heartbeat_p99() {
	[[ -s "$WORK/groups.out" ]] && grep -q '^result  *ok' "$WORK/groups.out" &&
		awk '/^heartbeat p50\/p99\/max ms/ { split($0, a, " / "); print a[2] }' "$WORK/groups.out" || echo ""
}

# group_load: "N members in M groups" of the groups benchmark's report.
group_load() {
	[[ -s "$WORK/groups.out" ]] &&
		awk '/^members \/ groups \/ connections/ { split($0, a, " / "); n = split(a[3], m, " "); printf "%s members in %s groups", m[n], a[4] }' "$WORK/groups.out" ||
		echo "10000 members in 1000 groups"
}

# goal VALUE OP LIMIT: "yes" when VALUE OP LIMIT holds (OP one of >=, <=,
# <), "no" when not, "-" without a value.
goal() {
	[[ -n "$1" && "$1" != "-" ]] || {
		echo "-"
		return
	}
	awk -v a="${1%x}" -v op="$2" -v b="$3" 'BEGIN {
		ok = (op == ">=") ? a >= b : (op == "<=") ? a <= b : a < b
		print ok ? "yes" : "no"
	}'
}

# dec2 VALUE: two decimals, or "-".
dec2() { [[ -n "$1" ]] && awk -v a="$1" 'BEGIN { printf "%.2f", a }' || echo "-"; }

# issue16_table prints issue 16's figures from this run: kgate beside
# Apache Kafka (one broker; three brokers with replication factor 3), the
# ratio, the goal and whether it is met. Throughputs are MiB/s of 1 KiB
# record values (acks=all, idempotent, 8 partitions).
issue16_table() {
	local k1 kn ka k3 ka3 r
	k1="$(kv kgate 8 produce_mib_per_sec)" kn="$(kv kgate-nofsync 8 produce_mib_per_sec)"
	ka="$(kv kafka 8 produce_mib_per_sec)" k3="$(kv cluster-produce 8 produce_mib_per_sec)"
	ka3="$(kv kafka-3broker-produce 8 produce_mib_per_sec)"
	echo "run: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (modified)'); load average (1/5/15 min) at each section's start: $(printf '%s; ' "${LOADAVG[@]}" | sed 's/; $//')"
	echo
	echo "| figure | kgate | Kafka | ratio | goal | met? |"
	echo "|---|---|---|---|---|---|"
	r="$(ratio "$k1" "$ka")"
	echo "| produce MiB/s, 1 node, --fsync=true (Kafka: 1 broker, its default, no fsync) | $(num1 "$k1") | $(num1 "$ka") | $r | >= 1.0x | $(goal "$r" ">=" 1.0) |"
	r="$(ratio "$kn" "$ka")"
	echo "| produce MiB/s, 1 node, --fsync=false | $(num1 "$kn") | $(num1 "$ka") | $r | >= 1.5x | $(goal "$r" ">=" 1.5) |"
	r="$(ratio "$k3" "$k1")"
	echo "| produce MiB/s, 3 nodes against 1 node (kgate's, --fsync=true) | $(num1 "$k3") | 1 node: $(num1 "$k1") | $r | >= 0.8x | $(goal "$r" ">=" 0.8) |"
	r="$(ratio "$k3" "$ka3")"
	echo "| produce MiB/s, 3 nodes (Kafka: 3 brokers, replication factor 3) | $(num1 "$k3") | $(num1 "$ka3") | $r | >= 1.0x | $(goal "$r" ">=" 1.0) |"
	k1="$(kv kgate 8 consume_mib_per_sec)" ka="$(kv kafka 8 consume_mib_per_sec)"
	r="$(ratio "$k1" "$ka")"
	echo "| consume MiB/s, 1 node (Kafka: 1 broker) | $(num1 "$k1") | $(num1 "$ka") | $r | >= 1.0x | $(goal "$r" ">=" 1.0) |"
	k3="$(kv cluster-produce 8 consume_mib_per_sec)" ka3="$(kv kafka-3broker-produce 8 consume_mib_per_sec)"
	r="$(ratio "$k3" "$ka3")"
	echo "| consume MiB/s, 3 nodes (Kafka: 3 brokers, replication factor 3) | $(num1 "$k3") | $(num1 "$ka3") | $r | >= 1.0x | $(goal "$r" ">=" 1.0) |"
	k1="$(kv kgate-lat 1 produce_latency_p99_ms)" ka="$(kv kafka-lat 1 produce_latency_p99_ms)"
	echo "| produce latency p99 ms, 1 node, 1,000 records/s of 1 KiB, acks=all, --fsync=true | $(dec2 "$k1") | $(dec2 "$ka") | $(ratio "$k1" "$ka") | <= 5 ms | $(goal "$k1" "<=" 5) |"
	k1="$(heartbeat_p99)"
	echo "| Heartbeat p99 ms, $(group_load) (the groups section) | $(dec2 "$k1") | - | - | < 5 ms | $(goal "$k1" "<" 5) |"
	k3="$(kv cluster-produce 8 server_peak_rss_mib)" ka3="$(kv kafka-3broker-produce 8 server_peak_rss_mib)"
	echo "| peak RSS (VmHWM) MiB of a node under the 3-node load, highest node (Kafka: -Xmx768m) | $(num "$k3") | $(num "$ka3") | $(ratio "$k3" "$ka3") | <= 1024 MiB | $(goal "$k3" "<=" 1024) |"
	k1="$(kv kgate 8 server_write_bytes_per_byte_produce)" ka="$(kv kafka 8 server_write_bytes_per_byte_produce)"
	echo "| bytes written to disk per byte produced, 1 node | $(dec2 "$k1") | $(dec2 "$ka") | $(ratio "$k1" "$ka") | <= 1.2 | $(goal "$k1" "<=" 1.2) |"
	k3="$(kv cluster-produce 8 server_write_bytes_per_byte_produce)" ka3="$(kv kafka-3broker-produce 8 server_write_bytes_per_byte_produce)"
	echo "| bytes written to disk per byte produced, 3 nodes, highest node | $(dec2 "$k3") | $(dec2 "$ka3") | $(ratio "$k3" "$ka3") | <= 1.2 | $(goal "$k3" "<=" 1.2) |"
}

need_kgate=""
need_iggy=""
for s in "${SECTIONS[@]}"; do
	case "$s" in
	produce)
		for t in "${TARGETS[@]}"; do
			case "$t" in
			kgate | kgate-nofsync | kgate-sasl-ssl | kafka-sasl-ssl) need_kgate=1 ;; # kafka-sasl-ssl: kgate certs
			kafka) ;;
			*) die "unknown target $t (want kgate, kgate-nofsync, kgate-sasl-ssl, kafka or kafka-sasl-ssl)" ;;
			esac
		done
		;;
	groups | cluster | txn) need_kgate=1 ;;
	iggy) need_kgate=1 need_iggy=1 ;;
	*) die "unknown section $s (want produce, groups, cluster, txn or iggy)" ;;
	esac
done
mkdir -p bin
if [[ -n "$need_kgate" ]]; then
	log "building bin/kgate"
	go build -o bin/kgate ./cmd/kgate
fi
if [[ -n "$need_iggy" && -z "$IGGY_REAL" ]]; then
	log "building bin/iggy-double"
	go build -o bin/iggy-double ./test/iggydouble
fi
log "building bin/kgate-bench"
go build -o bin/kgate-bench ./cmd/kgate-bench

issue16=""
for s in "${SECTIONS[@]}"; do
	LOADAVG+=("$s $(cut -d' ' -f1-3 /proc/loadavg)")
	"section_$s"
	case "$s" in produce | groups | cluster) issue16=1 ;; esac
done
if [[ -n "$issue16" ]]; then
	LOADAVG+=("end $(cut -d' ' -f1-3 /proc/loadavg)")
	issue16_table >"$WORK/issue16.out"
	RESULTS+=("issue16|issue 16: kgate beside Apache Kafka, same machine, same run")
fi

for r in "${RESULTS[@]}"; do
	echo
	echo "== ${r#*|}"
	f="$WORK/${r%%|*}.out"
	if [[ -s "$f" ]]; then
		cat "$f"
	else
		echo "(no results)"
	fi
done
exit "$FAILED"
