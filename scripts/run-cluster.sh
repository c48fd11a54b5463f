#!/usr/bin/env bash
# Starts a local three-node kgate cluster on loopback in the foreground.
# Ctrl-C (or SIGTERM) stops all three. Data lives in ./kgate-data/node{1,2,3}
# and survives restarts. KGATE_NODES=1 starts a single node instead.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${KGATE_NODES:-3}
data=${KGATE_DATA:-./kgate-data}
bin=./bin/kgate
pids=()

stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping kgate..."
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
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
wait -n || true
echo "a kgate node exited; see $data/node*/kgate.log"
stop
