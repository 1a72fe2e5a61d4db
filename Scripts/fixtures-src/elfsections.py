#!/usr/bin/env python3
"""Section header edits for Scripts/make-hostile-fixtures (little-endian ELF64 only): the broken
headers a hostile or damaged file has, which no linker or objcopy writes.

  past-end FILE SECTION
      Moves SECTION's contents (its sh_offset) to 4096 bytes past the end of the file; the bytes stay
      where they were, no longer pointed to.
  alias FILE SOURCE COUNT NAME...
      Appends COUNT section headers that copy SOURCE's (type, flags, offset, size: the same bytes),
      named in turn by the NAMEs (each must already name a section: its sh_name is reused). The section
      header table is written anew at the end of the file with them.
"""
import struct, sys

def headers(data):
    shoff, = struct.unpack_from('<Q', data, 0x28)
    entsize, count, names_index = struct.unpack_from('<HHH', data, 0x3a)
    assert data[:4] == b'\x7fELF' and data[4] == 2 and data[5] == 1, 'little-endian ELF64 expected'
    table = [bytearray(data[shoff + i * entsize:shoff + (i + 1) * entsize]) for i in range(count)]
    names_offset, = struct.unpack_from('<Q', table[names_index], 0x18)
    def name(entry):
        start = names_offset + struct.unpack_from('<I', entry, 0)[0]
        return data[start:data.index(b'\0', start)].decode()
    return shoff, entsize, table, [name(entry) for entry in table]

def find(names, wanted):
    assert wanted in names, f'no section {wanted}'
    return names.index(wanted)

def main():
    command, path = sys.argv[1], sys.argv[2]
    data = bytearray(open(path, 'rb').read())
    shoff, entsize, table, names = headers(data)
    if command == 'past-end':
        entry = table[find(names, sys.argv[3])]
        struct.pack_into('<Q', entry, 0x18, len(data) + 4096)
        data[shoff:shoff + entsize * len(table)] = b''.join(table)
    elif command == 'alias':
        source = table[find(names, sys.argv[3])]
        count, aliases = int(sys.argv[4]), sys.argv[5:]
        for i in range(count):
            entry = bytearray(source)
            entry[0:4] = table[find(names, aliases[i % len(aliases)])][0:4]
            table.append(entry)
        while len(data) % 8: data.append(0)
        struct.pack_into('<Q', data, 0x28, len(data))
        struct.pack_into('<H', data, 0x3c, len(table))
        data += b''.join(table)
    else:
        sys.exit(f'elfsections.py: unknown command {command}')
    open(path, 'wb').write(data)

main()
