#!/usr/bin/env bash
# Run the test suite on a fresh machine: installs the project with its test
# extras, checks it with ruff and mypy (both configured in pyproject.toml; the
# tests do not run while either fails), installs the Debian packages the tests
# start as real servers (nginx, dnsmasq, prometheus, tinyproxy, microsocks),
# podman and debootstrap (the container image test), GNU wget (the reference
# crawler), iptables (the chaos test), chromium with its driver (the console's
# browser test, driven by selenium) and the documentation packages whose HTML
# sites the real-web tests crawl, then runs pytest.
#
#   bash scripts/test.sh            everything (what CI runs)
#   bash scripts/test.sh --fast     the development loop: no test marked slow
#   bash scripts/test.sh PATH...    those tests only, in one process
#
# Other arguments go to pytest. (Redis is not needed by any test: only
# bench/due_bench.py compares the DUE with it; install redis-server to run it.)
set -euo pipefail
cd "$(dirname "$0")/.."

fast=()
if [ "${1:-}" = "--fast" ]; then
  shift
  fast=(-m "not slow")
fi

python3 -m pip install -q --disable-pip-version-check -e '.[test,fast,jit,replay]'

# Lint and types first: a failure stops here, with their output.
python3 -m ruff check crawler tests bench
python3 -m mypy

missing=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
have nginx        || missing+=(nginx)
have dnsmasq      || missing+=(dnsmasq-base)
have prometheus   || missing+=(prometheus)
have ip           || missing+=(iproute2)
have tinyproxy    || missing+=(tinyproxy)
have microsocks   || missing+=(microsocks)
have wget         || missing+=(wget)
have iptables     || missing+=(iptables)   # the chaos test's partitions and lossy link (tests/faults/chaos_support.py)
have chromium     || missing+=(chromium)   # the console in a real browser (tests/integration/test_console_browser.py)
have chromedriver || missing+=(chromium-driver)
# The image built and run in containers without a registry (tests/integration/test_container_image.py):
# podman with runc, netavark and aardvark-dns (container names resolve on its bridge network), debootstrap.
have podman       || missing+=(podman)
have buildah      || missing+=(buildah)
have runc         || missing+=(runc)
have debootstrap  || missing+=(debootstrap)
for pkg in netavark aardvark-dns; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
# Real sites nobody here wrote, each from another generator (tests/integration/realsites.py).
for pkg in python-requests-doc debian-reference-en git-doc debian-handbook maint-guide postfix-doc; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing Debian packages: ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "not root: cannot install ${missing[*]}; the tests that need them will be skipped" >&2
  fi
fi

# What a person looks at after a run (the console's screenshot in headless Chromium) is kept here.
export CRAWLER_TEST_ARTIFACTS="${CRAWLER_TEST_ARTIFACTS:-$PWD/test-artifacts}"
mkdir -p "$CRAWLER_TEST_ARTIFACTS"

pytest=(python3 -m pytest -q -p no:cacheprovider --durations=15)
if [ "$#" -gt 0 ]; then
  exec "${pytest[@]}" "${fast[@]}" "$@"       # a chosen set: as asked, in one process
fi
# The tests that start no crawl of their own (unit and property tests, and the integration tests not
# marked slow) are CPU-bound and independent: two processes (pytest-xdist) on two cores. Beside them, the
# tests marked `beside` (the container image: downloads and builds, no timing checked). Then the tests
# marked `serial` (tests/conftest.py: the slow crawls, clusters and faults, whose timing is checked from
# the servers' logs): those also marked `paired` two at a time (one test file per process), then the rest
# one at a time, on a quiet machine.
status=0
beside_log="$CRAWLER_TEST_ARTIFACTS/beside.log"
if [ "${#fast[@]}" -eq 0 ]; then
  "${pytest[@]}" -m beside >"$beside_log" 2>&1 &
  beside_pid=$!
  "${pytest[@]}" -m "not serial and not beside" -n 2 || status=1
  wait "$beside_pid" || status=1
  echo "--- tests marked beside (run beside the others):"
  cat "$beside_log"
  "${pytest[@]}" -m "serial and paired" -n 2 --dist loadfile || status=1
  "${pytest[@]}" -m "serial and not paired" || status=1
else
  "${pytest[@]}" "${fast[@]}" -n 2 || status=1
fi
exit "$status"
