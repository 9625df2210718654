//===- JpegDecoder.cpp - JPEG files through libjpeg-turbo -----------------===//
//
// libjpeg-turbo with its default decompression settings (islow DCT, fancy
// upsampling), which is how Pillow decodes; greyscale and YCbCr come out as
// RGB (grey replicated, as Pillow's convert('RGB') does), alpha is 255.
// CMYK and YCCK files are refused. A file that ends early is an error (libjpeg
// would only warn and fill the rest with grey; Pillow refuses it too). libjpeg
// reports errors by longjmp: the function that calls setjmp holds only plain
// data.
//
//===----------------------------------------------------------------------===//
#include "trellis/Image/Image.h"

#include <cstdio> // before jpeglib.h, which uses FILE

#include <jerror.h>
#include <jpeglib.h>

#include <csetjmp>
#include <cstring>

namespace trellis {

namespace {

struct JpegErrorState {
  jpeg_error_mgr manager; // first: libjpeg's err points here
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void onError(j_common_ptr cinfo) {
  auto *state = reinterpret_cast<JpegErrorState *>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, state->message);
  std::longjmp(state->jump, 1);
}

void onMessage(j_common_ptr cinfo, int level) {
  // A premature end of the data is an error for us; other warnings (and
  // trace messages) are ignored, as Pillow ignores them.
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF)
    onError(cinfo);
}

enum class JpegStep { Ok, Corrupt, Header, Unsupported };

struct JpegHeader {
  int64_t width = 0;
  int64_t height = 0;
  J_COLOR_SPACE colorSpace = JCS_UNKNOWN;
};

/// Reads the header into `header`, asks `accept` whether to go on, then
/// decodes into `pixels` (resized by `allocate`). Only plain data here.
JpegStep runLibjpeg(const unsigned char *data, size_t size,
                    JpegErrorState &state, JpegHeader &header,
                    bool (*accept)(const JpegHeader &, void *),
                    unsigned char *(*allocate)(const JpegHeader &, void *),
                    void *context) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&state.manager);
  state.manager.error_exit = onError;
  state.manager.emit_message = onMessage;
  jpeg_create_decompress(&cinfo);
  if (setjmp(state.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return JpegStep::Corrupt;
  }
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  header.width = cinfo.image_width;
  header.height = cinfo.image_height;
  header.colorSpace = cinfo.jpeg_color_space;
  if (!accept(header, context)) {
    jpeg_destroy_decompress(&cinfo);
    return JpegStep::Header;
  }
  cinfo.out_color_space = JCS_EXT_RGBA; // RGB with a filler byte of 255
  jpeg_start_decompress(&cinfo);
  if (cinfo.output_width != cinfo.image_width ||
      cinfo.output_height != cinfo.image_height ||
      cinfo.output_components != 4) {
    jpeg_destroy_decompress(&cinfo);
    return JpegStep::Unsupported;
  }
  unsigned char *pixels = allocate(header, context);
  const size_t rowBytes = size_t(header.width) * 4;
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = pixels + size_t(cinfo.output_scanline) * rowBytes;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return JpegStep::Ok;
}

struct DecodeContext {
  const std::string *what;
  Status headerStatus;
  RgbaImage *image;
};

bool acceptHeader(const JpegHeader &header, void *context) {
  auto *ctx = static_cast<DecodeContext *>(context);
  const std::string &what = *ctx->what;
  if (header.colorSpace == JCS_CMYK || header.colorSpace == JCS_YCCK) {
    ctx->headerStatus =
        Error{what + ": a " +
              (header.colorSpace == JCS_CMYK ? std::string("CMYK")
                                             : std::string("YCCK")) +
              " JPEG, which is not supported; save the image as RGB"};
    return false;
  }
  ctx->headerStatus = checkImageSize(header.width, header.height, what);
  return ctx->headerStatus.isOk();
}

unsigned char *allocatePixels(const JpegHeader &header, void *context) {
  auto *ctx = static_cast<DecodeContext *>(context);
  ctx->image->width = header.width;
  ctx->image->height = header.height;
  ctx->image->pixels.resize(size_t(header.width * header.height * 4));
  return ctx->image->pixels.data();
}

} // namespace

Result<RgbaImage> decodeJpeg(const void *data, size_t size,
                             const std::string &what) {
  RgbaImage image;
  DecodeContext context{&what, Status::ok(), &image};
  JpegErrorState state;
  JpegHeader header;
  JpegStep step =
      runLibjpeg(static_cast<const unsigned char *>(data), size, state, header,
                 acceptHeader, allocatePixels, &context);
  switch (step) {
  case JpegStep::Ok:
    break;
  case JpegStep::Header:
    return Error{context.headerStatus.message()};
  case JpegStep::Corrupt:
    return Error{what + ": a truncated or corrupt JPEG file (libjpeg: " +
                 state.message + ")"};
  case JpegStep::Unsupported:
    return Error{what + ": an unsupported JPEG (libjpeg could not decode it "
                        "to RGB at full size)"};
  }
  image.hasAlpha = false;
  return image;
}

} // namespace trellis
