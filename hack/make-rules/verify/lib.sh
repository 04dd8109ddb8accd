#!/usr/bin/env bash
# Shared by the checks that compare what an update script writes with what is
# committed, without changing the checkout. Sourced after init.sh.

# verify::scratch_root: a copy of this repository without .git and _output/
# (which is linked, so that relative links into the trees still resolve);
# removed on exit. Prints its path.
verify::scratch_root() {
  local tmp
  tmp="$(mktemp -d)"
  tar -C "${REPO_ROOT}" --exclude=./.git --exclude=./_output -cf - . | tar -C "${tmp}" -xf -
  ln -s "${OUTPUT_DIR}" "${tmp}/_output"
  printf '%s\n' "${tmp}"
}

# verify::compare ROOT WHAT PATH...: fails, with the diff, when PATH (files,
# or folders compared by listing and link targets) differs between this
# repository and ROOT; WHAT names the update script to run.
verify::compare() {
  local root="$1" what="$2" p rc=0
  shift 2
  for p in "$@"; do
    if [[ -d "${REPO_ROOT}/${p}" || -d "${root}/${p}" ]]; then
      if ! diff -u <(cd "${REPO_ROOT}" && find "${p}" -printf '%p %y %l\n' 2>/dev/null | LC_ALL=C sort) \
        <(cd "${root}" && find "${p}" -printf '%p %y %l\n' 2>/dev/null | LC_ALL=C sort) >&2; then
        rc=1
      fi
    elif ! diff -u "${REPO_ROOT}/${p}" "${root}/${p}" >&2; then
      rc=1
    fi
  done
  [[ "${rc}" -eq 0 ]] || echo "out of date (the diff above is what ${what} would change): run it and commit the result" >&2
  return "${rc}"
}
