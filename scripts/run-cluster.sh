#!/usr/bin/env bash
# Starts a local three-node kgate cluster on loopback in the foreground.
# Ctrl-C (or SIGTERM) stops all nodes. Data lives in ./kgate-data/node{1,2,3}
# and survives restarts; each node's pid is in ./kgate-data/nodeN/kgate.pid.
# A node that dies is reported and not restarted; the others keep running
# until Ctrl-C or until none is left. KGATE_NODES=1 starts a single node.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${KGATE_NODES:-3}
data=${KGATE_DATA:-./kgate-data}
bin=./bin/kgate
declare -A node_of # pid -> node number
pids=()

stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping kgate..."
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -f "$data"/node*/kgate.pid
  exit 0
}
trap stop INT TERM EXIT

seeds=""
for i in $(seq 1 "$nodes"); do
  [ -n "$seeds" ] && seeds+=","
  seeds+="127.0.0.1:$((9290 + i))"
done
bootstrap=""
for i in $(seq 1 "$nodes"); do
  kafka="127.0.0.1:$((9090 + 2 * i))"          # 9092, 9094, 9096
  [ -n "$bootstrap" ] && bootstrap+=","
  bootstrap+="$kafka"
  mkdir -p "$data/node$i"
  "$bin" serve --node-id "$i" --data-dir "$data/node$i" \
    --kafka-addr "$kafka" \
    --raft-addr "127.0.0.1:$((9190 + i))" \
    --gossip-addr "127.0.0.1:$((9290 + i))" \
    --admin-addr "127.0.0.1:$((9390 + i))" \
    --bootstrap-expect "$nodes" \
    --join "$seeds" \
    >"$data/node$i/kgate.log" 2>&1 &
  pids+=("$!")
  node_of[$!]=$i
  echo "$!" >"$data/node$i/kgate.pid"
done

echo "kgate: $nodes node(s) starting; logs in $data/node*/kgate.log"
for i in $(seq 1 "$nodes"); do
  echo "  node $i: kafka 127.0.0.1:$((9090 + 2 * i))  admin http://127.0.0.1:$((9390 + i))/v1/cluster  pid ${pids[$((i - 1))]}"
done
for _ in $(seq 1 100); do
  if curl -fs "http://127.0.0.1:9391/readyz" >/dev/null 2>&1; then break; fi
  sleep 0.2
done
echo "bootstrap servers: $bootstrap"
echo "Ctrl-C stops the cluster."
left=$nodes
while [ "$left" -gt 0 ]; do
  status=0
  wait -n -p died || status=$?
  [ -n "${died:-}" ] || continue # a signal interrupted wait; the trap handles it
  left=$((left - 1))
  echo "kgate node ${node_of[$died]} (pid $died) exited with status $status; see $data/node${node_of[$died]}/kgate.log; $left node(s) still running"
  rm -f "$data/node${node_of[$died]}/kgate.pid"
  died=""
done
echo "no kgate node left"
stop
