#!/usr/bin/env bash
# Installs what the test suite needs, then runs it (pytest -n 2 over tests/, the 30 slowest tests
# listed at the end; arguments go to pytest).
#
# Debian packages, each installed with apt-get only when missing:
#   Java 17+ (openjdk-17-jre-headless) for the Spark tests (tests/spark)
#   prometheus (prometheus, promtool) for the metrics tests (tests/prometheus)
#   zookeeper (its jars; the tests start their own server) for the ZooKeeper-mode tests (tests/zookeeper)
#   curl for the test that runs the docs' commands (tests/integration/test_docs_commands.py)
#   redis-server (the binary; the test starts its own server) for kraft-bench peers' Redis Streams rows
#   nodejs and npm for the KafkaJS test (tests/integration/test_kafka_kafkajs_e2e.py)
# as root, or through sudo when it asks no password; otherwise it says which are missing and which
# suites will be skipped or fail, and goes on.
# Python packages: this checkout, editable, with the extras dev, spark, zk and bench, pip-installed
# into the active environment (the virtualenv when one is active).
# Node.js packages: tests/js's pinned clients (KafkaJS), `npm ci` from its package-lock.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# -- system packages ------------------------------------------------------------------------------

java_ok() {  # Spark 4 needs Java 17 or later
    command -v java >/dev/null 2>&1 && java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'
}
missing=()      # what is missing: "name|Debian package|consequence"
java_ok || missing+=("Java 17+|openjdk-17-jre-headless|the Spark tests (tests/spark) will fail")
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 ||
    missing+=("Prometheus|prometheus|the metrics tests (tests/prometheus) will fail")
[ -f /usr/share/java/zookeeper.jar ] ||
    missing+=("ZooKeeper|zookeeper|the ZooKeeper-mode tests (tests/zookeeper) will be skipped")
command -v curl >/dev/null 2>&1 ||
    missing+=("curl|curl|the docs commands test (tests/integration/test_docs_commands.py) will fail")
command -v redis-server >/dev/null 2>&1 ||
    missing+=("Redis|redis-server|the Redis rows of tests/integration/test_bench_peers.py will be skipped")
command -v node >/dev/null 2>&1 ||
    missing+=("Node.js|nodejs|the KafkaJS test (tests/integration/test_kafka_kafkajs_e2e.py) will be skipped")
command -v npm >/dev/null 2>&1 ||
    missing+=("npm|npm|the KafkaJS test (tests/integration/test_kafka_kafkajs_e2e.py) cannot install KafkaJS")

if [ ${#missing[@]} -gt 0 ]; then
    packages=()
    for m in "${missing[@]}"; do IFS='|' read -r _ package _ <<<"$m"; packages+=("$package"); done
    can_install=1
    if [ "$(id -u)" -eq 0 ]; then
        as_root=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        as_root=(sudo -n)
    else
        can_install=0
        echo "scripts/test.sh: not root and no password-less sudo, so these Debian packages are not installed:" >&2
        for m in "${missing[@]}"; do
            IFS='|' read -r name package consequence <<<"$m"
            echo "  $name ($package): $consequence" >&2
        done
        echo "  (as root: apt-get install ${packages[*]})" >&2
    fi
    if [ $can_install -eq 1 ]; then
        "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        # Debian 13 has no Java 17: its default JRE (21) does as well
        if ! apt-cache show openjdk-17-jre-headless >/dev/null 2>&1; then
            packages=("${packages[@]/openjdk-17-jre-headless/default-jre-headless}")
        fi
        echo "scripts/test.sh: installing ${packages[*]} with apt-get" >&2
        # policy-rc.d keeps Debian from starting the packaged services (tests start their own); one
        # that was already there (container images ship one) stays.
        own_policy=0
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            "${as_root[@]}" sh -c \
                "printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d"
            own_policy=1
        fi
        status=0
        "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null || status=$?
        [ $own_policy -eq 0 ] || "${as_root[@]}" rm -f /usr/sbin/policy-rc.d
        [ $status -eq 0 ] || exit $status
    fi
fi

# -- Python packages ------------------------------------------------------------------------------

if "$PYTHON" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
    venv=$("$PYTHON" -c 'import sys; print(sys.prefix)')
    echo "scripts/test.sh: installing .[dev,spark,zk,bench] into the virtualenv $venv" >&2
else
    # Debian's own Python is "externally managed" (PEP 668): pip refuses without this outside a
    # virtualenv (and installs into the user's site-packages when not root).
    export PIP_BREAK_SYSTEM_PACKAGES=1
fi
"$PYTHON" -m pip install -q --disable-pip-version-check -e ".[dev,spark,zk,bench]"

# -- Node.js packages -----------------------------------------------------------------------------

if command -v npm >/dev/null 2>&1; then
    echo "scripts/test.sh: installing tests/js's packages (npm ci)" >&2
    (cd tests/js && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
# --durations: every run ends with its slowest tests, where the suite's time budget goes (docs/testing.md)
"$PYTHON" -m pytest -n 2 --dist loadgroup -q --durations=30 "$@"
