#!/usr/bin/env bash
# Installs everything the test suite needs (system packages only when missing) and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
# ZooKeeper-mode tests start their own server from the package's jars (tests/zookeeper)
[ -f /usr/share/java/zookeeper.jar ] || need_apt+=(zookeeper)
if [ ${#need_apt[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # policy-rc.d keeps Debian from starting the packaged services: tests start their own.
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
    rm -f /usr/sbin/policy-rc.d
fi

export PIP_BREAK_SYSTEM_PACKAGES=1
python3 -m pip install -q --disable-pip-version-check -e ".[dev,spark,zk,bench]"
python3 -m pytest -n 2 --dist loadgroup -q "$@"
