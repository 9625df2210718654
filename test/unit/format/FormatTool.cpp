//===- FormatTool.cpp - trellis-format-tool: a test helper ----------------===//
//
// Drives the format library from the command line so the Python tests can
// check it against NumPy:
//
//   trellis-format-tool info FILE
//       one line per tensor: NAME<TAB>DTYPE<TAB>DIMS<TAB>CRC32
//       (NAME "-" for a .npy; DIMS comma-separated, empty for a scalar;
//       CRC32 of the raw little-endian bytes, 8 hex digits, as zlib.crc32)
//   trellis-format-tool convert IN OUT [--stored | --compressed]
//       reads .npy/.npz/.safetensors, writes .npy (one tensor), .npz
//       (stored unless --compressed) or .safetensors
//   trellis-format-tool synth OUT.safetensors COUNT ELEMENTS DTYPE
//       streams COUNT tensors "t.<i>" of ELEMENTS elements each (a byte
//       pattern) through writeSafetensors (used to check its memory use)
//
// Errors go to stderr with exit status 1.
//
//===----------------------------------------------------------------------===//
#include "trellis/Format/Npy.h"
#include "trellis/Format/Safetensors.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <zlib.h>

using namespace trellis;

namespace {

bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

Result<NamedTensors> load(const std::string &path) {
  if (endsWith(path, ".npy")) {
    auto t = readNpy(path);
    if (!t)
      return t.takeError();
    return NamedTensors{{"-", std::move(t).value()}};
  }
  if (endsWith(path, ".npz"))
    return readNpz(path);
  if (endsWith(path, ".safetensors")) {
    auto f = SafetensorsFile::open(path);
    if (!f)
      return f.takeError();
    NamedTensors out;
    for (const auto &e : (*f)->entries())
      out.emplace_back(e.name, (*f)->tensor(e));
    return out;
  }
  return Error{"'" + path + "': unknown extension (.npy, .npz, .safetensors)"};
}

uint32_t crc32Of(const HostTensor &t) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const Bytef *p = static_cast<const Bytef *>(t.raw());
  size_t left = t.nbytes();
  while (left) {
    uInt chunk = left > (1u << 30) ? (1u << 30) : uInt(left);
    crc = crc32(crc, p, chunk);
    p += chunk;
    left -= chunk;
  }
  return uint32_t(crc);
}

int fail(const std::string &msg) {
  std::fprintf(stderr, "trellis-format-tool: %s\n", msg.c_str());
  return 1;
}

int info(const std::string &path) {
  auto tensors = load(path);
  if (!tensors)
    return fail(tensors.message());
  for (const auto &[name, t] : *tensors) {
    std::string dims;
    for (int i = 0; i < t.rank(); ++i) {
      if (i)
        dims += ',';
      dims += std::to_string(t.dim(i));
    }
    std::printf("%s\t%s\t%s\t%08x\n", name.c_str(),
                std::string(dtypeName(t.dtype())).c_str(), dims.c_str(),
                crc32Of(t));
  }
  return 0;
}

int convert(const std::string &in, const std::string &out, bool compress) {
  auto tensors = load(in);
  if (!tensors)
    return fail(tensors.message());
  Status st;
  if (endsWith(out, ".npy")) {
    if (tensors->size() != 1)
      return fail("'" + in + "' has " + std::to_string(tensors->size()) +
                  " tensors; a .npy holds one");
    st = writeNpy(out, tensors->front().second);
  } else if (endsWith(out, ".npz")) {
    st = writeNpz(out, *tensors, compress);
  } else if (endsWith(out, ".safetensors")) {
    std::vector<TensorSpec> specs;
    for (const auto &[name, t] : *tensors)
      specs.push_back({name, t.dtype(), t.shape()});
    st = writeSafetensors(out, specs, [&](size_t i, void *dst) {
      const HostTensor &t = (*tensors)[i].second;
      if (t.nbytes())
        std::memcpy(dst, t.raw(), t.nbytes());
    });
  } else {
    return fail("'" + out + "': unknown extension (.npy, .npz, .safetensors)");
  }
  return st ? 0 : fail(st.message());
}

int synth(const std::string &out, long count, long elements,
          const std::string &dtype) {
  auto dt = parseDTypeName(dtype);
  if (!dt || count < 0 || elements < 0)
    return fail("synth: bad arguments");
  std::vector<TensorSpec> specs;
  for (long i = 0; i < count; ++i)
    specs.push_back({"t." + std::to_string(i), *dt, {elements}});
  Status st = writeSafetensors(out, specs, [&](size_t i, void *dst) {
    size_t n = size_t(elements) * dtypeSize(*dt);
    auto *p = static_cast<uint8_t *>(dst);
    for (size_t k = 0; k < n; ++k)
      p[k] = uint8_t(i * 131 + k * 7);
  });
  return st ? 0 : fail(st.message());
}

int usage() {
  std::fprintf(stderr, "usage: trellis-format-tool info FILE\n"
                       "       trellis-format-tool convert IN OUT [--stored | "
                       "--compressed]\n"
                       "       trellis-format-tool synth OUT.safetensors COUNT "
                       "ELEMENTS DTYPE\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    return usage();
  std::string cmd = argv[1];
  if (cmd == "info" && argc == 3)
    return info(argv[2]);
  if (cmd == "convert" && (argc == 4 || argc == 5)) {
    bool compress = false;
    if (argc == 5) {
      std::string flag = argv[4];
      if (flag == "--compressed")
        compress = true;
      else if (flag != "--stored")
        return usage();
    }
    return convert(argv[2], argv[3], compress);
  }
  if (cmd == "synth" && argc == 6)
    return synth(argv[2], std::atol(argv[3]), std::atol(argv[4]), argv[5]);
  return usage();
}
