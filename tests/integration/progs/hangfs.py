#!/usr/bin/env python3
"""hangfs: a FUSE filesystem that never answers root.

    hangfs.py MOUNTPOINT UID GID [FILE]
                                     (run as root) mount it on MOUNTPOINT for user UID:GID,
                                     allow_other, print "READY", serve until killed; with
                                     FILE, its content is served as MOUNTPOINT/lib.so

An empty directory to everyone but root: a lookup is answered "no such file", the root
directory's attributes are given. A request root makes (uid 0) is read and never answered: the
process that made it waits until the daemon dies, as it would on an attacker's daemon (a user
may mount FUSE with allow_other where /etc/fuse.conf has user_allow_other). Killing the daemon
ends the connection: every waiting request then fails with ENOTCONN.

It speaks the kernel's protocol on /dev/fuse itself (linux/fuse.h), so the tests need no FUSE
library.
"""
import ctypes
import os
import struct
import sys

FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR, FUSE_STATFS = 1, 2, 3, 17
FUSE_OPEN, FUSE_READ, FUSE_RELEASE, FUSE_FLUSH = 14, 15, 18, 25
FUSE_INIT, FUSE_INTERRUPT, FUSE_DESTROY, FUSE_BATCH_FORGET = 26, 36, 38, 42
NO_REPLY = (FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT)
IN_HEADER = struct.Struct("<IIQQIIIHH")   # len, opcode, unique, nodeid, uid, gid, pid, extlen, pad
OUT_HEADER = struct.Struct("<IiQ")        # len, error, unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")  # struct fuse_attr


def reply(fd, unique, error=0, body=b""):
    os.write(fd, OUT_HEADER.pack(OUT_HEADER.size + len(body), error, unique) + body)


def root_attr(uid, gid):
    return ATTR.pack(1, 0, 0, 0, 0, 0, 0, 0, 0, 0o40755, 2, uid, gid, 0, 4096, 0)


def file_attr(size, uid, gid):
    return ATTR.pack(2, size, (size + 511) // 512, 0, 0, 0, 0, 0, 0, 0o100755, 1, uid, gid, 0,
                     4096, 0)


def main():
    mnt, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    data = open(sys.argv[4], "rb").read() if len(sys.argv) > 4 else None
    fd = os.open("/dev/fuse", os.O_RDWR)
    libc = ctypes.CDLL(None, use_errno=True)
    opts = "fd=%d,rootmode=40000,user_id=%d,group_id=%d,allow_other" % (fd, uid, gid)
    if libc.mount(b"hangfs", mnt.encode(), b"fuse.hangfs", 0, opts.encode()) != 0:
        e = ctypes.get_errno()
        sys.exit("hangfs: mount %s: %s" % (mnt, os.strerror(e)))
    print("READY", flush=True)
    while True:
        try:
            req = os.read(fd, 1 << 20)
        except OSError:
            return  # unmounted
        if len(req) < IN_HEADER.size:
            return
        _, op, unique, node, ruid, _, _, _, _ = IN_HEADER.unpack_from(req)
        if op in NO_REPLY:
            continue
        if op == FUSE_INIT:
            major, minor = struct.unpack_from("<II", req, IN_HEADER.size)
            # major, minor, max_readahead, flags, max_background, congestion_threshold,
            # max_write, time_gran, max_pages, map_alignment, flags2, unused[7]
            body = struct.pack("<IIIIHHIIHHI7I", 7, min(minor, 31), 0, 0, 16, 12, 65536, 1,
                               0, 0, 0, *([0] * 7))
            reply(fd, unique, 0, body)
            continue
        if op == FUSE_DESTROY:
            reply(fd, unique)
            return
        if ruid == 0:
            continue  # root waits for ever
        if op == FUSE_GETATTR and node == 1:
            reply(fd, unique, 0, struct.pack("<QII", 0, 0, 0) + root_attr(uid, gid))
        elif op == FUSE_STATFS:
            reply(fd, unique, 0, struct.pack("<QQQQQIIII6I", 0, 0, 0, 0, 0, 4096, 255, 4096,
                                             0, *([0] * 6)))
        elif data is not None and op == FUSE_LOOKUP and req[IN_HEADER.size:].split(b"\0")[0] \
                == b"lib.so":
            # nodeid, generation, entry_valid, attr_valid (0: asked again each time), nsecs
            reply(fd, unique, 0, struct.pack("<QQQQII", 2, 0, 0, 0, 0, 0)
                  + file_attr(len(data), uid, gid))
        elif data is not None and op == FUSE_GETATTR and node == 2:
            reply(fd, unique, 0, struct.pack("<QII", 0, 0, 0) + file_attr(len(data), uid, gid))
        elif data is not None and op == FUSE_OPEN and node == 2:
            reply(fd, unique, 0, struct.pack("<QII", 0, 0, 0))
        elif data is not None and op == FUSE_READ and node == 2:
            _, off, size = struct.unpack_from("<QQI", req, IN_HEADER.size)
            reply(fd, unique, 0, data[off:off + size])
        elif op in (FUSE_RELEASE, FUSE_FLUSH):
            reply(fd, unique)
        elif op == FUSE_LOOKUP:
            reply(fd, unique, -2)  # ENOENT
        else:
            reply(fd, unique, -38)  # ENOSYS


if __name__ == "__main__":
    main()
