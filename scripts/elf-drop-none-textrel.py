#!/usr/bin/env python3
"""Drops a spurious DT_TEXTREL from a riscv64 ELF executable, in place.

GNU ld for riscv64 (bookworm's binutils 2.40) sizes .rela.dyn early and pads what it did
not need with R_RISCV_NONE relocations at offset 0 (sourceware bugs 24673, 24676). Offset
0 lies in the first, read-only and executable, segment, so ld marks the file DT_TEXTREL,
and glibc's loader then makes that segment writable before relocating: systemd's
MemoryDenyWriteExecute=yes (the controller's unit) refuses it ("cannot make segment
writable for relocation: Permission denied"). R_RISCV_NONE does nothing, so the flag is
spurious when every dynamic relocation that falls in a read-only segment is R_RISCV_NONE:
then this removes DT_TEXTREL (and DF_TEXTREL from DT_FLAGS). Any other relocation in a
read-only segment is a real text relocation: the file is left alone and the exit status
is 1, naming it.

Usage: elf-drop-none-textrel.py FILE...
"""
import struct
import sys

PT_LOAD, PT_DYNAMIC = 1, 2
PF_W = 2
DT_NULL, DT_RELA, DT_RELASZ, DT_TEXTREL, DT_FLAGS, DT_JMPREL, DT_PLTRELSZ = 0, 7, 8, 22, 30, 23, 2
DF_TEXTREL = 4
EM_RISCV, R_RISCV_NONE = 243, 0


def fix(path):
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            return f"{path}: not a little-endian ELF64 file"
        (machine,) = struct.unpack_from("<H", data, 18)
        if machine != EM_RISCV:
            return f"{path}: not a riscv64 file (e_machine {machine})"
        phoff, = struct.unpack_from("<Q", data, 32)
        phentsize, phnum = struct.unpack_from("<HH", data, 54)
        loads, dyn = [], None
        for i in range(phnum):
            p_type, p_flags, p_offset, p_vaddr, _, p_filesz, p_memsz, _ = struct.unpack_from(
                "<IIQQQQQQ", data, phoff + i * phentsize)
            if p_type == PT_LOAD:
                loads.append((p_vaddr, p_vaddr + p_memsz, p_flags, p_offset))
            elif p_type == PT_DYNAMIC:
                dyn = (p_offset, p_filesz)
        if dyn is None:
            return None  # static: nothing to do
        entries = [struct.unpack_from("<qQ", data, dyn[0] + 16 * i) for i in range(dyn[1] // 16)]
        tags = dict((t, v) for t, v in entries if t != DT_NULL)
        if DT_TEXTREL not in tags and not tags.get(DT_FLAGS, 0) & DF_TEXTREL:
            return None

        def file_offset(vaddr):
            for start, end, _, off in loads:
                if start <= vaddr < end:
                    return off + vaddr - start
            raise ValueError(f"address {vaddr:#x} is in no segment")

        def read_only(vaddr):
            return any(start <= vaddr < end and not flags & PF_W for start, end, flags, _ in loads)

        for table, size in ((DT_RELA, DT_RELASZ), (DT_JMPREL, DT_PLTRELSZ)):
            if table not in tags:
                continue
            base = file_offset(tags[table])
            for i in range(tags[size] // 24):
                r_offset, r_info, _ = struct.unpack_from("<QQq", data, base + 24 * i)
                if read_only(r_offset) and r_info & 0xFFFFFFFF != R_RISCV_NONE:
                    return (f"{path}: a real text relocation (type {r_info & 0xFFFFFFFF} at "
                            f"{r_offset:#x}): left as it is")
        kept = [(t, v) for t, v in entries if t != DT_TEXTREL]
        kept = [(t, v & ~DF_TEXTREL if t == DT_FLAGS else v) for t, v in kept]
        kept += [(DT_NULL, 0)] * (len(entries) - len(kept))
        for i, (t, v) in enumerate(kept):
            struct.pack_into("<qQ", data, dyn[0] + 16 * i, t, v)
        f.seek(0)
        f.write(data)
    return None


def main():
    errors = [e for e in (fix(p) for p in sys.argv[1:]) if e]
    for e in errors:
        print(f"elf-drop-none-textrel: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
