#!/usr/bin/env bash
# Installs everything the test suite needs (system packages only when missing) and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
if [ ${#need_apt[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check -e ".[dev,spark,zk]"
python3 -m pytest -n 2 --dist loadgroup -q "$@"
