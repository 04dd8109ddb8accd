#!/usr/bin/env bash
# Checks build/images/debian.lock against build/images/debian-packages.env
# without the network: it was resolved for the suite and package lists the
# env names (its header says which), every requested package has a line of
# its layer, and every line is "layer file url size sha256". Re-resolving
# (hack/make-rules/update/debian-lock.sh) is not part of verify: Debian's
# archive moves on by itself, and a pin should move only when someone bumps it.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

# shellcheck source=build/images/debian-packages.env
source "${REPO_ROOT}/build/images/debian-packages.env"
lock="${LOCK:-${REPO_ROOT}/build/images/debian.lock}"
[[ -s "${lock}" ]] || fatal "${lock} is missing: run hack/make-rules/update/debian-lock.sh"

rc=0
want="# suite=${DEBIAN_SUITE} static=${DEBIAN_STATIC_PACKAGES// /,} iptables=${DEBIAN_IPTABLES_PACKAGES// /,}"
if ! grep -qxF -- "${want}" "${lock}"; then
  log "${lock#"${REPO_ROOT}/"} was not resolved for build/images/debian-packages.env (want the header '${want}'): run hack/make-rules/update/debian-lock.sh"
  rc=1
fi
if bad="$(grep -v '^#' "${lock}" | awk 'NF != 5 || ($1 != "static" && $1 != "iptables") || $4 !~ /^[0-9]+$/ || length($5) != 64 || $5 ~ /[^0-9a-f]/ || $3 !~ /^https?:\/\//' )" && [[ -n "${bad}" ]]; then
  log "${lock#"${REPO_ROOT}/"}: malformed lines:"$'\n'"${bad}"
  rc=1
fi
for layer in static iptables; do
  var="DEBIAN_${layer^^}_PACKAGES"
  for p in ${!var}; do
    if ! grep -v '^#' "${lock}" | awk -v l="${layer}" -v p="${p}" '$1 == l { split($2, f, "_"); if (f[1] == p) found = 1 } END { exit !found }'; then
      log "${lock#"${REPO_ROOT}/"}: no ${layer} package ${p}: run hack/make-rules/update/debian-lock.sh"
      rc=1
    fi
  done
done
exit "${rc}"
