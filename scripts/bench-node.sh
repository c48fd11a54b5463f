#!/usr/bin/env bash
# Start and stop the nodes of scripts/bench.sh's local kgate cluster.
#
# Usage: scripts/bench-node.sh start DIR ID
#        scripts/bench-node.sh stop DIR
#        scripts/bench-node.sh addrs kafka|admin
#
#   start  start node ID (1..BENCH_CLUSTER_NODES) in the background with
#          DIR/node<ID> as its data directory (kept across restarts: a
#          restart is a recovery) and DIR/node<ID>/kgate.log as its log;
#          print its pid. If the node's previous process is still running,
#          waits up to 10s for it to go away first. The node runs in its own
#          session, so it outlives this script and terminal signals; stop it
#          with `stop` (kgate-bench failover SIGKILLs it by pid and calls
#          `start` again).
#   stop   stop every node started from DIR: SIGTERM, SIGKILL after 30s.
#   addrs  print the comma-separated Kafka or admin addresses of the nodes.
#
# Every node of a cluster must use the same environment:
#   BENCH_CLUSTER_NODES      nodes in the cluster (default 3)
#   BENCH_CLUSTER_PORT_BASE  ports: Kafka BASE+10+ID, Raft BASE+20+ID,
#                            gossip BASE+30+ID, admin BASE+40+ID (default 29100)
#   KGATE_BIN                the kgate binary (default <repo>/bin/kgate)
#   KGATE_NODE_ARGS          extra `kgate serve` flags
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
readonly SCRIPT_DIR REPO_ROOT
readonly HOST=127.0.0.1
readonly NODES="${BENCH_CLUSTER_NODES:-3}"
readonly BASE="${BENCH_CLUSTER_PORT_BASE:-29100}"
readonly KGATE_BIN="${KGATE_BIN:-$REPO_ROOT/bin/kgate}"
readonly STOP_TIMEOUT=30

log() { echo "bench-node: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}
usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit 2
}

kafka_addr() { echo "$HOST:$((BASE + 10 + $1))"; }
raft_addr() { echo "$HOST:$((BASE + 20 + $1))"; }
gossip_addr() { echo "$HOST:$((BASE + 30 + $1))"; }
admin_addr() { echo "$HOST:$((BASE + 40 + $1))"; }

# node_pid DIR ID: prints the pid of node ID's running process, or fails. The
# command line is checked so that a recycled pid (or a zombie, which has
# none) is never taken for the node.
node_pid() {
	local pidfile="$1/node$2/pid" pid
	[[ -f "$pidfile" ]] || return 1
	pid="$(<"$pidfile")"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	[[ -r "/proc/$pid/cmdline" ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "--data-dir $1/node$2/data " || return 1
	echo "$pid"
}

start() {
	local dir="$1" id="$2" seeds="" i pid deadline
	if ! [[ "$id" =~ ^[0-9]+$ ]] || ((id < 1 || id > NODES)); then
		die "node id $id not in 1..$NODES"
	fi
	[[ -x "$KGATE_BIN" ]] || die "$KGATE_BIN not found; go build -o bin/kgate ./cmd/kgate"
	if pid="$(node_pid "$dir" "$id")"; then
		deadline=$((SECONDS + 10))
		while node_pid "$dir" "$id" >/dev/null; do
			((SECONDS < deadline)) || die "node $id (pid $pid) is still running"
			sleep 0.1
		done
	fi
	for i in $(seq 1 "$NODES"); do
		seeds+="${seeds:+,}$(gossip_addr "$i")"
	done
	mkdir -p "$dir/node$id/data"
	local -a extra=()
	read -r -a extra <<<"${KGATE_NODE_ARGS:-}"
	# setsid: own session, so Ctrl-C in the terminal does not reach it and
	# it outlives this script; 8>&- etc.: keep no descriptor of the caller
	# (kgate-bench reads this script's stdout to its end).
	setsid "$KGATE_BIN" serve --node-id "$id" --data-dir "$dir/node$id/data" \
		--kafka-addr "$(kafka_addr "$id")" \
		--raft-addr "$(raft_addr "$id")" \
		--gossip-addr "$(gossip_addr "$id")" \
		--admin-addr "$(admin_addr "$id")" \
		--bootstrap-expect "$NODES" --join "$seeds" "${extra[@]}" \
		>>"$dir/node$id/kgate.log" 2>&1 </dev/null 8>&- 9>&- &
	pid=$!
	echo "$pid" >"$dir/node$id/pid"
	# setsid execs in place (the background child leads no process group),
	# so $! is kgate itself; make sure of it.
	deadline=$((SECONDS + 5))
	until node_pid "$dir" "$id" >/dev/null; do
		kill -0 "$pid" 2>/dev/null || die "node $id exited at once; see $dir/node$id/kgate.log"
		((SECONDS < deadline)) || die "pid $pid is not node $id"
		sleep 0.05
	done
	echo "$pid"
}

stop() {
	local dir="$1" id pid deadline
	local -a pids=()
	for id in $(seq 1 "$NODES"); do
		if pid="$(node_pid "$dir" "$id")"; then
			kill -TERM "$pid" 2>/dev/null || true
			pids+=("$pid")
		fi
	done
	deadline=$((SECONDS + STOP_TIMEOUT))
	for pid in "${pids[@]}"; do
		while kill -0 "$pid" 2>/dev/null && [[ -n "$(tr -d '\0' <"/proc/$pid/cmdline" 2>/dev/null)" ]]; do
			if ((SECONDS >= deadline)); then
				log "pid $pid still running after ${STOP_TIMEOUT}s; killing"
				kill -KILL "$pid" 2>/dev/null || true
				break
			fi
			sleep 0.2
		done
	done
}

addrs() {
	local out="" i
	for i in $(seq 1 "$NODES"); do
		case "$1" in
		kafka) out+="${out:+,}$(kafka_addr "$i")" ;;
		admin) out+="${out:+,}$(admin_addr "$i")" ;;
		*) usage ;;
		esac
	done
	echo "$out"
}

(($# >= 2)) || usage
case "$1" in
start)
	(($# == 3)) || usage
	start "$(realpath -m "$2")" "$3"
	;;
stop)
	(($# == 2)) || usage
	stop "$(realpath -m "$2")"
	;;
addrs)
	(($# == 2)) || usage
	addrs "$2"
	;;
*) usage ;;
esac
