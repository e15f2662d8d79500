#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: installs the Debian packages the
# tests start as real servers (nginx, dnsmasq, redis, prometheus, tinyproxy,
# microsocks), GNU wget (the reference crawler), iptables (the chaos test) and the documentation packages
# whose HTML sites the real-web tests crawl, installs the project with its test
# extras, then runs pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
have nginx        || missing+=(nginx)
have dnsmasq      || missing+=(dnsmasq-base)
have redis-server || missing+=(redis-server)
have prometheus   || missing+=(prometheus)
have ip           || missing+=(iproute2)
have tinyproxy    || missing+=(tinyproxy)
have microsocks   || missing+=(microsocks)
have wget         || missing+=(wget)
have iptables     || missing+=(iptables)   # the chaos test's partitions and lossy link (tests/faults/chaos_support.py)
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

python3 -m pip install -q --disable-pip-version-check -e '.[test,fast,jit,replay]'
exec python3 -m pytest -q -p no:cacheprovider "$@"
