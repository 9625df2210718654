//===- PngDecoder.cpp - PNG files through libpng --------------------------===//
//
// The header (IHDR) is checked here before libpng sees the file, so an
// oversized, empty or 16-bit image is refused before anything is allocated.
// libpng then expands every 8-bit-or-less colour type to RGBA (palette
// lookup, grey replicated and scaled); the alpha it produces from LA or a
// tRNS chunk is overwritten with 255, because Pillow's mode for those is not
// "RGBA" and TRELLIS discards their transparency (spec §6.1). No gamma or
// colour-profile transform is requested. libpng reports errors by longjmp: the
// function that calls setjmp holds only plain data.
//
//===----------------------------------------------------------------------===//
#include "trellis/Image/Image.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

namespace trellis {

namespace {

constexpr int kPngColorRgba = 6;

struct PngInput {
  const unsigned char *data;
  size_t size;
  size_t pos;
};

struct PngErrorState {
  std::jmp_buf jump;
  char message[256];
};

void readBytes(png_structp png, png_bytep out, png_size_t n) {
  auto *in = static_cast<PngInput *>(png_get_io_ptr(png));
  if (n > in->size - in->pos)
    png_error(png, "the file ends early (truncated)");
  std::memcpy(out, in->data + in->pos, n);
  in->pos += n;
}

[[noreturn]] void onError(png_structp png, png_const_charp message) {
  auto *state = static_cast<PngErrorState *>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", message);
  std::longjmp(state->jump, 1);
}

void onWarning(png_structp, png_const_charp) {}

uint32_t bigEndian32(const unsigned char *p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 |
         uint32_t(p[3]);
}

/// Decodes into `rows` (height pointers to width * 4 bytes each); false with
/// state.message set on a libpng error.
bool runLibpng(const unsigned char *data, size_t size, png_bytep *rows,
               size_t rowBytes, PngErrorState &state) {
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, onError, onWarning);
  if (!png) {
    std::snprintf(state.message, sizeof(state.message), "out of memory");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  PngInput input{data, size, 0};
  if (!info || setjmp(state.jump)) {
    png_destroy_read_struct(&png, &info, nullptr);
    if (!info)
      std::snprintf(state.message, sizeof(state.message), "out of memory");
    return false;
  }
  png_set_read_fn(png, &input, readBytes);
  png_read_info(png, info);
  png_set_expand(png);
  png_set_gray_to_rgb(png);
  png_set_filler(png, 0xff, PNG_FILLER_AFTER);
  (void)png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != rowBytes)
    png_error(png, "unexpected row size after expansion to RGBA");
  png_read_image(png, rows);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

} // namespace

Result<RgbaImage> decodePng(const void *data, size_t size,
                            const std::string &what) {
  const auto *bytes = static_cast<const unsigned char *>(data);
  // Signature (8), IHDR length (4), "IHDR" (4), width, height, depth, colour
  // type, compression, filter, interlace (13), CRC (4).
  if (size < 33 || std::memcmp(bytes + 12, "IHDR", 4) != 0)
    return Error{what + ": a truncated or corrupt PNG file (" +
                 std::to_string(size) +
                 " bytes; expected the IHDR header after the signature)"};
  int64_t width = bigEndian32(bytes + 16);
  int64_t height = bigEndian32(bytes + 20);
  int depth = bytes[24], colorType = bytes[25];
  TRELLIS_RETURN_IF_ERROR(checkImageSize(width, height, what));
  if (depth == 16)
    return Error{what + ": a 16-bit PNG, which is not supported yet; save it "
                        "with 8 bits per channel"};
  if (depth != 1 && depth != 2 && depth != 4 && depth != 8)
    return Error{what + ": a corrupt PNG file (bit depth " +
                 std::to_string(depth) + ")"};

  RgbaImage image;
  image.width = width;
  image.height = height;
  image.hasAlpha = colorType == kPngColorRgba;
  image.pixels.resize(size_t(width * height * 4));
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int64_t y = 0; y < height; ++y)
    rows[size_t(y)] = image.pixels.data() + y * width * 4;
  PngErrorState state;
  if (!runLibpng(bytes, size, rows.data(), size_t(width * 4), state))
    return Error{what + ": a truncated or corrupt PNG file (libpng: " +
                 state.message + ")"};
  if (!image.hasAlpha)
    for (size_t i = 3; i < image.pixels.size(); i += 4)
      image.pixels[i] = 255;
  return image;
}

} // namespace trellis
