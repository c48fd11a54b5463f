#!/usr/bin/env bash
# The real-server Iggy tier of `make test`: for each real iggy-server build
# in ../shared/iggy (scripts/iggy-bin.sh unpacks it outside the repository),
# the client and backend real-server tests, then the whole Iggy e2e tier
# (IGGY_E2E) twice: with --iggy-protocol set to the server's dialect and
# with --iggy-protocol auto. Each test starts its own server on a free port
# and a fresh data directory and stops it when done.
#
# Without ../shared/iggy it prints "real-server tier SKIPPED" and succeeds:
# the Iggy tier has then run against the test double only.
#
# Environment: GO (default go), IGGY_E2E (the test pattern, from the
# Makefile), IGGY_REAL_SERVERS (default "0.8.0:legacy 0.9.0-edge.5:current",
# version:dialect pairs).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
readonly GO="${GO:-go}"
readonly SERVERS="${IGGY_REAL_SERVERS:-0.8.0:legacy 0.9.0-edge.5:current}"
: "${IGGY_E2E:?set IGGY_E2E to the Iggy tier test pattern}"

cd "$ROOT"
for pair in $SERVERS; do
	version=${pair%%:*} dialect=${pair#*:}
	rc=0
	bin=$(scripts/iggy-bin.sh "iggy-server-$version") || rc=$?
	if ((rc == 3)); then
		echo "e2e: real-server tier SKIPPED: no iggy-server $version build in ${IGGY_SHARED:-../shared/iggy}" >&2
		continue
	elif ((rc != 0)); then
		exit "$rc"
	fi
	echo "== real-server tier: iggy-server $version ($dialect dialect)" >&2
	IGGY_SERVER_BIN=$bin "$GO" test -race -count=1 -timeout 10m \
		-run 'TestClientRealServer|TestRealServer|TestRealIggyServer' ./gateway/iggy/ ./gateway/iggybackend/
	for protocol in "$dialect" auto; do
		echo "== real-server tier: iggy-server $version, e2e with --iggy-protocol $protocol" >&2
		KGATE_E2E_BACKEND=iggy IGGY_SERVER_BIN=$bin KGATE_E2E_IGGY_DIALECT=$protocol KGATE_E2E_IGGY_EXPECT=$dialect \
			"$GO" test -race -count=1 -timeout 60m -run "$IGGY_E2E" ./test/e2e/
	done
done
