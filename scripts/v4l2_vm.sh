#!/usr/bin/env bash
# A real V4L2 camera for ffdesk's camera code, on a machine that has none: Debian's kernel with
# its vivid driver (the kernel's virtual video test driver: a capture node offering many pixel
# formats, sizes and per-size frame rates, beside output, metadata and radio nodes, as real
# devices do) booted in QEMU, with this machine's own root filesystem shared into it (9p), so the
# project and its .venv run there unchanged.
#
#   bash scripts/v4l2_vm.sh make KIT                    # once: kernel, modules, busybox -> KIT
#   bash scripts/v4l2_vm.sh run KIT SCRIPT [SECONDS]    # boot, load vivid, run `bash SCRIPT`
#
# `make` fetches Debian packages with apt-get (linux-image-amd64's kernel, busybox-static, and the
# kernel's headers and v4l2loopback-dkms, to build the virtual camera's module, loaded in the VM
# as /dev/video10 with exclusive_caps=1) and needs qemu-system-x86, kmod, cpio, gcc and make
# (apt-get install -y qemu-system-x86 kmod cpio).
# `run` boots the kernel under QEMU's own emulation (KVM inside this sandbox hangs at boot): about 10 s,
# Python several times slower than here), loads vivid with $VIVID_ARGS (default: its own
# defaults, one instance), then runs SCRIPT as root in a chroot of this machine's / with /dev,
# /proc and /sys of the guest, from the folder `run` was called in. It prints what SCRIPT
# printed and exits with SCRIPT's exit status (124: it ran past SECONDS, default 600).
#
# Used by tests/media/test_v4l2_device.py (they skip where no vivid device is present):
#   bash scripts/v4l2_vm.sh run /tmp/v4l2-kit tests/media/v4l2_in_vm.sh
set -uo pipefail

usage() { echo "usage: bash scripts/v4l2_vm.sh make KIT | run KIT SCRIPT [SECONDS]" >&2; exit 2; }
[ $# -ge 2 ] || usage
VERB=$1
KIT=$(mkdir -p "$2" && cd "$2" && pwd) || exit 2

if [ "$VERB" = make ]; then
    for tool in qemu-system-x86_64 depmod cpio apt-get dpkg-deb gcc make; do
        command -v "$tool" >/dev/null || { echo "v4l2_vm: $tool is missing (apt-get install -y qemu-system-x86 kmod cpio)"; exit 2; }
    done
    cd "$KIT" || exit 2
    IMAGE=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
    [ -n "$IMAGE" ] || { echo "v4l2_vm: no linux-image-amd64 in apt's lists (apt-get update)"; exit 2; }
    rm -rf pkgs root initrd && mkdir -p pkgs root initrd
    (cd pkgs && apt-get download "$IMAGE" busybox-static) >/dev/null 2>&1 \
        || { echo "v4l2_vm: apt-get download $IMAGE busybox-static failed"; exit 2; }
    for deb in pkgs/*.deb; do dpkg-deb -x "$deb" root; done
    VERSION=$(ls root/lib/modules | head -n 1)
    # v4l2loopback (the virtual camera's device), built against the kernel's own headers
    (cd pkgs && apt-get download "linux-headers-$VERSION" "linux-headers-${VERSION%-amd64}-common" \
        "linux-kbuild-$(echo "$VERSION" | cut -d. -f1,2)" v4l2loopback-dkms) >/dev/null 2>&1 \
        || { echo "v4l2_vm: apt-get download of the kernel headers or v4l2loopback-dkms failed"; exit 2; }
    mkdir -p headers && for deb in pkgs/linux-headers-* pkgs/linux-kbuild-* pkgs/v4l2loopback-*; do dpkg-deb -x "$deb" headers; done
    sed -i "s#/usr/src/#$KIT/headers/usr/src/#" "headers/usr/src/linux-headers-$VERSION/Makefile"
    LOOP=$(ls -d headers/usr/src/v4l2loopback-*)
    make -s -C "headers/usr/src/linux-headers-$VERSION" M="$KIT/$LOOP" modules >/dev/null 2>&1 \
        || { echo "v4l2_vm: building v4l2loopback failed (gcc and make are needed)"; exit 2; }
    cp root/boot/vmlinuz-"$VERSION" vmlinuz
    depmod -b "$KIT/root" "$VERSION"
    MODS=lib/modules/$VERSION
    mkdir -p initrd/bin initrd/proc initrd/sys initrd/dev initrd/host "initrd/$MODS"
    cp root/bin/busybox initrd/bin/
    cp root/"$MODS"/modules.* "initrd/$MODS/"
    mkdir -p initrd/extra && cp "$LOOP/v4l2loopback.ko" initrd/extra/
    for module in virtio_pci 9pnet_virtio 9p vivid; do
        line=$(grep -E "/$module\.ko(\.[a-z]+)?:" "root/$MODS/modules.dep")
        for file in $(echo "$line" | tr -d ':'); do
            mkdir -p "initrd/$MODS/$(dirname "$file")"
            cp "root/$MODS/$file" "initrd/$MODS/$file"
        done
    done
    cat > initrd/init <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^$1=//p" | tr ',' ' '; }
KIT=$(arg ffdesk.kit)
WHERE=$(arg ffdesk.cwd)
for m in virtio_pci 9pnet_virtio 9p; do modprobe $m; done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576 host /host
modprobe vivid $(cat "/host$KIT/vivid.args" 2>/dev/null)
# a virtual camera's device as its users set it up: /dev/video10, a capture node once written to
insmod /extra/v4l2loopback.ko video_nr=10 card_label=VirtualCam exclusive_caps=1
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -o bind /dev /host/dev
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
# a file deleted while open cannot be truncated over 9p: temporary files go to the guest's memory
chroot /host /bin/bash -c "cd '$WHERE' && TMPDIR=/dev/shm exec bash '$KIT/script.sh'" > "/host$KIT/out.log" 2>&1
echo $? > "/host$KIT/rc"
sync
poweroff -f
EOF
    chmod +x initrd/init
    (cd initrd && find . | cpio -o -H newc 2>/dev/null | gzip -1) > initrd.gz
    rm -rf pkgs root initrd headers
    echo "v4l2_vm: kit made in $KIT (kernel $VERSION)"
    exit 0
fi

[ "$VERB" = run ] && [ $# -ge 3 ] || usage
SCRIPT=$3
SECONDS_LIMIT=${4:-600}
[ -f "$KIT/vmlinuz" ] && [ -f "$KIT/initrd.gz" ] || { echo "v4l2_vm: no kit in $KIT (bash scripts/v4l2_vm.sh make $KIT)"; exit 2; }
[ -f "$SCRIPT" ] || { echo "v4l2_vm: $SCRIPT not found"; exit 2; }
cp "$SCRIPT" "$KIT/script.sh"
printf '%s\n' "${VIVID_ARGS:-}" > "$KIT/vivid.args"
rm -f "$KIT/out.log" "$KIT/rc"
case "$KIT$PWD" in *" "*|*,*) echo "v4l2_vm: the kit's and this folder's paths may not hold spaces or commas"; exit 2;; esac
APPEND="console=ttyS0 quiet panic=-1 ffdesk.kit=$KIT ffdesk.cwd=$PWD"
ACCEL=(-accel tcg,thread=multi -cpu max)
timeout "$SECONDS_LIMIT" qemu-system-x86_64 "${ACCEL[@]}" -smp 2 -m 4G -nographic -no-reboot \
    -kernel "$KIT/vmlinuz" -initrd "$KIT/initrd.gz" -append "$APPEND" \
    -virtfs local,path=/,mount_tag=host,security_model=passthrough,id=host,multidevs=remap \
    > "$KIT/qemu.log" 2>&1
status=$?
cat "$KIT/out.log" 2>/dev/null
if [ "$status" = 124 ]; then echo "v4l2_vm: ran past ${SECONDS_LIMIT} s"; exit 124; fi
[ -f "$KIT/rc" ] || { echo "v4l2_vm: the guest did not finish (QEMU's log: $KIT/qemu.log)"; exit 1; }
exit "$(cat "$KIT/rc")"
