#!/usr/bin/env bash
# Runs shellcheck (Debian's package, installed when missing) over every shell
# script of this repository: tracked or new *.sh files and the codegen hooks,
# at severity warning, following `source` (.shellcheckrc).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

if ! command -v shellcheck >/dev/null; then
  log "installing shellcheck (Debian package)"
  if [[ "$(id -u)" -eq 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null ||
      { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null; }
  else
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null
  fi
fi
cd "${REPO_ROOT}"
# Shell scripts without .sh: those that go into images (build/*/files, build/docker).
mapfile -t scripts < <(
  git ls-files --cached --others --exclude-standard -- '*.sh' 'build/docker/*' 'build/*/files/usr/local/bin/*' |
    while read -r f; do
      [[ "${f}" == *.sh ]] || head -n 1 "${f}" | grep -q '^#!.*\(bash\|/sh\)' && echo "${f}"
    done | LC_ALL=C sort -u
)
shellcheck --severity=warning "${scripts[@]}"
log "verify shellcheck: ${#scripts[@]} scripts clean"
