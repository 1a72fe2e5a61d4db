#!/usr/bin/env python3
"""Fixture helpers for Scripts/make-fixtures (Mach-O files we cannot make with clang + ld64.lld alone).

  sign IN OUT --identifier ID --team TEAM --entitlements PLIST
      Replaces the ad-hoc signature ld64.lld wrote with our own embedded signature: a SuperBlob with a
      CodeDirectory (version 0x20400, SHA-256 page hashes that match the file, identifier, team id),
      an empty requirements set, the XML entitlements blob (0xfade7171), the DER entitlements blob
      (0xfade7172, Apple's CoreEntitlements layout) and an empty CMS wrapper. Not signed by any
      certificate: `codesign --verify` would reject it; the structure is what the reader checks.
  handmade OUT --arch ppc|x86_64
      Writes a small Mach-O from scratch with the commands the linker cannot make for us:
      ppc is big-endian 32-bit (MH_CIGAM) with LC_LAZY_LOAD_DYLIB, LC_LOAD_UPWARD_DYLIB,
      LC_VERSION_MIN_MACOSX, LC_ENCRYPTION_INFO; x86_64 is an MH_EXECUTE with __PAGEZERO, LC_MAIN,
      LC_VERSION_MIN_IPHONEOS and LC_ENCRYPTION_INFO_64 (cryptid 1).
  fat64 OUT IN...
      A FAT_MAGIC_64 universal file (llvm-lipo-14 cannot write one), slices aligned as lipo aligns them.
  copysubtype OBJ FILE
      Copies the object's cpusubtype (arm64e's 0x80000002, x86_64h's 8) into FILE, which ld64.lld-14
      links with the _ALL subtype. Used only on unsigned outputs.
"""
import hashlib, plistlib, struct, sys, uuid as uuidlib

def u32(data, off, e='<'): return struct.unpack_from(e + 'I', data, off)[0]

def load_commands(data):
    magic = u32(data, 0)
    assert magic == 0xfeedfacf, 'sign expects a little-endian 64-bit Mach-O'
    ncmds, sizeofcmds = u32(data, 16), u32(data, 20)
    off = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from('<II', data, off)
        yield cmd, off, size
        off += size

# --- DER entitlements (CoreEntitlements: [APPLICATION 16] { INTEGER 1, [CONTEXT 16] dict }) ---
def der_len(n):
    if n < 0x80: return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, 'big')
    return bytes([0x80 | len(b)]) + b

def der(tag, body): return bytes([tag]) + der_len(len(body)) + body

def der_value(v):
    if isinstance(v, bool): return der(0x01, b'\xff' if v else b'\x00')
    if isinstance(v, int):
        n = max(1, (v.bit_length() + 8) // 8)
        return der(0x02, v.to_bytes(n, 'big', signed=True))
    if isinstance(v, str): return der(0x0c, v.encode())
    if isinstance(v, list): return der(0x30, b''.join(der_value(x) for x in v))
    if isinstance(v, dict):
        return der(0xb0, b''.join(der(0x30, der(0x0c, k.encode()) + der_value(v[k])) for k in sorted(v)))
    raise TypeError(v)

def der_entitlements(plist): return der(0x70, der(0x02, b'\x01') + der_value(plist))

def blob(magic, payload): return struct.pack('>II', magic, 8 + len(payload)) + payload

def superblob(entries):
    count = len(entries)
    offset = 12 + 8 * count
    index, body = b'', b''
    for slot, data in entries:
        index += struct.pack('>II', slot, offset + len(body))
        body += data
    return struct.pack('>III', 0xfade0cc0, 12 + len(index) + len(body), count) + index + body

def code_directory(data, code_limit, identifier, team, special, exec_base, exec_limit, exec_flags):
    page = 4096
    hashes = [hashlib.sha256(data[i:min(i + page, code_limit)]).digest() for i in range(0, code_limit, page)]
    nspecial = max(special) if special else 0
    special_hashes = b''.join(special.get(i, b'\0' * 32) for i in range(nspecial, 0, -1))
    header_size = 88
    ident = identifier.encode() + b'\0'
    team_b = team.encode() + b'\0'
    ident_off = header_size
    team_off = ident_off + len(ident)
    hash_off = team_off + len(team_b) + len(special_hashes)
    length = hash_off + 32 * len(hashes)
    head = struct.pack('>IIIIIIIIIBBBBIIIIQQQQ', 0xfade0c02, length, 0x20400, 0x10000, hash_off, ident_off,
                       nspecial, len(hashes), code_limit, 32, 2, 0, 12, 0, 0, team_off, 0, 0,
                       exec_base, exec_limit, exec_flags)
    assert len(head) == header_size
    return head + ident + team_b + special_hashes + b''.join(hashes)

def sign(args):
    src, out = args[0], args[1]
    opts = dict(zip(args[2::2], args[3::2]))
    data = bytearray(open(src, 'rb').read())
    ents_xml = open(opts['--entitlements'], 'rb').read()
    ents = plistlib.loads(ents_xml)
    is_exec = u32(data, 12) == 2
    sig = linkedit = text = None
    for cmd, off, size in load_commands(data):
        if cmd == 0x1d: sig = off
        if cmd == 0x19:
            name = data[off + 8:off + 24].rstrip(b'\0')
            if name == b'__LINKEDIT': linkedit = off
            if name == b'__TEXT': text = off
    assert linkedit and text
    if sig is None:
        # ld64.lld-14 signs only macOS arm64 output: add an LC_CODE_SIGNATURE in the header padding.
        ncmds, sizeofcmds = u32(data, 16), u32(data, 20)
        first_section = u32(data, text + 72 + 48)
        assert 32 + sizeofcmds + 16 <= first_section, 'no header padding for LC_CODE_SIGNATURE'
        sig = 32 + sizeofcmds
        end = (len(data) + 15) & ~15
        data += b'\0' * (end - len(data))
        struct.pack_into('<IIII', data, sig, 0x1d, 16, end, 0)
        struct.pack_into('<II', data, 16, ncmds + 1, sizeofcmds + 16)
    dataoff = u32(data, sig + 8)
    del data[dataoff:]
    req = blob(0xfade0c01, struct.pack('>I', 0))
    ent = blob(0xfade7171, ents_xml)
    derb = blob(0xfade7172, der_entitlements(ents))
    special = {2: hashlib.sha256(req).digest(), 5: hashlib.sha256(ent).digest(), 7: hashlib.sha256(derb).digest()}
    tfo, tfs = struct.unpack_from('<QQ', data, text + 40)
    def build():
        cd = code_directory(bytes(data), dataoff, opts['--identifier'], opts['--team'], special, tfo, tfs,
                            1 if is_exec else 0)
        return superblob([(0, cd), (2, req), (5, ent), (7, derb), (0x10000, blob(0xfade0b01, b''))])
    size = len(build())
    struct.pack_into('<II', data, sig + 8, dataoff, size)
    lfo = struct.unpack_from('<Q', data, linkedit + 40)[0]
    filesize = dataoff + size - lfo
    struct.pack_into('<QQQ', data, linkedit + 32, (filesize + 0x3fff) & ~0x3fff, lfo, filesize)
    data += build()
    open(out, 'wb').write(data)

# --- hand-made Mach-O files -------------------------------------------------------------------
def lc_str(e, cmd, fixed, text, align):
    s = text.encode() + b'\0'
    size = (8 + len(fixed) + len(s) + align - 1) // align * align
    return struct.pack(e + 'II', cmd, size) + fixed + s + b'\0' * (size - 8 - len(fixed) - len(s))

def handmade(args):
    out, arch = args[0], args[2]
    if arch == 'ppc':
        e, is64, cputype, subtype, filetype, align = '>', False, 18, 10, 6, 4   # ppc7400 dylib
    else:
        e, is64, cputype, subtype, filetype, align = '<', True, 0x01000007, 3 | 0x80000000, 2, 8  # x86_64 exe, LIB64
    W = 'Q' if is64 else 'I'
    hdr = 32 if is64 else 28
    def segment(name, vmaddr, vmsize, fileoff, filesize, prot, sections=()):
        sects = b''
        for sname, addr, size, off in sections:
            sects += struct.pack(e + '16s16s' + W + W + 'IIIIIII' + ('I' if is64 else ''), sname, name, addr, size,
                                 off, 2, 0, 0, 0x80000400, 0, 0, *([0] if is64 else []))
        cmd, base = (0x19, 72) if is64 else (0x1, 56)
        return struct.pack(e + 'II16s' + W * 4 + 'IIII', cmd, base + len(sects), name, vmaddr, vmsize, fileoff,
                           filesize, prot, prot, len(sections), 0) + sects
    def dylib(cmd, name, cur, compat):
        return lc_str(e, cmd, struct.pack(e + 'IIII', 24, 0, cur, compat), name, align)
    V = lambda a, b, c=0: a << 16 | b << 8 | c
    uid = uuidlib.uuid5(uuidlib.NAMESPACE_URL, 'imagelog-fixture-' + arch).bytes
    # Layout: header + commands in the first 0x1000 bytes, __text at 0x1000 (0x20 bytes), file 0x1100 bytes.
    text_off, text_size, file_size = 0x1000, 0x20, 0x1100
    if arch == 'ppc':
        cmds = [
            segment(b'__TEXT', 0, 0x2000, 0, 0x1100, 5, [(b'__text', text_off, text_size, text_off)]),
            struct.pack(e + 'II', 0x1b, 24) + uid,
            dylib(0xd, '/usr/lib/libhandmade.dylib', V(2, 5, 1), V(2, 0, 0)),
            dylib(0xc, '/usr/lib/libSystem.B.dylib', V(88, 1, 2), V(1, 0, 0)),
            dylib(0x20, '/usr/lib/liblazy.dylib', V(1, 0, 0), V(1, 0, 0)),
            dylib(0x23 | 0x80000000, '@loader_path/libupward.dylib', V(3, 0, 0), V(1, 0, 0)),
            lc_str(e, 0x1c | 0x80000000, struct.pack(e + 'I', 12), '@loader_path/../lib', align),
            struct.pack(e + 'IIII', 0x24, 16, V(10, 4, 11), V(10, 5)),
            struct.pack(e + 'IIIII', 0x21, 20, text_off, text_size, 0),
        ]
    else:
        cmds = [
            segment(b'__PAGEZERO', 0, 0x100000000, 0, 0, 0),
            segment(b'__TEXT', 0x100000000, 0x2000, 0, 0x1100, 5,
                    [(b'__text', 0x100000000 + text_off, text_size, text_off)]),
            struct.pack(e + 'II', 0x1b, 24) + uid,
            lc_str(e, 0xe, struct.pack(e + 'I', 12), '/usr/lib/dyld', align),
            struct.pack(e + 'IIQQ', 0x28 | 0x80000000, 24, text_off, 0x80000),
            struct.pack(e + 'IIII', 0x25, 16, V(12, 1), V(13, 2)),
            struct.pack(e + 'IIIIII', 0x2c, 24, text_off, text_size, 1, 0),
            dylib(0xc, '/usr/lib/libSystem.B.dylib', V(1292, 60, 1), V(1, 0, 0)),
            dylib(0x23 | 0x80000000, '/usr/lib/libupward.dylib', V(1, 0, 0), V(1, 0, 0)),
            struct.pack(e + 'II', 0x2a, 16) + struct.pack(e + 'Q', 42 << 40),  # LC_SOURCE_VERSION: stays .other
        ]
    body = b''.join(cmds)
    flags = 0x1 | 0x4 | 0x80 | (0x200000 if is64 else 0)
    header = struct.pack(e + 'IIIIIII', 0xfeedfacf if is64 else 0xfeedface, cputype, subtype, filetype, len(cmds),
                         len(body), flags) + (b'\0' * 4 if is64 else b'')
    data = bytearray(header + body)
    data += b'\0' * (text_off - len(data))
    data += bytes(range(text_size)) + b'\0' * (file_size - text_off - text_size)
    open(out, 'wb').write(data)

# --- 64-bit universal header (llvm-lipo-14 has no -fat64) -------------------------------------------
def fat64(args):
    out, inputs = args[0], [open(p, 'rb').read() for p in args[1:]]
    header_end = 8 + 32 * len(inputs)
    entries, blobs, offset = b'', b'', header_end
    for data in inputs:
        magic = u32(data, 0)
        e = '<' if magic in (0xfeedface, 0xfeedfacf) else '>'
        cputype, subtype = struct.unpack_from(e + 'II', data, 4)
        align = 14 if cputype & 0xff == 12 else 12   # arm: 16 KiB pages, x86: 4 KiB, as lipo does
        start = (offset + (1 << align) - 1) & ~((1 << align) - 1)
        blobs += b'\0' * (start - offset) + data
        entries += struct.pack('>IIQQII', cputype, subtype, start, len(data), align, 0)
        offset = start + len(data)
    open(out, 'wb').write(struct.pack('>II', 0xcafebabf, len(inputs)) + entries + blobs)

# --- ld64.lld-14 writes the _ALL subtype for arm64e and x86_64h: copy the object's (with its caps) ---
def copysubtype(args):
    obj, target = open(args[0], 'rb').read(), bytearray(open(args[1], 'rb').read())
    assert u32(obj, 0) == u32(target, 0) == 0xfeedfacf
    target[8:12] = obj[8:12]
    open(args[1], 'wb').write(target)

if __name__ == '__main__':
    {'copysubtype': copysubtype, 'sign': sign, 'handmade': handmade, 'fat64': fat64}[sys.argv[1]](sys.argv[2:])
