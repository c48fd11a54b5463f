#!/usr/bin/env bash
# Print the path of a real Apache Iggy binary, unpacked from the
# xz-compressed builds in ../shared/iggy (IGGY_SHARED) into a cache
# directory outside the repository (KGATE_IGGY_CACHE, default
# ${XDG_CACHE_HOME:-~/.cache}/kgate/iggy). The shared folder is only read.
#
#   scripts/iggy-bin.sh iggy-server-0.8.0     # → /root/.cache/kgate/iggy/iggy-server-0.8.0-<sum>
#
# Exit status 3, with a note on stderr, when the shared folder or the build
# is not there (a user's machine): callers report their tier as skipped.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
readonly SHARED="${IGGY_SHARED:-$ROOT/../shared/iggy}"
readonly CACHE="${KGATE_IGGY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kgate/iggy}"

[[ $# -eq 1 ]] || {
	echo "usage: $0 NAME (for example iggy-server-0.8.0)" >&2
	exit 2
}
name=$1
xzfile="$SHARED/$name-linux-x86_64.xz"
if [[ ! -r $xzfile ]]; then
	echo "iggy-bin: $xzfile not found" >&2
	exit 3
fi
# The cached binary is named after the archive's checksum, so a new build
# in the shared folder is unpacked afresh.
sum=$(sha256sum "$xzfile" | cut -c1-16)
bin="$CACHE/$name-$sum"
if [[ ! -x $bin ]]; then
	mkdir -p "$CACHE"
	tmp=$(mktemp "$CACHE/.$name.XXXXXX")
	trap 'rm -f "$tmp"' EXIT
	xz -dc "$xzfile" >"$tmp"
	chmod 0755 "$tmp"
	mv "$tmp" "$bin"
	trap - EXIT
fi
echo "$bin"
