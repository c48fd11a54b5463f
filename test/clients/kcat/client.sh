#!/usr/bin/env bash
# kgate end-to-end client: kcat (librdkafka).
#
# Usage: client.sh BOOTSTRAP TOPIC produce FROM TO CODEC
#        client.sh BOOTSTRAP TOPIC verify FROM TO -
# (kcat has no admin API: the harness creates the topic.)
#
# See test/clients/README.md for the record convention. kcat can set neither
# per-record headers nor timestamps, so:
#   * produce runs one `kcat -P -p P -K '\t'` per partition P and group of
#     GROUP=100 consecutive indexes (i - i%100), with the fixed headers
#     -H h1=v<group start> -H h2=  (keys and values come from stdin);
#   * verify checks h1=v<i - i%100>,h2= and accepts any CreateTime within
#     [1700000000000, now + 1 h] (the Go harness checks a tighter window).
# Environment: KCAT (default kcat), KCAT_TIMEOUT seconds per kcat run (60).
set -uo pipefail

readonly PARTITIONS=3
readonly GROUP=100
readonly KCAT="${KCAT:-kcat}"
readonly KCAT_TIMEOUT="${KCAT_TIMEOUT:-60}"
START_MS=$(date +%s%3N)
readonly START_MS
ERRFILE=$(mktemp)
readonly ERRFILE
trap 'rm -f "$ERRFILE"' EXIT

json_escape() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/\\n}
	s=${s//$'\t'/\\t}
	printf '%s' "$s"
}

# finish OK EXTRA_JSON [ERROR]: print the result line and exit.
finish() {
	local ok=$1 extra=$2 err=${3:-}
	local version
	version=$("$KCAT" -V 2>/dev/null | sed -n 's/^Version \([^ ]*\).*librdkafka \([^ ]*\).*/\1", "librdkafka": "\2/p')
	local line="{\"client\": \"kcat\", \"version\": \"${version:-unknown}\", \"mode\": \"$MODE\"${extra}"
	if [[ -n $err ]]; then
		line+=", \"error\": \"$(json_escape "$err")\""
	fi
	line+=", \"ok\": $ok, \"elapsed_ms\": $(($(date +%s%3N) - START_MS))}"
	printf '%s\n' "$line"
	if [[ $ok == true ]]; then exit 0; else exit 1; fi
}

fail() { finish false "${RANGE_JSON:-}" "$1"; }

# records P LO HI: "key-<i>\t<value>" lines for i in [LO, HI) with i%3 == P.
records() {
	awk -v p="$1" -v lo="$2" -v hi="$3" -v parts="$PARTITIONS" 'BEGIN {
		for (i = lo; i < hi; i++) {
			if (i % parts != p) continue
			unit = "value-" i "-"
			n = 10 + (i * 37) % 491
			v = ""
			while (length(v) < n) v = v unit
			printf "key-%d\t%s\n", i, substr(v, 1, n)
		}
	}'
}

produce() {
	local from=$1 to=$2 codec=$3 p lo hi n out sent=0
	for ((lo = from; lo < to; lo = hi)); do
		hi=$(((lo / GROUP + 1) * GROUP))
		((hi > to)) && hi=$to
		local group=$((lo - lo % GROUP))
		for ((p = 0; p < PARTITIONS; p++)); do
			n=$(records "$p" "$lo" "$hi" | wc -l)
			((n == 0)) && continue
			# acks=all, idempotent; kcat exits non-zero if a delivery fails.
			if ! out=$(records "$p" "$lo" "$hi" | timeout "$KCAT_TIMEOUT" "$KCAT" -P -b "$BOOTSTRAP" -t "$TOPIC" \
				-p "$p" -K '\t' -z "$codec" -H "h1=v$group" -H "h2=" \
				-X acks=all -X enable.idempotence=true -X linger.ms=5 -X message.timeout.ms=50000 2>&1); then
				fail "kcat -P partition $p records $lo..$((hi - 1)) (codec $codec) failed: $(tail -n 5 <<<"$out")"
			fi
			sent=$((sent + n))
		done
	done
	RANGE_JSON+=", \"codec\": \"$codec\", \"records\": $sent"
}

verify() {
	local from=$1 to=$2 p out total=0 err
	local now_ms
	for ((p = 0; p < PARTITIONS; p++)); do
		# -e: exit at the end of the partition. Fields: offset key value
		# timestamp headers, tab separated.
		if ! out=$(timeout "$KCAT_TIMEOUT" "$KCAT" -C -b "$BOOTSTRAP" -t "$TOPIC" -p "$p" -o beginning -e -q \
			-X check.crcs=true -f '%o\t%k\t%s\t%T\t%h\n' 2>"$ERRFILE"); then
			fail "kcat -C partition $p failed or timed out after ${KCAT_TIMEOUT}s: $(tail -n 5 "$ERRFILE")"
		fi
		now_ms=$(($(date +%s%3N) + 3600000))
		if ! err=$(awk -F '\t' -v p="$p" -v lo="$from" -v hi="$to" -v parts="$PARTITIONS" -v group="$GROUP" \
			-v tsmin=1700000000000 -v tsmax="$now_ms" '
			BEGIN {
				first = lo
				while (first % parts != p) first++
				want = (first < hi) ? int((hi - 1 - first) / parts) + 1 : 0
			}
			function bad(msg) {
				printf "partition %d offset %s (record #%d there, expected index %d): %s\n", p, $1, n, i, msg
				failed = 1
				exit 1
			}
			{
				n = NR - 1
				i = first + n * parts
				if (n >= want) {
					printf "partition %d: unexpected extra record at offset %s (key %s): want exactly %d\n", p, $1, $2, want
					failed = 1
					exit 1
				}
				unit = "value-" i "-"
				len = 10 + (i * 37) % 491
				v = ""
				while (length(v) < len) v = v unit
				v = substr(v, 1, len)
				h = "h1=v" (i - i % group) ",h2="
				if (NF != 5) bad("malformed kcat output line (" NF " fields): " $0)
				if ($1 != n) bad("got offset " $1 ", want " n)
				if ($2 != "key-" i) bad("key \"" $2 "\", want \"key-" i "\"")
				if ($3 != v) bad("value \"" substr($3, 1, 40) "\" (" length($3) " bytes), want \"" substr(v, 1, 40) "\" (" len " bytes)")
				if ($5 != h) bad("headers \"" $5 "\", want \"" h "\"")
				if ($4 + 0 < tsmin || $4 + 0 > tsmax) bad("timestamp " $4 " outside [" tsmin ", " tsmax "]")
			}
			END {
				if (failed) exit 1
				if (NR != want) {
					printf "partition %d: read %d records up to the end of the partition, want %d\n", p, NR, want
					exit 1
				}
			}' < <([[ -n $out ]] && printf '%s\n' "$out")); then
			fail "$err"
		fi
		[[ -n $out ]] && total=$((total + $(printf '%s\n' "$out" | wc -l)))
	done
	RANGE_JSON+=", \"records\": $total"
}

MODE=${3:-}
if (($# < 6)); then
	fail "usage: client.sh BOOTSTRAP TOPIC produce|verify FROM TO CODEC"
fi
readonly BOOTSTRAP=$1 TOPIC=$2
FROM=$4 TO=$5 CODEC=$6
RANGE_JSON=", \"from\": $FROM, \"to\": $TO"
command -v "$KCAT" >/dev/null || fail "$KCAT not found: run scripts/install-test-deps.sh"
case $MODE in
produce) produce "$FROM" "$TO" "$CODEC" ;;
verify) verify "$FROM" "$TO" ;;
*) fail "unknown mode $MODE (kcat has no admin API: create is done by the harness)" ;;
esac
finish true "$RANGE_JSON"
