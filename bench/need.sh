# Sourced by bench scripts (POSIX sh): `need PACKAGE...` installs the Debian packages a
# script calls when they are missing (apt-get, as root), so every script runs on a fresh
# machine.
need() {
  missing=""
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    echo "installing$missing" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # shellcheck disable=SC2086 # word splitting of the package list is wanted
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  fi
}
