#!/bin/sh
# Turns the extracted Debian packages (base-packages.txt) at $1 into the images' base root filesystem:
# no awk (base-files pre-depends on it; nothing at run time runs it), no apt/dpkg state (nothing is ever
# installed into the image), no documentation but the copyright files, no glibc iconv modules (Node.js
# converts text with its bundled ICU), and the image users. Run by build.sh (on what mmdebstrap extracted)
# and by both Dockerfiles, so the two ways of building give the same files. POSIX sh: the Dockerfiles' build
# stage runs it with dash.
set -eu
root=$1
[ -f "$root/usr/lib/x86_64-linux-gnu/libstdc++.so.6" ] || { echo "finish-rootfs: $root is not the extracted base" >&2; exit 1; }
rm -f "$root/usr/bin/mawk" "$root/usr/bin/awk" "$root/usr/bin/nawk" "$root/etc/alternatives/"*awk*
rm -rf "$root/etc/apt" "$root/var/lib/apt" "$root/var/cache/apt" "$root/var/lib/dpkg" "$root/etc/dpkg" \
  "$root/usr/share/man" "$root/usr/share/info" "$root/usr/share/lintian" "$root/usr/share/gdb" \
  "$root/usr/share/locale" "$root/usr/lib/x86_64-linux-gnu/gconv" "$root/etc/update-motd.d" "$root/etc/profile.d"
find "$root/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
find "$root/var/log" -mindepth 1 -delete
# The users the images run as (numeric in the image config, so that runAsNonRoot can check them); the
# entries make os.userInfo() and HOME work. 65532 is distroless's nonroot, which the chart runs the
# controller and the forwarder as; 10001 is the sidecar's, as the example job sets.
cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin
sidecar:x:10001:10001:sidecar:/home/sidecar:/usr/sbin/nologin
PASSWD
cat >"$root/etc/group" <<'GROUP'
root:x:0:
nogroup:x:65534:
nonroot:x:65532:
sidecar:x:10001:
GROUP
# Homes owned by root like everything else (the root filesystem is read-only at run time anyway), and the
# mount points a runtime needs: on a read-only root filesystem it cannot create them.
mkdir -p "$root/home/nonroot" "$root/home/sidecar" "$root/tmp" "$root/dev" "$root/proc" "$root/sys" "$root/run"
chmod 1777 "$root/tmp"
