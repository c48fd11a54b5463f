#!/usr/bin/env bash
# go test with its arguments, then, when it fails, a digest at the end: the
# failed tests with their first lines of output and, after a timeout, the
# tests that were still running. CI keeps only the end of a run's output,
# and a timed-out package prints the running tests' names above a goroutine
# dump thousands of lines long.
#
# Environment: GO (default go).
set -uo pipefail

log=$(mktemp "${TMPDIR:-/tmp}/kgate-go-test.XXXXXX")
trap 'rm -f "$log"' EXIT

"${GO:-go}" test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
	echo "==== go test $* failed (exit $rc); digest:"
	awk '
		# A failed test and the indented lines under it (its t.Log output).
		/^[ \t]*--- FAIL/ { print; under = 12; next }
		under > 0 && /^[ \t]+/ { print; under--; next }
		{ under = 0 }
		# A timeout: the tests still running are listed up to a blank line.
		/^panic: test timed out/ { print; running = 1; next }
		running && /^[ \t]*$/ { running = 0; next }
		running { print; next }
		/^panic:|^FAIL[ \t]|WARNING: DATA RACE/ { print }
	' "$log" | head -200
fi
exit "$rc"
