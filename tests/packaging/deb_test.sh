#!/usr/bin/env bash
# The Debian package in a fresh Debian 12 root (scripts/package --test runs it):
#   tests/packaging/deb_test.sh build/packages/guestflow_<version>_amd64.deb
# The root is Debian's essential set, systemd (every Debian 12 server's init, and what
# `systemd-analyze verify` checks the units against) and exactly the packages the .deb
# declares in Depends (made once by mmdebstrap and cached in build/packaging/, keyed by that
# list), so a dependency the runtime needs and the package forgets fails here. In it, in a private mount
# namespace: dpkg -i; `guestflow version`; every library resolves; the files are where the
# package says (binary, wheel, units, /etc/default/guestflow, man pages); a real
# `guestflow code` runs in a real guest; `systemd-analyze verify` accepts both units; dpkg -r
# leaves only the conffile and the state in /var/lib/guestflow, and dpkg -P leaves the root
# exactly as it was before the install. Needs root.
set -euo pipefail
die() {
  echo "deb_test: FAIL: $*" >&2
  exit 1
}
[[ $# -eq 1 && -f $1 ]] || die "usage: $0 PATH/guestflow_<version>_amd64.deb"
[[ $(id -u) -eq 0 ]] || die "needs root (dpkg and chroot in a fresh root, real guests)"
if [[ -z ${GUESTFLOW_DEB_TEST_NS:-} ]]; then
  # Every mount below dies with this namespace, whatever happens to the script.
  exec unshare --mount --propagation private env GUESTFLOW_DEB_TEST_NS=1 "$0" "$(realpath "$1")"
fi
deb=$1
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${GUESTFLOW_BUILD_DIR:-$repo/build}/packaging
mkdir -p "$cache"

version=$(dpkg-deb -f "$deb" Version)
# Depends as package names (first of each alternative, no version constraints).
include=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -E 's/\|.*//; s/\(.*\)//; s/:any//; s/ //g' |
  grep -v '^$' | sort -u | paste -sd, -)
platform=systemd
key=$(printf '%s' "$platform,$include" | sha256sum | cut -c1-16)
tarball=$cache/bookworm-essential-$key.tar
if [[ ! -f $tarball ]]; then
  echo "deb_test: making the Debian 12 root once (mmdebstrap, essential + $platform + $include)" >&2
  mmdebstrap --quiet --variant=essential --format=tar --include="$platform,$include" bookworm \
    "$tarball.part" >&2
  mv "$tarball.part" "$tarball"
fi

work=$(mktemp -d "$cache/run.XXXXXX")
r=$work/root
cleanup() {
  umount -R "$r" 2>/dev/null || umount -lR "$r" 2>/dev/null || true
  # Never remove through a mount that is still there.
  if findmnt -rn -o TARGET | grep -q "^$r/"; then
    echo "deb_test: mounts left under $r; not removing it" >&2
  else
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT
mkdir "$r"
tar -xf "$tarball" -C "$r"
# The root a mount point of its own, as a real root is (pivot_root needs one).
mount --bind "$r" "$r"
mount -t proc proc "$r/proc"
mount --rbind /sys "$r/sys"
mount --rbind /dev "$r/dev"
mount -t tmpfs tmpfs "$r/run"
mkdir -p "$r/.oldroot"
# A command in the root: pivot_root in a mount namespace of its own, not chroot, because
# the kernel refuses a chrooted process new user namespaces and bwrap needs one for every
# guest. The old root is detached (with its own umount, run from there) before the command.
in_root() {
  unshare --mount --propagation private -- /bin/sh -c '
    cd "$1" && shift && pivot_root . .oldroot &&
      exec /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        /bin/sh -c "/.oldroot/usr/bin/umount -l /.oldroot && exec \"\$@\"" sh "$@"' sh "$r" "$@"
}
snapshot() {
  (cd "$r" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./run \
    -o -path ./tmp -o -path ./var/lib/dpkg -o -path ./var/log -o -path ./var/cache \) -prune \
    -o -print | sort)
}
snapshot >"$work/before"

step() { echo "deb_test: $*" >&2; }
step "dpkg -i $(basename "$deb")"
cp "$deb" "$r/tmp/guestflow.deb"
in_root dpkg -i /tmp/guestflow.deb >"$work/dpkg.log" 2>&1 || {
  cat "$work/dpkg.log" >&2
  die "dpkg -i failed"
}

step "guestflow version"
got=$(in_root guestflow version)
[[ $got == "guestflow $version" ]] || die "guestflow version printed '$got', not 'guestflow $version'"
missing=$(in_root ldd /usr/bin/guestflow | grep 'not found' || true)
[[ -z $missing ]] || die "libraries the package does not depend on: $missing"

step "files"
for f in /usr/bin/guestflow "/usr/share/guestflow/langflow_guestflow-$version-py3-none-any.whl" \
  /lib/systemd/system/guestflow-serve.service /lib/systemd/system/guestflow-control-plane@.service \
  /etc/default/guestflow /usr/share/man/man1/guestflow.1.gz /usr/share/man/man1/guestflow-serve.1.gz \
  /usr/share/man/man1/guestflow-control-plane.1.gz /usr/share/doc/guestflow/README.md; do
  [[ -f $r$f ]] || die "$f is not installed"
done
grep -qx /etc/default/guestflow "$r/var/lib/dpkg/info/guestflow.conffiles" ||
  die "/etc/default/guestflow is not a conffile"
zcat "$r/usr/share/man/man1/guestflow-serve.1.gz" | grep -qF '\-\-listen' ||
  die "guestflow-serve(1) does not describe --listen"
in_root python3 - "/usr/share/guestflow/langflow_guestflow-$version-py3-none-any.whl" <<'PY' ||
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
assert "langflow_guestflow/extension.json" in names, names
assert any(n.endswith(".dist-info/entry_points.txt") for n in names), names
PY
  die "the wheel in /usr/share/guestflow is not the plugin's"

step "guestflow code (a real guest, the embedded control plane in /var/lib/guestflow/test)"
out=$(printf 'import sys\nprint(6 * 7, sys.version_info[0])\n' |
  in_root env GUESTFLOW_STATE_DIR=/var/lib/guestflow/test guestflow code - 2>"$work/code.err") || {
  cat "$work/code.err" >&2
  die "guestflow code failed in the installed root"
}
[[ $out == "42 3" ]] || {
  cat "$work/code.err" >&2
  die "guestflow code printed '$out', not '42 3'"
}

step "systemd-analyze verify"
# The root's systemd-analyze (its units, the binaries they name). --man=no: the root has no
# man(1); the pages the units name are checked above.
in_root systemd-analyze verify --man=no guestflow-serve.service guestflow-control-plane@main.service \
  >"$work/verify.log" 2>&1 || {
  cat "$work/verify.log" >&2
  die "systemd-analyze verify refused the units"
}
if grep -i 'guestflow' "$work/verify.log" >&2; then die "systemd-analyze verify warned about the units"; fi

step "dpkg -r: only the conffile and the state stay"
in_root dpkg -r guestflow >>"$work/dpkg.log" 2>&1 || {
  cat "$work/dpkg.log" >&2
  die "dpkg -r failed"
}
status=$(in_root dpkg-query -W -f='${Status}' guestflow)
[[ $status == "deinstall ok config-files" ]] || die "after dpkg -r the status is '$status'"
snapshot >"$work/removed"
left=$(comm -13 "$work/before" "$work/removed" | grep -v -e '^\./etc/default/guestflow$' \
  -e '^\./var/lib/guestflow\(/.*\)\?$' || true)
[[ -z $left ]] || die "dpkg -r left: $left"
[[ -f $r/etc/default/guestflow ]] || die "dpkg -r removed the conffile"
gone=$(comm -23 "$work/before" "$work/removed")
[[ -z $gone ]] || die "dpkg -r removed what it did not install: $gone"

step "dpkg -P: nothing left"
in_root dpkg -P guestflow >>"$work/dpkg.log" 2>&1 || {
  cat "$work/dpkg.log" >&2
  die "dpkg -P failed"
}
snapshot >"$work/purged"
diff -u "$work/before" "$work/purged" >&2 || die "dpkg -P did not restore the root"
step "ok: $(basename "$deb") installs, runs a guest, verifies, removes and purges cleanly"
