//===- RadianceField.cpp - Radiance-field leaves as .npz ------------------===//
#include "trellis/Output/RadianceField.h"

#include "trellis/Format/Npy.h"

#include "runtime/output/OutputUtil.h"

#include <cstring>

namespace trellis::output {

int64_t RadianceField::size() const {
  return coords.defined() && coords.rank() >= 1 ? coords.dim(0) : 0;
}

static int log2Exact(int r) {
  int d = 0;
  while ((1 << d) < r)
    ++d;
  return (1 << d) == r ? d : -1;
}

Status RadianceField::validate() const {
  const int64_t n = size();
  struct Field {
    const char *name;
    const HostTensor *t;
    DType dtype;
    Shape shape;
  };
  const Field fields[] = {
      {"coords", &coords, DType::I32, {n, 4}},
      {"trivec", &trivec, DType::F32, {n, kRfRank, 3, kRfDim}},
      {"density", &density, DType::F32, {n, kRfRank}},
      {"features_dc", &featuresDc, DType::F32, {n, kRfRank, 1, 3}}};
  for (const Field &f : fields)
    TRELLIS_RETURN_IF_ERROR(detail::checkTensor("radiance-field array", f.name,
                                                *f.t, f.dtype, f.shape));
  int depth = resolution >= 2 ? log2Exact(resolution) : -1;
  if (depth < 1 || depth > 7)
    return Error{"radiance-field resolution must be a power of two in "
                 "[2, 128], got " +
                 std::to_string(resolution)};
  const int32_t *c = coords.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int a = 1; a < 4; ++a)
      if (c[i * 4 + a] < 0 || c[i * 4 + a] >= resolution)
        return Error{"radiance-field voxel " + std::to_string(i) +
                     " has coordinate " + std::to_string(c[i * 4 + a]) +
                     " outside the " + std::to_string(resolution) + "^3 grid"};
  return Status::ok();
}

Result<RadianceField> radianceFieldFromHead(const HostTensor &coords,
                                            const HostTensor &head) {
  RadianceField rf;
  rf.coords = coords;
  const int64_t n = rf.size();
  if (Status s = detail::checkTensor("radiance-field decoder output", "head",
                                     head, DType::F32, {n, kRfHeadChannels});
      !s)
    return Error{s.message()};
  const int64_t nt = kRfRank * 3 * kRfDim, nd = kRfRank, nc = kRfRank * 3;
  rf.trivec = HostTensor(DType::F32, {n, kRfRank, 3, kRfDim});
  rf.density = HostTensor(DType::F32, {n, kRfRank});
  rf.featuresDc = HostTensor(DType::F32, {n, kRfRank, 1, 3});
  const float *h = head.data<float>();
  float *t = rf.trivec.mutableData<float>();
  float *d = rf.density.mutableData<float>();
  float *f = rf.featuresDc.mutableData<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float *row = h + i * kRfHeadChannels;
    for (int64_t k = 0; k < nt; ++k)
      t[i * nt + k] = row[k] + 1.0f;
    std::memcpy(d + i * nd, row + nt, size_t(nd) * sizeof(float));
    std::memcpy(f + i * nc, row + nt + nd, size_t(nc) * sizeof(float));
  }
  TRELLIS_RETURN_IF_ERROR(rf.validate());
  return rf;
}

HostTensor radianceFieldPositions(const RadianceField &rf) {
  const int64_t n = rf.size();
  HostTensor pos(DType::F32, {n, 3});
  const int32_t *c = rf.coords.data<int32_t>();
  float *p = pos.mutableData<float>();
  const float res = float(rf.resolution);
  for (int64_t i = 0; i < n; ++i)
    for (int a = 0; a < 3; ++a)
      p[i * 3 + a] = (float(c[i * 4 + 1 + a]) + 0.5f) / res;
  return pos;
}

Status writeRadianceFieldNpz(const std::string &path, const RadianceField &rf,
                             bool compress) {
  if (Status s = rf.validate(); !s)
    return Error{"cannot write radiance field '" + path + "': " + s.message()};
  const int64_t n = rf.size();
  HostTensor depth(DType::U8, {n, 1});
  std::memset(depth.mutableRaw(), log2Exact(rf.resolution), size_t(n));
  HostTensor aabb(DType::F32, {6});
  std::memcpy(aabb.mutableRaw(), rf.aabb.data(), 6 * sizeof(float));
  NamedTensors entries = {
      {"coords", rf.coords},   {"position", radianceFieldPositions(rf)},
      {"depth", depth},        {"trivec", rf.trivec},
      {"density", rf.density}, {"features_dc", rf.featuresDc},
      {"aabb", aabb}};
  return writeNpz(path, entries, compress);
}

} // namespace trellis::output
