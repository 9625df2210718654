//===- main.cpp - trellis-preprocess: TRELLIS's image preprocessing -------===//
//
// Decodes one PNG or JPEG, runs TRELLIS's preprocessing (include/trellis/
// Image/Preprocess.h) and writes the 518 x 518 RGB image and/or the
// normalised tensor DINOv2 is given as .npy files.
//
//===----------------------------------------------------------------------===//
#include "trellis/Format/Npy.h"
#include "trellis/Image/Image.h"
#include "trellis/Image/Preprocess.h"

#include <cstdio>
#include <cstring>
#include <string>

using namespace trellis;

static const char kHelp[] =
    R"(usage: trellis-preprocess IMAGE [--no-background-removal]
                          [--out-rgb RGB.npy] [--out-tensor X.npy] [--verbose]

Runs TRELLIS's image preprocessing (TrellisImageTo3DPipeline.preprocess_image
and the input conversion of encode_image) on one PNG or JPEG, bit for bit:
  1. the image's alpha channel is used when it has one with some value other
     than 255 (an RGBA PNG); otherwise see --no-background-removal;
  2. the crop: the bounding box of the pixels with alpha >= 205, enlarged to a
     square of 1.2 times its longer side, around its centre (parts outside the
     image are transparent);
  3. Pillow's LANCZOS resize of the crop to 518 x 518 (premultiplied alpha);
  4. the colours premultiplied by alpha onto black.
Outputs (at least one):
  --out-rgb RGB.npy      the 518 x 518 image: uint8 [518, 518, 3]
  --out-tensor X.npy     DINOv2's input: float32 [3, 518, 518],
                         (rgb / 255 - mean) / std with ImageNet's mean and std

Options:
  --no-background-removal
                  accept an image without usable alpha (no alpha channel, or
                  alpha 255 everywhere) as it is. TRELLIS would cut such an
                  image out with a background-removal network (rembg), which
                  is not shipped; with this option the whole image is the
                  object, as if that network had kept every pixel (an image
                  over 1024 pixels on its longer side is first resized to
                  1024, as TRELLIS does before background removal). Without
                  it such an image is an error.
  --verbose       print the decoded size, the alpha decision and the crop
  --help          this text

Limits: PNG (8 bits per channel or less) and JPEG (greyscale, RGB/YCbCr; not
CMYK); at most 16384 pixels a side and 134217728 pixels in all.

Exit status: 0 on success, 1 on an error (the message names the file), 2 on a
usage error.
)";

static int usage(const std::string &message) {
  std::fprintf(stderr,
               "trellis-preprocess: %s\n(see trellis-preprocess --help)\n",
               message.c_str());
  return 2;
}

static int fail(const std::string &message) {
  std::fprintf(stderr, "trellis-preprocess: error: %s\n", message.c_str());
  return 1;
}

int main(int argc, char **argv) {
  std::string input, outRgb, outTensor;
  PreprocessOptions options;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string name = arg.substr(0, arg.find('='));
    auto value = [&](std::string &out) -> bool {
      size_t eq = arg.find('=');
      if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
        out = arg.substr(eq + 1);
        return true;
      }
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    if (name == "--help" || name == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (name == "--no-background-removal") {
      options.noBackgroundRemoval = true;
    } else if (name == "--verbose") {
      verbose = true;
    } else if (name == "--out-rgb") {
      if (!value(outRgb) || outRgb.empty())
        return usage("--out-rgb needs a file name");
    } else if (name == "--out-tensor") {
      if (!value(outTensor) || outTensor.empty())
        return usage("--out-tensor needs a file name");
    } else if (arg.rfind("-", 0) == 0 && arg.size() > 1) {
      return usage("unknown option \"" + arg + "\"");
    } else if (input.empty()) {
      input = arg;
    } else {
      return usage("one image at a time: found \"" + input + "\" and \"" + arg +
                   "\"");
    }
  }
  if (input.empty())
    return usage("no image given");
  if (outRgb.empty() && outTensor.empty())
    return usage("nothing to write: give --out-rgb and/or --out-tensor");

  Result<RgbaImage> image = readImageFile(input);
  if (!image)
    return fail(image.message());
  Result<PreprocessedImage> pre = preprocessImage(*image, options, input);
  if (!pre)
    return fail(pre.message());
  if (verbose)
    std::fprintf(
        stderr,
        "%s: %lld x %lld, %s; crop %lld x %lld at (%lld, %lld) of "
        "%lld x %lld\n",
        input.c_str(), (long long)image->width, (long long)image->height,
        pre->alphaTrusted ? "alpha used" : "no usable alpha (whole image)",
        (long long)pre->crop.width, (long long)pre->crop.height,
        (long long)pre->crop.left, (long long)pre->crop.top,
        (long long)pre->sourceWidth, (long long)pre->sourceHeight);

  const int64_t s = kCondImageSize;
  if (!outRgb.empty()) {
    HostTensor rgb = HostTensor::view(DType::U8, {s, s, 3}, pre->rgb.data());
    if (Status st = writeNpy(outRgb, rgb); !st)
      return fail(st.message());
  }
  if (!outTensor.empty()) {
    HostTensor x = normalizeImage(pre->rgb.data(), s);
    if (Status st = writeNpy(outTensor, x); !st)
      return fail(st.message());
  }
  return 0;
}
