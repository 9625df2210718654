//===- Gaussians.cpp - Gaussian PLY and .npz writers ----------------------===//
//
// The PLY follows TRELLIS's `Gaussian.save_ply` (spec §9.1). Its rotation step
// goes through utils3d (the commit TRELLIS pins, 9a4eb15e, numpy flavour used
// by save_ply). What we verified by reading utils3d/numpy/transforms.py and
// utils3d/torch/transforms.py at that commit (implemented here from the math,
// no code copied):
//
//  * quaternion_to_matrix (wxyz) divides q by max(|q|, 1e-12) *before* forming
//    R = I + 2 (v v^T - |v|^2 I + w [v]x). So the un-normalized
//    q = _rotation + (1,0,0,0) that save_ply passes in yields the same proper
//    rotation as normalize(q); only |q| < 1e-12 (q = 0 exactly, in practice)
//    is special: R = I + (a negligible term), i.e. the identity for q = 0.
//  * matrix_to_quaternion takes |w|,|x|,|y|,|z| = 0.5 sqrt(max(0, 1 ± m00 ±
//    m11 ± m22)) (signs (+,+,+), (+,-,-), (-,+,-), (-,-,+)), makes the largest
//    magnitude positive (argmax: the first one on ties), gives the others the
//    sign of (m21-m12, m02-m20, m10-m01) when w is largest, of
//    (m21-m12, m01+m10, m02+m20) for x, (m02-m20, m01+m10, m21+m12) for y,
//    (m10-m01, m02+m20, m21+m12) for z, where sign(0) = 0, and normalizes the
//    result (divide by max(|q|, 1e-12)). The output is therefore a unit
//    quaternion whose largest component is positive.
//  * save_ply multiplies T (int64) with R (float32): the product is computed
//    in float64 by numpy and the quaternion in float64, then stored as float32.
//    We compute R in float64 as well (R itself is float32 in numpy), so the
//    stored rot_* can differ from TRELLIS's in the last float32 bit.
//
// The other fields are computed in double from the float32 inputs and rounded
// once. TRELLIS computes the opacity as log(p / (1 - p)) of the float32
// sigmoid; mathematically that is _opacity + o_b, which is what we store.
//
//===----------------------------------------------------------------------===//
#include "trellis/Output/Gaussians.h"

#include "trellis/Format/Npy.h"
#include "trellis/Support/AtomicFile.h"

#include "runtime/output/OutputUtil.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace trellis::output {

static_assert(std::endian::native == std::endian::little,
              "the PLY/GLB writers assume a little-endian host");

const std::array<const char *, 17> kGaussianPlyProperties = {
    "x",       "y",      "z",      "nx",      "ny",      "nz",
    "f_dc_0",  "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1",
    "scale_2", "rot_0",  "rot_1",  "rot_2",   "rot_3"};

const std::array<double, 9> kGaussianPlyTransform = {1,  0, 0, 0, 0,
                                                     -1, 0, 1, 0};

double GaussianConstants::scalingBiasRaw() const {
  return std::log(std::expm1(scalingBias));
}

double GaussianConstants::opacityBiasRaw() const {
  return std::log(opacityBias / (1.0 - opacityBias));
}

int64_t Gaussians::size() const {
  return xyz.defined() && xyz.rank() >= 1 ? xyz.dim(0) : 0;
}

Status Gaussians::validate() const {
  int64_t m = size();
  struct Field {
    const char *name;
    const HostTensor *t;
    Shape shape;
  };
  const Field fields[] = {{"_xyz", &xyz, {m, 3}},
                          {"_features_dc", &featuresDc, {m, 1, 3}},
                          {"_scaling", &scaling, {m, 3}},
                          {"_rotation", &rotation, {m, 4}},
                          {"_opacity", &opacity, {m, 1}}};
  for (const Field &f : fields) {
    TRELLIS_RETURN_IF_ERROR(detail::checkTensor("Gaussian field", f.name, *f.t,
                                                DType::F32, f.shape));
  }
  return Status::ok();
}

std::array<double, 9> quaternionToMatrix(const std::array<double, 4> &q) {
  double n = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  n = std::max(n, 1e-12);
  double w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n;
  double vv = x * x + y * y + z * z;
  // I + 2 (v v^T - |v|^2 I + w [v]x), [v]x = [[0,-z,y],[z,0,-x],[-y,x,0]].
  return {1 + 2 * (x * x - vv), 2 * (x * y - w * z),  2 * (x * z + w * y),
          2 * (y * x + w * z),  1 + 2 * (y * y - vv), 2 * (y * z - w * x),
          2 * (z * x - w * y),  2 * (z * y + w * x),  1 + 2 * (z * z - vv)};
}

static double signOf(double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); }

std::array<double, 4> matrixToQuaternion(const std::array<double, 9> &m) {
  double m00 = m[0], m01 = m[1], m02 = m[2];
  double m10 = m[3], m11 = m[4], m12 = m[5];
  double m20 = m[6], m21 = m[7], m22 = m[8];
  std::array<double, 4> mag = {
      0.5 * std::sqrt(std::max(0.0, 1 + m00 + m11 + m22)),
      0.5 * std::sqrt(std::max(0.0, 1 + m00 - m11 - m22)),
      0.5 * std::sqrt(std::max(0.0, 1 - m00 + m11 - m22)),
      0.5 * std::sqrt(std::max(0.0, 1 - m00 - m11 + m22))};
  int maxIdx = 0;
  for (int i = 1; i < 4; ++i)
    if (mag[i] > mag[maxIdx]) // strict: the first maximum wins, as argmax
      maxIdx = i;
  double xw = signOf(m21 - m12), yw = signOf(m02 - m20), zw = signOf(m10 - m01);
  double yz = signOf(m21 + m12), xz = signOf(m02 + m20), xy = signOf(m01 + m10);
  std::array<double, 4> sign;
  switch (maxIdx) {
  case 0:
    sign = {1, xw, yw, zw};
    break;
  case 1:
    sign = {xw, 1, xy, xz};
    break;
  case 2:
    sign = {yw, xy, 1, yz};
    break;
  default:
    sign = {zw, xz, yz, 1};
    break;
  }
  std::array<double, 4> q;
  double n2 = 0;
  for (int i = 0; i < 4; ++i) {
    q[i] = sign[i] * mag[i];
    n2 += q[i] * q[i];
  }
  double n = std::max(std::sqrt(n2), 1e-12);
  for (double &c : q)
    c /= n;
  return q;
}

std::array<double, 4> gaussianPlyRotation(const std::array<float, 4> &raw) {
  // q = _rotation + rots_bias, a float32 addition in TRELLIS.
  std::array<double, 4> q = {double(raw[0] + 1.0f), double(raw[1]),
                             double(raw[2]), double(raw[3])};
  std::array<double, 9> r = quaternionToMatrix(q);
  const std::array<double, 9> &t = kGaussianPlyTransform;
  std::array<double, 9> tr{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k)
        tr[i * 3 + j] += t[i * 3 + k] * r[k * 3 + j];
  return matrixToQuaternion(tr);
}

// softplus with PyTorch's default threshold (x > 20 returns x).
static double softplus(double x) {
  return x > 20.0 ? x : std::log1p(std::exp(x));
}

Result<std::vector<GaussianPlyRow>> gaussianPlyRows(const Gaussians &g) {
  TRELLIS_RETURN_IF_ERROR(g.validate());
  const int64_t m = g.size();
  const float *xyz = g.xyz.data<float>();
  const float *fdc = g.featuresDc.data<float>();
  const float *scl = g.scaling.data<float>();
  const float *rot = g.rotation.data<float>();
  const float *opa = g.opacity.data<float>();
  const std::array<float, 6> &aabb = g.constants.aabb;
  const double sb = g.constants.scalingBiasRaw();
  const double ob = g.constants.opacityBiasRaw();
  const double k2 = g.constants.minKernelSize * g.constants.minKernelSize;

  std::vector<GaussianPlyRow> rows(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    GaussianPlyRow &r = rows[size_t(i)];
    // get_xyz = _xyz * aabb[3:] + aabb[:3] (float32), then p T^T.
    float p[3];
    for (int a = 0; a < 3; ++a)
      p[a] = xyz[i * 3 + a] * aabb[3 + a] + aabb[a];
    r.x = p[0];
    r.y = -p[2];
    r.z = p[1];
    r.nx = r.ny = r.nz = 0.0f;
    for (int c = 0; c < 3; ++c)
      r.fDc[c] = fdc[i * 3 + c];
    r.opacity = float(double(opa[i]) + ob);
    for (int a = 0; a < 3; ++a) {
      double s = softplus(double(scl[i * 3 + a]) + sb);
      r.scale[a] = float(std::log(std::sqrt(s * s + k2)));
    }
    std::array<double, 4> q = gaussianPlyRotation(
        {rot[i * 4 + 0], rot[i * 4 + 1], rot[i * 4 + 2], rot[i * 4 + 3]});
    for (int c = 0; c < 4; ++c)
      r.rot[c] = float(q[c]);
  }
  return rows;
}

Status writeGaussianPly(const std::string &path, const Gaussians &g) {
  auto rows = gaussianPlyRows(g);
  if (!rows)
    return Error{"cannot write Gaussian PLY '" + path + "': " + rows.message()};
  std::string header = "ply\nformat binary_little_endian 1.0\nelement vertex " +
                       std::to_string(rows->size()) + "\n";
  for (const char *name : kGaussianPlyProperties)
    header += std::string("property float ") + name + "\n";
  header += "end_header\n";

  AtomicFile file(path);
  if (!file.status())
    return file.status();
  file.write(header);
  file.write(rows->data(), rows->size() * sizeof(GaussianPlyRow));
  return file.commit();
}

Status writeGaussianNpz(const std::string &path, const Gaussians &g,
                        bool compress) {
  if (Status s = g.validate(); !s)
    return Error{"cannot write Gaussian npz '" + path + "': " + s.message()};
  NamedTensors entries = {{"_xyz", g.xyz},
                          {"_features_dc", g.featuresDc},
                          {"_scaling", g.scaling},
                          {"_rotation", g.rotation},
                          {"_opacity", g.opacity}};
  return writeNpz(path, entries, compress);
}

} // namespace trellis::output
