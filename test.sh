#!/usr/bin/env bash
# test.sh — the test command. On a fresh Debian machine with Go it installs
# what the suite needs (redis-server, redis-cli, valkey-server and nginx),
# then runs go vet, the whole suite under the race detector, the three
# modules of their own (otelthrottle/, sdktest/, servertest/), and each
# fuzz target briefly.
#
# THROTTLE_LONG=1 also runs the long soaks and sweeps, whose default run is
# a shorter part held to the same bounds. FUZZTIME sets the inputs each
# fuzz target explores (default 10000x).
set -euo pipefail
cd "$(dirname "$0")"
stage() { echo "test.sh: ${SECONDS}s: $*"; }

# The suite measures the real clock (turns, wake-ups, rates) on what may
# be a 2-core machine: where the machine allows it (root, CAP_SYS_NICE),
# the test command and what it starts run ahead of ordinary-priority work
# sharing the CPUs, as a benchmark would; elsewhere it runs as it is.
renice -n -10 -p $$ >/dev/null 2>&1 || true

# The servers, from Debian's packages: in one apt call where the release
# has both (trixie on); on bookworm Valkey comes from its backports (8.0),
# whose list is fetched for that one install with the mirror the machine
# already uses (its sources are left as they are).
need=()
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	need+=(redis-server)
fi
if ! command -v valkey-server >/dev/null 2>&1; then
	need+=(valkey-server)
fi
# nginx for servertest's limit_req rows (Debian puts it in /usr/sbin).
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
	need+=(nginx)
fi
if [ ${#need[@]} -gt 0 ]; then
	echo "test.sh: installing ${need[*]} (Debian packages) for the distributed and server tests"
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
	apt_opts=()
	apt_install() { DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "$@" >/dev/null; }
	$SUDO apt-get update -qq
	main=() backports=()
	for p in "${need[@]}"; do
		# The policy whole, then matched: grep -q in a pipe would stop
		# reading at its match, and apt-cache's SIGPIPE fail the test
		# under pipefail.
		policy=$(apt-cache policy "$p" 2>/dev/null || true)
		if [[ $policy == *"Candidate: "[0-9]* ]]; then
			main+=("$p")
		else
			backports+=("$p")
		fi
	done
	if [ ${#main[@]} -gt 0 ]; then apt_install "${main[@]}"; fi
	if [ ${#backports[@]} -gt 0 ]; then
		. /etc/os-release
		# The first non-security mirror of the machine's sources (deb822 or
		# one-line form; either file may be missing, hence the || true under
		# pipefail), else Debian's own.
		mirror=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
			awk '/^URIs:/ && $2 !~ /security/ {print $2; exit} /^deb / && $2 !~ /security/ {print $2; exit}' || true)
		mirror="${mirror:-http://deb.debian.org/debian}"
		bpo=$(mktemp -d)
		chmod 755 "$bpo" # apt fetches as _apt
		printf 'Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
			"$mirror" "$VERSION_CODENAME" >"$bpo/bpo.sources"
		mkdir -p "$bpo/lists/partial"
		apt_opts=(-o "Dir::Etc::sourcelist=$bpo/bpo.sources" -o "Dir::Etc::sourceparts=-" -o "Dir::State::Lists=$bpo/lists")
		$SUDO apt-get "${apt_opts[@]}" update -qq
		apt_install "${backports[@]}"
		rm -rf "$bpo"
	fi
fi
# The servers are installed: a Redis or nginx test that cannot find one
# fails instead of skipping (internal/redistest, servertest).
export CI="${CI:-true}"

stage "go mod download"
# Every module's dependencies, up front: a network failure shows here.
go mod download
(cd otelthrottle && go mod download)
(cd sdktest && go mod download)
(cd servertest && go mod download)

stage "go test -race"
# The race detector's build of the dependencies, on every CPU: go test -p 1
# below would compile them one at a time.
go build -race ./...
# -p 1: packages one at a time, so the real-clock accuracy tests of one
# package do not share the CPUs with another package's load.
go test -race -count=1 -p 1 $(go list ./... | grep -v '/distributed$')

# While distributed's tests sleep on real-clock turns (they keep a few
# percent of the CPUs busy, and their bounds are reckoned for -race on a
# busy 2-core machine), the lowest CPU priority vets and builds what the
# later stages need: go vet, the three modules of their own, and the fuzz
# targets' instrumented test binaries. With warm caches this takes a few
# seconds; on a fresh machine it is minutes of compiling taken off the
# critical path. (Not beside the root package: its spin test measures
# wake-ups to a tenth of a millisecond.)
fuzzbin=$(mktemp -d)
prelog=$(mktemp)
fuzzdirs=()
for dir in $(go list -f '{{.Dir}}' ./...); do
	if grep -qs '^func Fuzz' "$dir"/*_test.go; then fuzzdirs+=("$dir"); fi
done
set -m # the builds in a process group of their own, reniced and stopped as one
(
	renice -n 19 -p "$BASHPID" >/dev/null
	go vet ./...
	(cd otelthrottle && go vet ./... && go test -race -count=1 -run '^$' ./... >/dev/null)
	(cd sdktest && go vet ./... && go test -race -count=1 -run '^$' ./... >/dev/null)
	(cd servertest && go vet ./... && go test -race -count=1 -run '^$' ./... >/dev/null)
	for dir in "${fuzzdirs[@]}"; do
		go test -c -fuzz=. -o "$fuzzbin/$(basename "$dir").test" "$dir"
	done
) >"$prelog" 2>&1 &
pre=$!
set +m
trap 'kill -- -"$pre" 2>/dev/null || true; rm -rf "$fuzzbin" "$prelog"' EXIT

stage "go test -race ./distributed, go vet and the builds beside it"
# distributed: its accuracy tests run alone first; the others, which
# sleep on real-clock turns against redis-servers of their own, 4 at a
# time (t.Parallel).
go test -race -count=1 -parallel 4 ./distributed

stage "waiting for go vet and the builds"
# What is left of them runs at the test command's own priority: at 19
# other work on the machine could hold them off indefinitely.
renice -n "$(awk '{print $19}' /proc/$$/stat)" -g "$pre" >/dev/null 2>&1 || true
if ! wait "$pre"; then
	cat "$prelog"
	echo "test.sh: go vet or a build failed"
	exit 1
fi
stage "otelthrottle, sdktest, servertest"
# The OpenTelemetry module (otelthrottle/) has a go.mod of its own, so
# that the core keeps its few dependencies; ./... above does not reach it.
(cd otelthrottle && go test -race -count=1 ./...)
# The client-library tests (sdktest/: go-github and the OpenAI SDK against
# local fakes of their APIs) are a module of their own for the same reason.
(cd sdktest && go test -race -count=1 ./...)
# The server matrix (servertest/: real rate-limit middlewares served
# in-process, and nginx limit_req as a process of its own, against the
# Transport), a module of its own for its dependencies; about 20 s.
(cd servertest && go test -race -count=1 ./...)

stage "fuzz"
# Every fuzz target, briefly (FUZZTIME inputs each; a count, not a time,
# because of golang/go#75804): the seed corpus already ran above; this
# explores a little further on each run. Each package's instrumented
# binary was built above; it runs in its package's directory (the seed
# corpus in testdata/) with the go command's cache of inputs.
FUZZTIME="${FUZZTIME:-10000x}"
cache=$(go env GOCACHE)/fuzz
for dir in "${fuzzdirs[@]}"; do
	pkg=$(go list "$dir")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go | sed 's/^func //'); do
		echo "fuzz $pkg $target ($FUZZTIME)"
		if ! out=$(cd "$dir" && "$fuzzbin/$(basename "$dir").test" -test.run='^$' -test.fuzz="^${target}\$" \
			-test.fuzztime="$FUZZTIME" -test.fuzzcachedir="$cache/$pkg" 2>&1); then
			echo "$out"
			exit 1
		fi
	done
done
stage "all passed"
