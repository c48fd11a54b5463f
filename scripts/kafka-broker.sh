#!/usr/bin/env bash
# Run a local single-node Apache Kafka broker (KRaft, combined broker +
# controller) on loopback, for comparison benchmarks and for validating client
# test scripts against a reference implementation.
#
# Usage: scripts/kafka-broker.sh start|stop|status|fetch [DIR]
#
#   start   fetch the jars if needed, write the config, format fresh storage
#           and start the broker in the background; waits until it is ready
#           and prints the bootstrap address on stdout. A no-op (that still
#           prints the address) if the broker in DIR is already running.
#   stop    stop the broker in DIR (TERM, then KILL after a grace period) and
#           delete its data; broker.log is kept. A no-op if it is not running.
#   status  exit 0 and print the address if the broker in DIR is running.
#   fetch   only fetch the jars into the cache.
#
# DIR holds server.properties, log4j2.properties, broker.log, broker.pid and
# the data directory (default: $KAFKA_BROKER_DIR or ${TMPDIR:-/tmp}/kgate-kafka-broker).
# Every start begins with empty data.
#
# Environment:
#   KAFKA_CACHE_DIR        jar cache (default: <repo>/.cache/kafka)
#   KAFKA_BROKER_PORT      PLAINTEXT port (default 19092)
#   KAFKA_CONTROLLER_PORT  CONTROLLER port (default 19093)
#   KAFKA_HEAP_OPTS        JVM heap options (default "-Xms256m -Xmx1g")
#   KAFKA_START_TIMEOUT    seconds to wait for readiness (default 90)
#   KAFKA_FEATURES         feature levels to format the storage with, space-separated,
#                          e.g. "transaction.version=1" (default: Kafka's for a new cluster)
#   KAFKA_SASL_SSL_PORT    also a SASL_SSL listener on this port (SCRAM-SHA-512), with
#                          KAFKA_TLS_CERT and KAFKA_TLS_KEY (PEM certificate chain and
#                          PKCS#8 key) and KAFKA_SCRAM_USER "user:password" made at format
#   JAVA                   java binary (default: java on PATH)
#   MVN                    maven binary (default: mvn on PATH)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
readonly SCRIPT_DIR REPO_ROOT
readonly POM="$REPO_ROOT/test/kafka-broker/pom.xml"

readonly CACHE_DIR="${KAFKA_CACHE_DIR:-$REPO_ROOT/.cache/kafka}"
readonly HOST=127.0.0.1
readonly PORT="${KAFKA_BROKER_PORT:-19092}"
readonly CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
readonly HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx1g}"
readonly START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
readonly SASL_SSL_PORT="${KAFKA_SASL_SSL_PORT:-}"
read -r -a FEATURES <<<"${KAFKA_FEATURES:-}"
readonly FEATURES
readonly STOP_TIMEOUT=30
JAVA="${JAVA:-java}"
MVN="${MVN:-mvn}"

log() { echo "kafka-broker: $*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit 2
}

# port_open PORT: true if something accepts TCP connections on HOST:PORT.
port_open() {
	(exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

# jars_dir prints the cache directory for the current pom.xml. Keyed by the
# pom's hash so that editing the pom (e.g. a version bump) refetches.
jars_dir() {
	local h
	h="$(sha256sum "$POM" | cut -c1-12)"
	echo "$CACHE_DIR/jars-$h"
}

fetch() {
	local dir tmp
	dir="$(jars_dir)"
	if [[ -f "$dir/.complete" ]]; then
		echo "$dir"
		return
	fi
	command -v "$MVN" >/dev/null || die "maven ($MVN) not found"
	mkdir -p "$CACHE_DIR"
	# Keep everything in the cache out of git without touching .gitignore.
	[[ -f "$CACHE_DIR/.gitignore" ]] || echo '*' >"$CACHE_DIR/.gitignore"
	(
		# Serialise concurrent fetches.
		flock 9
		if [[ -f "$dir/.complete" ]]; then
			exit 0
		fi
		log "fetching Kafka jars into $dir (once)"
		tmp="$(mktemp -d "$CACHE_DIR/.fetch.XXXXXX")"
		trap 'rm -rf "$tmp" "$tmp.log"' EXIT
		local start=$SECONDS
		# Maven's output goes to a file, shown only on failure (even with -q
		# some Maven builds print stray colour codes).
		if ! "$MVN" -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies \
			-DincludeScope=runtime -DoutputDirectory="$tmp" >"$tmp.log" 2>&1; then
			sed 's/\x1b\[[0-9;]*m//g' "$tmp.log" >&2
			rm -f "$tmp.log"
			die "maven failed to fetch the Kafka jars"
		fi
		rm -f "$tmp.log"
		ls "$tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || die "kafka_2.13 jar missing after fetch"
		chmod 755 "$tmp"
		touch "$tmp/.complete"
		rm -rf "$dir"
		mv "$tmp" "$dir"
		log "fetched $(find "$dir" -name '*.jar' | wc -l) jars in $((SECONDS - start))s"
	) 9>"$CACHE_DIR/.fetch.lock"
	echo "$dir"
}

# broker_pid DIR: prints the pid of the running broker started from DIR, or
# fails. Checks the command line so a recycled pid is never mistaken for it.
broker_pid() {
	local pidfile="$1/broker.pid" pid
	[[ -f "$pidfile" ]] || return 1
	pid="$(<"$pidfile")"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	[[ -r "/proc/$pid/cmdline" ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "kafka.Kafka $1/server.properties" || return 1
	echo "$pid"
}

write_config() {
	local dir="$1" listeners="PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT"
	local advertised="PLAINTEXT://$HOST:$PORT" protocols="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
	if [[ -n "$SASL_SSL_PORT" ]]; then
		listeners+=",SASL_SSL://$HOST:$SASL_SSL_PORT"
		advertised+=",SASL_SSL://$HOST:$SASL_SSL_PORT"
		protocols+=",SASL_SSL:SASL_SSL"
	fi
	cat >"$dir/server.properties" <<EOF
# Generated by scripts/kafka-broker.sh; rewritten on every start.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CONTROLLER_PORT
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$dir/data
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
EOF
	if [[ -n "$SASL_SSL_PORT" ]]; then
		# One PEM file, key then chain, as Kafka's PEM keystore reads it.
		cat "${KAFKA_TLS_KEY:?KAFKA_TLS_KEY is needed with KAFKA_SASL_SSL_PORT}" \
			"${KAFKA_TLS_CERT:?KAFKA_TLS_CERT is needed with KAFKA_SASL_SSL_PORT}" >"$dir/keystore.pem"
		cat >>"$dir/server.properties" <<EOF
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location=$dir/keystore.pem
EOF
	fi
	cat >"$dir/log4j2.properties" <<'EOF'
# Generated by scripts/kafka-broker.sh.
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.kafkaapache.name = org.apache.kafka
logger.kafkaapache.level = INFO
EOF
}

# java_args JARS: prints (NUL-separated) the java command line up to the main
# class, shared by the storage tool and the broker.
java_args() {
	local -a heap
	read -r -a heap <<<"$HEAP_OPTS"
	printf '%s\0' "$JAVA" "${heap[@]}" -XX:+UseG1GC -Djava.awt.headless=true \
		-Dlog4j2.configurationFile="$DIR/log4j2.properties" -cp "$1/*"
}

start() {
	local jars pid cluster_id deadline
	local -a java
	if pid="$(broker_pid "$DIR")"; then
		log "already running (pid $pid)"
		echo "$HOST:$PORT"
		return
	fi
	command -v "$JAVA" >/dev/null || die "java ($JAVA) not found"
	for p in "$PORT" "$CONTROLLER_PORT" ${SASL_SSL_PORT:+"$SASL_SSL_PORT"}; do
		port_open "$p" && die "port $HOST:$p is already in use by another process"
	done
	jars="$(fetch)"
	mapfile -d '' java < <(java_args "$jars")

	mkdir -p "$DIR"
	rm -rf "$DIR/data" "$DIR/broker.pid"
	write_config "$DIR"

	# A fresh 16-byte cluster id in Kafka's base64url Uuid form.
	# Never starting with "-", as Kafka's own ids (Uuid.randomUuid): the
	# format tool's argument parser takes such a value for an option.
	cluster_id="-"
	while [[ "$cluster_id" == -* ]]; do
		cluster_id="$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
	done
	local -a features=()
	for f in "${FEATURES[@]}"; do
		features+=(--feature "$f")
	done
	if [[ -n "$SASL_SSL_PORT" ]]; then
		local user="${KAFKA_SCRAM_USER:?KAFKA_SCRAM_USER is needed with KAFKA_SASL_SSL_PORT}"
		features+=(--add-scram "SCRAM-SHA-512=[name=${user%%:*},password=${user#*:}]")
	fi
	"${java[@]}" kafka.tools.StorageTool format \
		--cluster-id "$cluster_id" --config "$DIR/server.properties" "${features[@]}" \
		>"$DIR/format.log" 2>&1 || {
		cat "$DIR/format.log" >&2
		die "formatting storage failed"
	}

	log "starting Kafka in $DIR (log: $DIR/broker.log)"
	# setsid: own session, so the broker outlives this shell and is not hit
	# by the caller's terminal signals; stopped only via `stop`.
	setsid nohup "${java[@]}" kafka.Kafka "$DIR/server.properties" \
		>"$DIR/broker.log" 2>&1 </dev/null 8>&- &
	pid=$!
	echo "$pid" >"$DIR/broker.pid"

	deadline=$((SECONDS + START_TIMEOUT))
	until port_open "$PORT" && grep -qF "Kafka Server started" "$DIR/broker.log"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 40 "$DIR/broker.log" >&2
			rm -f "$DIR/broker.pid"
			die "broker exited during startup"
		fi
		if ((SECONDS >= deadline)); then
			tail -n 40 "$DIR/broker.log" >&2
			stop_broker
			die "broker not ready after ${START_TIMEOUT}s"
		fi
		sleep 0.2
	done
	log "ready (pid $pid)"
	echo "$HOST:$PORT"
}

stop_broker() {
	local pid deadline
	if ! pid="$(broker_pid "$DIR")"; then
		rm -f "$DIR/broker.pid"
		return 1
	fi
	kill -TERM "$pid" 2>/dev/null || true
	deadline=$((SECONDS + STOP_TIMEOUT))
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			log "pid $pid still alive after ${STOP_TIMEOUT}s; killing"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		sleep 0.2
	done
	rm -f "$DIR/broker.pid"
}

stop() {
	if stop_broker; then
		log "stopped"
	else
		log "not running"
	fi
	[[ ! -d "$DIR" ]] || rm -rf "$DIR/data"
}

status() {
	local pid
	if pid="$(broker_pid "$DIR")"; then
		log "running (pid $pid)"
		echo "$HOST:$PORT"
	else
		log "not running"
		return 1
	fi
}

(($# >= 1 && $# <= 2)) || usage
DIR="${2:-${KAFKA_BROKER_DIR:-${TMPDIR:-/tmp}/kgate-kafka-broker}}"
[[ "$1" != start ]] || mkdir -p "$DIR"
# Absolute, so the pid check matches the command line whatever the cwd.
if [[ -d "$DIR" ]]; then
	DIR="$(cd "$DIR" && pwd)"
else
	DIR="$(realpath -m "$DIR")"
fi
readonly DIR

# Serialise start/stop on the same DIR (the broker does not inherit the lock).
if [[ "$1" == start || ( "$1" == stop && -d "$DIR" ) ]]; then
	exec 8>"$DIR/.lock"
	flock -w 180 8 || die "another start/stop on $DIR is still running"
fi

case "$1" in
start) start ;;
stop) stop ;;
status) status ;;
fetch) fetch >/dev/null ;;
*) usage ;;
esac
