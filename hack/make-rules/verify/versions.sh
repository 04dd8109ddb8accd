#!/usr/bin/env bash
# Each pinned upstream release is written once, in the line.env of its release
# line (patches/<component>/<line>/line.env),
# and each pinned tool once, in hack/tools/<tool>/go.mod.
# This check fails on any other literal of a pinned release line (the pin
# itself or another patch release of its minor, e.g. vA.B.0 to vA.B.9 for
# a pin of vA.B.x, and v0.B.x for its staging modules) in the files of this
# repository, so that moving the pin (make rebase) leaves nothing stale.
# Scripts read the pin with component::setting, Go tests with
# test/util/pins, docs show it in a generated block (update/docs.sh).
#
# Not checked: patches/ (the line.env files themselves, upstream's
# text and our commit messages); go.mod, go.sum and go.work.sum files (derived,
# checked by the staging-overrides and staging-replaces checks); the Debian
# lock of the images (derived, checked by verify/debian-lock.sh); blocks between
# `<!-- BEGIN GENERATED` and `<!-- END GENERATED -->`; generated reports
# (docs/rebase-report.md); and records, which name the release they were
# made on and never change: measured runs (benchmarks/,
# hack/benchreport/testdata/, docs/measured-times.md) and blocks between
# `<!-- BEGIN RECORD` and `<!-- END RECORD -->` (the history of pin moves).
#
# Usage: verify/versions.sh   (PLANT=<file> checks that file instead, for tests)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

patterns=()
while read -r line c; do
  LINE="${line}" component::load "${c}"
  [[ "${COMPONENT_VERSION}" =~ ^v([0-9]+)\.([0-9]+)\. ]] || fatal "cannot parse ${COMPONENT_VERSION}"
  patterns+=("(^|[^0-9A-Za-z.])v?${BASH_REMATCH[1]}\.${BASH_REMATCH[2]}\.[0-9]+([^0-9]|\$)")
  if [[ "${COMPONENT_STAGING_VERSION}" =~ ^v([0-9]+)\.([0-9]+)\. ]]; then
    patterns+=("(^|[^0-9A-Za-z.])v${BASH_REMATCH[1]}\.${BASH_REMATCH[2]}\.[0-9]+([^0-9]|\$)")
  fi
done < <(line::components)
# Each pattern applies to the lines that contain its keyword (in lower
# case; empty: every line). The components' releases are checked on every line.
keywords=()
for _ in "${patterns[@]}"; do keywords+=(""); done
# The tools: each hack/tools/<tool>/go.mod pins, in its require lines, the
# modules its `tool` lines build (etcd, KWOK, runc, ...). A tool's release is
# written with the tool's name (the folder's, "cni-plugins" also as "cni
# plugins"), and only such lines are checked: other software shares release
# lines with the tools (Debian's conntrack and runc, say).
for mod in "${REPO_ROOT}"/hack/tools/*/go.mod; do
  tool="$(basename "$(dirname "${mod}")")"
  while read -r v; do
    # A pseudo-version (v0.0.0-<date>-<commit>) names no release line.
    [[ "${v}" != v0.0.0-* && "${v}" =~ ^v([0-9]+)\.([0-9]+)\. ]] || continue
    patterns+=("(^|[^0-9A-Za-z.])v?${BASH_REMATCH[1]}\.${BASH_REMATCH[2]}\.[0-9]+([^0-9]|\$)")
    keywords+=("${tool//-/[- ]?}")
  done < <(go mod edit -json "${mod}" | jq -r '(.Tool // [] | map(.Path)) as $tools |
    .Require[]? | select(.Path as $m | any($tools[]; . == $m or startswith($m + "/"))) | .Version' | sort -u)
done

if [[ -n "${PLANT:-}" ]]; then
  files=("${PLANT}")
else
  mapfile -t files < <(cd "${REPO_ROOT}" && git ls-files --cached --others --exclude-standard -- . \
    ':!patches/' ':!*go.mod' ':!*.sum' ':!build/images/debian.lock' ':!benchmarks/' \
    ':!hack/benchreport/testdata/' ':!docs/rebase-report.md' ':!docs/measured-times.md' ':!staging-overrides/' | LC_ALL=C sort -u)
fi

found=0
for f in "${files[@]}"; do
  [[ -f "${REPO_ROOT}/${f}" || -f "${f}" ]] || continue
  path="${f}"
  [[ -f "${path}" ]] || path="${REPO_ROOT}/${f}"
  grep -Iq . "${path}" 2>/dev/null || continue # binary or empty
  hits="$(awk -v pats="$(printf '%s\n' "${patterns[@]}")" -v kws="$(printf '%s\n' "${keywords[@]}")" '
    BEGIN { n = split(pats, p, "\n"); split(kws, k, "\n") }
    /<!-- BEGIN (GENERATED|RECORD)/ { gen = 1 }
    /<!-- END (GENERATED|RECORD) -->/ { gen = 0; next }
    gen { next }
    { for (i = 1; i <= n; i++) if (p[i] != "" && $0 ~ p[i] && (k[i] == "" || tolower($0) ~ k[i])) { printf "%s:%d: %s\n", FILENAME, FNR, $0; break } }
  ' "${path}")"
  if [[ -n "${hits}" ]]; then
    printf '%s\n' "${hits}" | sed "s#^${REPO_ROOT}/##" | cut -c1-200 >&2
    found=1
  fi
done
if [[ "${found}" -ne 0 ]]; then
  echo "a pinned release is written above outside patches/<component>/<line>/line.env: read it from there (scripts: component::load/component::setting; Go: test/util/pins; docs: a generated block)" >&2
  exit 1
fi
log "verify versions: no pinned release written outside patches/*/*/line.env"
