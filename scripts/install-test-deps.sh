#!/usr/bin/env bash
# Install everything the end-to-end client tests (test/e2e, test/clients)
# need on a Debian machine. Idempotent: a step whose result is already there
# is skipped, so a re-run takes a few seconds.
#
#   * Debian packages: kcat; libhwloc15 (the runtime library of the real
#     iggy-server builds in ../shared/iggy); python3-confluent-kafka and python3-kafka (for
#     /usr/bin/python3) with python3-snappy, python3-lz4 and python3-zstandard
#     for kafka-python's codecs; chromium (the status page's headless browser
#     test); a JDK, Maven and Node.js if missing.
#     jq, curl, iproute2 (the README quickstart test) and systemd
#     (systemd-analyze, for the deploy/systemd unit check) if missing.
#     `apt-get update` runs at most once, and only if something is missing.
#   * npm ci in test/clients/kafkajs (when package-lock.json changed).
#   * mvn package in test/clients/java -> target/kgate-e2e-java.jar (when
#     pom.xml or src/ is newer than the jar).
#   * mvn dependency:copy-dependencies in test/clients/kafka-tools ->
#     target/lib: Apache Kafka's command-line tools (kafka-tools, and
#     kafka_2.13 for kafka-configs) that test/e2e/kafka_tools_test.go runs
#     (when pom.xml is newer than target/lib/.complete).
#   * go mod download (the Go clients franz-go and Sarama).
#   * cargo build in test/iggy-sdk-check: the official Iggy Rust SDKs (0.11.0
#     and 0.10.0, one per Iggy dialect) that the Iggy tests drive. Needs Rust
#     (rustup; cargo on PATH or in ~/.cargo/bin); crates come from crates.io.
#
# Needs root (or sudo) for apt-get. Environment: PYTHON (default
# /usr/bin/python3, the interpreter the Debian packages install for).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
readonly PYTHON="${PYTHON:-/usr/bin/python3}"
readonly KAFKAJS_DIR="$ROOT/test/clients/kafkajs"
readonly JAVA_DIR="$ROOT/test/clients/java"
readonly JAR="$JAVA_DIR/target/kgate-e2e-java.jar"
readonly TOOLS_DIR="$ROOT/test/clients/kafka-tools"

log() { echo "install-test-deps: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
	command -v sudo >/dev/null || die "not root and no sudo: cannot apt-get install"
	SUDO=(sudo)
fi

APT_UPDATED=0
apt_install() {
	((APT_UPDATED)) || {
		log "apt-get update"
		"${SUDO[@]}" apt-get update -qq
		APT_UPDATED=1
	}
	log "apt-get install $*"
	"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

pkg_installed() {
	[[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

# --- Debian packages -------------------------------------------------------
debian_packages() {
	local want=(kcat libhwloc15 python3-confluent-kafka python3-kafka python3-snappy python3-lz4 python3-zstandard chromium)
	local missing=() p
	for p in "${want[@]}"; do
		pkg_installed "$p" || missing+=("$p")
	done
	# Toolchains: only if the command is missing (they may come from
	# elsewhere than Debian's packages).
	command -v java >/dev/null && command -v javac >/dev/null || missing+=(default-jdk-headless)
	command -v mvn >/dev/null || missing+=(maven)
	command -v node >/dev/null || missing+=(nodejs)
	command -v npm >/dev/null || missing+=(npm)
	# The README quickstart's commands (TestQuickstart) and the systemd
	# unit's check (deploy: systemd-analyze verify).
	command -v jq >/dev/null || missing+=(jq)
	command -v curl >/dev/null || missing+=(curl)
	command -v ip >/dev/null || missing+=(iproute2)
	command -v systemd-analyze >/dev/null || missing+=(systemd)
	if ((${#missing[@]})); then
		apt_install "${missing[@]}"
	else
		log "Debian packages: already installed"
	fi
	"$PYTHON" -c 'import confluent_kafka, kafka, kafka.codec as c; assert c.has_snappy() and c.has_lz4() and c.has_zstd()' ||
		die "$PYTHON cannot import confluent_kafka/kafka with all codecs"
	kcat -V >/dev/null || die "kcat does not run"
}

# --- kafkajs -----------------------------------------------------------------
kafkajs() {
	local stamp="$KAFKAJS_DIR/node_modules/.kgate-lock.sha256"
	local sum
	sum=$(sha256sum "$KAFKAJS_DIR/package-lock.json" "$KAFKAJS_DIR/package.json" | sha256sum | cut -d' ' -f1)
	if [[ -f $stamp && $(cat "$stamp") == "$sum" ]]; then
		log "kafkajs: node_modules up to date"
		return
	fi
	log "kafkajs: npm ci"
	(cd "$KAFKAJS_DIR" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	echo "$sum" >"$stamp"
}

# --- Java kafka-clients ------------------------------------------------------
java_client() {
	if [[ -f $JAR && -z $(find "$JAVA_DIR/pom.xml" "$JAVA_DIR/src" -newer "$JAR" -print -quit) ]]; then
		log "java: $JAR up to date"
		return
	fi
	log "java: mvn package"
	local out
	out=$(cd "$JAVA_DIR" && mvn -q -B package 2>&1) || {
		printf '%s\n' "$out" >&2
		die "mvn package failed in $JAVA_DIR"
	}
	touch "$JAR"
}

# --- Kafka's command-line tools ----------------------------------------------
kafka_tools() {
	local lib="$TOOLS_DIR/target/lib"
	if [[ -f $lib/.complete && ! $TOOLS_DIR/pom.xml -nt $lib/.complete ]]; then
		log "kafka-tools: $lib up to date"
		return
	fi
	log "kafka-tools: mvn dependency:copy-dependencies"
	rm -rf "$lib"
	local out
	out=$(cd "$TOOLS_DIR" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$lib" 2>&1) || {
		printf '%s\n' "$out" >&2
		die "mvn dependency:copy-dependencies failed in $TOOLS_DIR"
	}
	touch "$lib/.complete"
}

# --- Go modules --------------------------------------------------------------
go_modules() {
	if ! command -v go >/dev/null; then
		log "go not on PATH: skipping go mod download"
		return
	fi
	(cd "$ROOT" && go mod download) || die "go mod download failed"
	log "go modules: downloaded"
}

# --- Official Iggy SDKs (Rust) ----------------------------------------------
iggy_sdk_check() {
	local dir="$ROOT/test/iggy-sdk-check"
	if ! command -v cargo >/dev/null && [[ -x $HOME/.cargo/bin/cargo ]]; then
		PATH="$HOME/.cargo/bin:$PATH"
	fi
	command -v cargo >/dev/null || die "cargo not found: install Rust with rustup (the Iggy SDK checks need it)"
	log "iggy-sdk-check: cargo build (minutes the first time, then a no-op)"
	local feature out
	for feature in v011 v010; do
		out=$(cd "$dir" && cargo build --locked --quiet --features "$feature" --bin "iggy-sdk-check-$feature" 2>&1) || {
			printf '%s\n' "$out" >&2
			die "cargo build of iggy-sdk-check-$feature failed in $dir"
		}
	done
}

debian_packages
kafkajs
java_client
kafka_tools
go_modules
iggy_sdk_check
log "done"
