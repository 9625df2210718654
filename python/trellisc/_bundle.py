"""The bundle container (include/trellis/Runtime/Bundle.h), read and written
in Python so an Executable can keep its parameters and signature with it."""
import struct
import zlib

MAGIC = b"TRELLISB"
VERSION = 1
_HEADER, _ENTRY, _NAME = 24, 56, 32


def parse(data):
    """{section name: bytes}; checks magic, version and CRCs."""
    data = bytes(data)
    if len(data) < _HEADER or data[:8] != MAGIC:
        raise ValueError("not a trellis bundle (bad magic)")
    version, count, table_crc, _ = struct.unpack_from("<IIII", data, 8)
    if version != VERSION:
        raise ValueError(f"bundle format version {version}, expected {VERSION}")
    table = data[_HEADER : _HEADER + _ENTRY * count]
    if zlib.crc32(table) != table_crc:
        raise ValueError("the bundle's section table is corrupt (CRC mismatch)")
    sections = {}
    for i in range(count):
        raw = table[i * _ENTRY : (i + 1) * _ENTRY]
        name = raw[:_NAME].rstrip(b"\0").decode()
        offset, size, crc, _ = struct.unpack_from("<QQII", raw, _NAME)
        payload = data[offset : offset + size]
        if len(payload) != size or zlib.crc32(payload) != crc:
            raise ValueError(f"bundle section '{name}' is corrupt")
        sections[name] = payload
    return sections


def serialize(sections):
    """Bytes of a bundle holding `sections` ({name: bytes}), in order."""
    items = list(sections.items())
    offset = _HEADER + _ENTRY * len(items)
    table, offsets = b"", []
    for name, payload in items:
        offset = (offset + 7) & ~7
        offsets.append(offset)
        table += name.encode()[: _NAME - 1].ljust(_NAME, b"\0")
        table += struct.pack("<QQII", offset, len(payload), zlib.crc32(payload), 0)
        offset += len(payload)
    out = bytearray(MAGIC + struct.pack("<IIII", VERSION, len(items), zlib.crc32(table), 0))
    out += table
    for (name, payload), off in zip(items, offsets):
        out += b"\0" * (off - len(out))
        out += payload
    return bytes(out)


def safetensors_bytes(tensors):
    """A safetensors file image of {name: array}."""
    import json

    codes = {"float32": "F32", "float16": "F16", "int32": "I32", "int64": "I64", "uint8": "U8"}
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        raw = a.tobytes()
        header[name] = {
            "dtype": codes[a.dtype.name],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return len(h).to_bytes(8, "little") + h + b"".join(blobs)


def read_safetensors_bytes(data):
    import json
    import numpy as np

    codes = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "U8": np.uint8}
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = (
            np.frombuffer(data[8 + n + b : 8 + n + end], dtype=codes[e["dtype"]]).reshape(e["shape"]).copy()
        )
    return out
