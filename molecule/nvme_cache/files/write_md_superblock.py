#!/usr/bin/env python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write an md v1.2 superblock onto disks, without the kernel's md driver (which the lab's kernel lacks).

Test data for the nvme_cache scenario: it makes a disk look exactly like a member of an mdadm array to blkid,
wipefs and `mdadm --examine` (which reports the checksum as correct), so that the role's RAID-member refusal
and array adoption read real on-disk superblocks. The array is never assembled. Layout: struct
mdp_superblock_1 of linux/raid/md_p.h, 4 KiB from the start of the disk, checksum as mdadm's calc_sb_1_csum.

Usage: write_md_superblock.py --name HOST:NAME --array-uuid UUID --raid-disks N [--level 0] DISK [DISK...]
(the disks get roles 0, 1, ... in that order).
"""
import argparse
import os
import struct
import time
import uuid

SUPERBLOCK_OFFSET = 4096
MAGIC = 0xA92B4EFC
MAX_DEVICES = 128
DATA_OFFSET_SECTORS = 2048


def checksum(superblock):
    words = struct.unpack("<%dI" % (len(superblock) // 4), superblock)
    total = sum(words)
    return ((total & 0xFFFFFFFF) + (total >> 32)) & 0xFFFFFFFF


def superblock(array_uuid, name, level, raid_disks, role, device_uuid, sectors, chunk_sectors, now):
    data_size = sectors - DATA_OFFSET_SECTORS
    block = bytearray(256 + MAX_DEVICES * 2)
    struct.pack_into("<III", block, 0, MAGIC, 1, 0)
    block[16:32] = array_uuid
    block[32:64] = name.encode()[:32].ljust(32, b"\0")
    struct.pack_into("<QiiQII", block, 64, now, level, 0, data_size, chunk_sectors, raid_disks)
    struct.pack_into("<QQQQII", block, 128, DATA_OFFSET_SECTORS, data_size, SUPERBLOCK_OFFSET // 512, 0, role, 0)
    block[168:184] = device_uuid
    struct.pack_into("<QQQ", block, 192, now, 1, 0xFFFFFFFFFFFFFFFF)
    struct.pack_into("<I", block, 220, MAX_DEVICES)
    for slot in range(MAX_DEVICES):
        struct.pack_into("<H", block, 256 + 2 * slot, slot if slot < raid_disks else 0xFFFF)
    struct.pack_into("<I", block, 216, checksum(bytes(block)))
    return bytes(block)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--array-uuid", required=True)
    parser.add_argument("--raid-disks", type=int, required=True)
    parser.add_argument("--level", type=int, default=0)
    parser.add_argument("--chunk-kib", type=int, default=512)
    parser.add_argument("disks", nargs="+")
    args = parser.parse_args()
    now = int(time.time())
    for role, disk in enumerate(args.disks):
        descriptor = os.open(disk, os.O_RDWR)
        try:
            sectors = os.lseek(descriptor, 0, os.SEEK_END) // 512
            block = superblock(
                uuid.UUID(args.array_uuid).bytes, args.name, args.level, args.raid_disks, role, uuid.uuid4().bytes, sectors, args.chunk_kib * 2, now
            )
            os.pwrite(descriptor, block, SUPERBLOCK_OFFSET)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


if __name__ == "__main__":
    main()
