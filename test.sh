#!/usr/bin/env bash
# test.sh — the test command. On a fresh Debian machine with Go it installs
# what the suite needs (redis-server and redis-cli), then runs go vet, the
# whole suite under the race detector, and each fuzz target briefly.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	echo "test.sh: installing redis-server (Debian package) for the distributed tests"
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi

# Valkey, for the distributed tests' server matrix (TestServers): from
# the release's own packages where it has them (Debian trixie on), else
# from its backports (bookworm: 8.0), whose list is added for this one
# install with the mirror the machine already uses (its sources are left
# as they are).
if ! command -v valkey-server >/dev/null 2>&1; then
	echo "test.sh: installing valkey-server (Debian package) for the distributed tests"
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
	if apt-cache policy valkey-server 2>/dev/null | grep -q 'Candidate: [0-9]'; then
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends valkey-server >/dev/null
	else
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
		apt_bpo=(-o "Dir::Etc::sourcelist=$bpo/bpo.sources" -o "Dir::Etc::sourceparts=-" -o "Dir::State::Lists=$bpo/lists")
		$SUDO apt-get "${apt_bpo[@]}" update -qq
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${apt_bpo[@]}" install -y -qq --no-install-recommends valkey-server >/dev/null
		rm -rf "$bpo"
	fi
fi

go vet ./...
# -p 1: packages one at a time, so the real-clock accuracy tests of one
# package do not share the CPUs with another package's load.
go test -race -count=1 -p 1 ./...
# The OpenTelemetry module (otelthrottle/) has a go.mod of its own, so
# that the core keeps its few dependencies; ./... above does not reach it.
(cd otelthrottle && go vet ./... && go test -race -count=1 ./...)
# The client-library tests (sdktest/: go-github and the OpenAI SDK against
# local fakes of their APIs) are a module of their own for the same reason.
(cd sdktest && go vet ./... && go test -race -count=1 ./...)

# Every fuzz target, briefly (FUZZTIME, default 10000 inputs each; a count,
# not a time, because of golang/go#75804): the seed corpus
# already ran above; this explores a little further on each run.
FUZZTIME="${FUZZTIME:-10000x}"
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
		echo "fuzz $pkg $target ($FUZZTIME)"
		if ! out=$(go test -run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" "$pkg" 2>&1); then
			echo "$out"
			exit 1
		fi
	done
done
echo "test.sh: all passed"
