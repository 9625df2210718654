// GPU correctness test of the attention kernels (label: gpu; never run in CI).
// Loads the compiled modules through the driver API exactly as the runtime does
// (runtime/kernels/attention_launch.hpp), runs every loaded configuration that
// this GPU can run on dense, packed-qkv, cross (batch-broadcast K/V),
// variable-length and RMS-norm cases, and compares with a double-precision CPU
// reference. Asserts correctness only, no timing.
//
//   attn_test --sm90 build-attn/attention_sm90a.cubin --sm80
//   build-attn/attention_sm80.ptx
//             --sm75 build-attn/attention_sm75.ptx [--config NAME] [--case
//             NAME]
// Exit status 0 when every check passes.
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/kernels/attention_launch.hpp"

namespace {

// ---- fp16 on the host (round to nearest even)
// -------------------------------------------------
uint16_t f2h(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)
    return static_cast<uint16_t>(sign |
                                 (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (absx >= 0x477ff000u)
    return static_cast<uint16_t>(sign | 0x7c00u); // overflow -> inf
  if (absx < 0x38800000u) {                       // subnormal or zero
    const float a = std::fabs(f) * 16777216.0f;   // / 2^-24
    return static_cast<uint16_t>(sign |
                                 static_cast<uint32_t>(std::nearbyint(a)));
  }
  uint32_t mant = absx & 0x7fffffu;
  uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h;
  return static_cast<uint16_t>(sign | h);
}
float h2f(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  uint32_t x = exp == 31 ? (sign | 0x7f800000u | (mant << 13))
                         : (sign | ((exp - 15 + 127) << 23) | (mant << 13));
  std::memcpy(&f, &x, 4);
  return f;
}

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<uint32_t>(s >> 32);
  }
  float uniform() {
    return (static_cast<float>(next() >> 8) + 0.5f) * (1.0f / 16777216.0f);
  } // (0, 1)
  float normal() {
    const float u = uniform(), v = uniform();
    return std::sqrt(-2.f * std::log(u)) * std::cos(6.2831853f * v);
  }
};

#define CK(x)                                                                  \
  do {                                                                         \
    CUresult r_ = (x);                                                         \
    if (r_ != CUDA_SUCCESS) {                                                  \
      const char *s_ = nullptr;                                                \
      cuGetErrorString(r_, &s_);                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_);      \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

struct DevBuf {
  CUdeviceptr p = 0;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) { CK(cuMemAlloc(&p, n ? n : 16)); }
  ~DevBuf() { cuMemFree(p); }
  DevBuf(const DevBuf &) = delete;
};

// One tensor of fp16 on the host: element (row, head, e) at row*row_stride +
// head*head_stride + e.
struct Case {
  std::string name;
  int D = 64, H = 2, B = 1;
  std::vector<int> lq, lk; // per sequence
  bool varlen_q = false, varlen_k = false;
  bool packed_qkv =
      false; // q/k/v are views of one [rows, 3, H, D] buffer (needs lq == lk)
  bool kv_broadcast = false; // dense K/V with batch stride 0
  bool rms = false;
  bool prepass_k =
      false; // normalize k with the standalone kernel (out of place), q fused
  float scale = 0.f; // 0: 1/sqrt(D)
  float q_amp = 1.f;
  float gain_lo = 0.5f, gain_hi = 1.5f; // head-norm gains, uniform
  // >= 0 (dense q and k/v buffers): every query of a head points along one
  // direction and this key of every sequence along the same one, far above
  // the first key tile's logits: a fixed softmax reference taken from tile 0
  // overflows, and the FIXED_REF kernels must have their CTAs redone.
  int peak_key = -1;
};

std::string g_only_case;

struct Result {
  double max_abs = 0, rel_l2 = 0;
  long nonfinite = 0;
  long redone = -1; // FIXED_REF: CTAs the online kernel recomputed
  bool ok = false;
};

Result run_case(const trellis::AttentionKernels &K,
                const TrellisAttnConfig *cfg, const Case &c, uint64_t seed) {
  const int D = c.D, H = c.H, S = c.B;
  Rng rng(seed);
  // token offsets
  std::vector<int> q_off(S + 1, 0), k_off(S + 1, 0);
  for (int b = 0; b < S; ++b) {
    q_off[b + 1] = q_off[b] + c.lq[b];
    k_off[b + 1] = k_off[b] + c.lk[b];
  }
  const int maxq = *std::max_element(c.lq.begin(), c.lq.end());
  const int Lq = c.lq[0], Lk = c.lk[0];
  // host buffers: rows are token rows (dense: b*L + i)
  const int q_rows = c.varlen_q ? q_off[S] : S * Lq;
  const int k_rows = c.varlen_k ? k_off[S] : (c.kv_broadcast ? Lk : S * Lk);
  std::vector<uint16_t> qkv, qh, kvh;
  int64_t q_rs, k_rs, v_rs, hs = D;
  size_t q_base = 0, k_base = 0, v_base = 0;
  if (c.packed_qkv) {
    qkv.resize(static_cast<size_t>(q_rows) * 3 * H * D);
    for (auto &x : qkv)
      x = f2h(rng.normal());
    q_rs = k_rs = v_rs = 3 * H * D;
    k_base = static_cast<size_t>(H) * D;
    v_base = 2 * static_cast<size_t>(H) * D;
  } else {
    qh.resize(static_cast<size_t>(q_rows) * H * D);
    for (auto &x : qh)
      x = f2h(rng.normal() * c.q_amp);
    kvh.resize(static_cast<size_t>(k_rows) * 2 * H * D);
    for (auto &x : kvh)
      x = f2h(rng.normal());
    q_rs = H * D;
    k_rs = v_rs = 2 * H * D;
    v_base = static_cast<size_t>(H) * D;
  }
  if (c.packed_qkv && c.q_amp != 1.f) {
    for (int r = 0; r < q_rows; ++r)
      for (int i = 0; i < H * D; ++i) {
        uint16_t &x = qkv[static_cast<size_t>(r) * 3 * H * D + i];
        x = f2h(h2f(x) * c.q_amp);
      }
  }
  if (c.peak_key >= 0) {
    if (c.packed_qkv || c.varlen_q || c.varlen_k || c.kv_broadcast) {
      std::fprintf(stderr, "test bug: peak_key needs dense q and k/v\n");
      std::exit(2);
    }
    std::vector<float> u(D);
    for (int h = 0; h < H; ++h) {
      float n2 = 0.f;
      for (auto &x : u)
        n2 += (x = rng.normal()) * x;
      for (auto &x : u) // ||u|| = sqrt(D)
        x *= std::sqrt(D / n2);
      for (int r = 0; r < q_rows; ++r)
        for (int e = 0; e < D; ++e)
          qh[(static_cast<size_t>(r) * H + h) * D + e] =
              f2h(c.q_amp * (0.9f * u[e] + 0.3f * rng.normal()));
      for (int b = 0; b < S; ++b)
        for (int e = 0; e < D; ++e)
          kvh[(static_cast<size_t>(b) * Lk + c.peak_key) * k_rs +
              static_cast<size_t>(h) * D + e] = f2h(2.f * u[e]);
    }
  }
  const uint16_t *qsrc = c.packed_qkv ? qkv.data() : qh.data();
  const uint16_t *ksrc = c.packed_qkv ? qkv.data() : kvh.data();
  std::vector<float> gq(H * D), gk(H * D);
  for (auto &g : gq)
    g = c.gain_lo + (c.gain_hi - c.gain_lo) * rng.uniform();
  for (auto &g : gk)
    g = c.gain_lo + (c.gain_hi - c.gain_lo) * rng.uniform();
  const float scale =
      c.scale > 0 ? c.scale : 1.f / std::sqrt(static_cast<float>(D));
  for (const auto *vec : {&qkv, &qh, &kvh})
    for (uint16_t x : *vec)
      if (!std::isfinite(h2f(x))) {
        std::fprintf(stderr, "test bug: non-finite input\n");
        std::exit(2);
      }

  // device buffers
  DevBuf dq((c.packed_qkv ? qkv.size() : qh.size()) * 2);
  DevBuf dkv(c.packed_qkv ? 16 : kvh.size() * 2);
  const size_t o_elems = static_cast<size_t>(q_rows) * H * D;
  DevBuf dout(o_elems * 2);
  DevBuf dgq(gq.size() * 4), dgk(gk.size() * 4);
  DevBuf dcq((S + 1) * 4), dck((S + 1) * 4);
  if (c.packed_qkv)
    CK(cuMemcpyHtoD(dq.p, qkv.data(), qkv.size() * 2));
  else {
    CK(cuMemcpyHtoD(dq.p, qh.data(), qh.size() * 2));
    CK(cuMemcpyHtoD(dkv.p, kvh.data(), kvh.size() * 2));
  }
  CK(cuMemcpyHtoD(dgq.p, gq.data(), gq.size() * 4));
  CK(cuMemcpyHtoD(dgk.p, gk.data(), gk.size() * 4));
  CK(cuMemcpyHtoD(dcq.p, q_off.data(), (S + 1) * 4));
  CK(cuMemcpyHtoD(dck.p, k_off.data(), (S + 1) * 4));
  CK(cuMemsetD16(dout.p, 0x7e00, o_elems)); // poison: NaN

  TrellisAttnParams p;
  std::memset(&p, 0, sizeof(p));
  const CUdeviceptr kvbuf = c.packed_qkv ? dq.p : dkv.p;
  p.q = reinterpret_cast<const void *>(dq.p + q_base * 2);
  p.k = reinterpret_cast<const void *>(kvbuf + k_base * 2);
  p.v = reinterpret_cast<const void *>(kvbuf + v_base * 2);
  p.o = reinterpret_cast<void *>(dout.p);
  p.q_row_stride = q_rs;
  p.k_row_stride = k_rs;
  p.v_row_stride = v_rs;
  p.o_row_stride = H * D;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = hs;
  p.q_batch_stride = static_cast<int64_t>(Lq) * q_rs;
  p.o_batch_stride = static_cast<int64_t>(Lq) * H * D;
  p.k_batch_stride = c.kv_broadcast ? 0 : static_cast<int64_t>(Lk) * k_rs;
  p.v_batch_stride = c.kv_broadcast ? 0 : static_cast<int64_t>(Lk) * v_rs;
  p.cu_seqlens_q =
      c.varlen_q ? reinterpret_cast<const int32_t *>(dcq.p) : nullptr;
  p.cu_seqlens_k =
      c.varlen_k ? reinterpret_cast<const int32_t *>(dck.p) : nullptr;
  p.q_gamma = c.rms ? reinterpret_cast<const float *>(dgq.p) : nullptr;
  p.k_gamma = c.rms ? reinterpret_cast<const float *>(dgk.p) : nullptr;
  p.num_seqs = S;
  p.heads = H;
  p.seqlen_q = c.varlen_q ? maxq : Lq;
  p.seqlen_k = Lk;
  p.head_dim = D;
  p.softmax_scale = scale;

  std::string err;
  // pre-pass variant: k' = head_rmsnorm(k) into a separate [k_rows, H, D]
  // buffer, then attention on k'
  DevBuf dkn(c.prepass_k ? static_cast<size_t>(k_rows) * H * D * 2 : 16);
  if (c.prepass_k) {
    TrellisHeadRmsNormParams np;
    std::memset(&np, 0, sizeof(np));
    np.x = p.k;
    np.y = reinterpret_cast<void *>(dkn.p);
    np.x_row_stride = k_rs;
    np.x_head_stride = hs;
    np.y_row_stride = H * D;
    np.y_head_stride = D;
    np.gamma = reinterpret_cast<const float *>(dgk.p);
    np.rows = k_rows;
    np.heads = H;
    np.head_dim = D;
    if (K.launch_head_rmsnorm(np, nullptr, &err) != CUDA_SUCCESS) {
      std::fprintf(stderr, "head_rmsnorm launch failed: %s\n", err.c_str());
      std::exit(2);
    }
    p.k = reinterpret_cast<const void *>(dkn.p);
    p.k_row_stride = H * D;
    p.k_batch_stride = c.kv_broadcast ? 0 : static_cast<int64_t>(Lk) * H * D;
    p.k_gamma = nullptr;
    p.k_norm_gamma = reinterpret_cast<const float *>(dgk.p);
  }
  // FIXED_REF: the redo flags, poisoned (-1): the kernel must write each.
  const bool fixed = (cfg->variant & TRELLIS_ATTN_SM90_FIXED_REF) != 0;
  const long long flags = fixed ? trellis_attn_redo_flags_count(cfg, &p) : 0;
  DevBuf dredo(static_cast<size_t>(flags) * 4);
  if (fixed) {
    CK(cuMemsetD32(dredo.p, 0xffffffffu, static_cast<size_t>(flags)));
    p.redo_flags = reinterpret_cast<int32_t *>(dredo.p);
  }
  CUresult r = K.launch(cfg, p, nullptr, &err);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "launch failed: %s\n", err.c_str());
    std::exit(2);
  }
  CK(cuCtxSynchronize());
  std::vector<uint16_t> out(o_elems);
  CK(cuMemcpyDtoH(out.data(), dout.p, o_elems * 2));
  Result res;
  bool flags_ok = true;
  if (fixed) {
    std::vector<int32_t> f(static_cast<size_t>(flags));
    CK(cuMemcpyDtoH(f.data(), dredo.p, f.size() * 4));
    res.redone = 0;
    for (int32_t x : f) {
      flags_ok = flags_ok && (x == 0 || x == 1);
      res.redone += x == 1;
    }
  }

  // reference
  auto rmsnorm = [&](const uint16_t *u, const float *g,
                     std::vector<float> &dst) {
    float ss = 0.f;
    for (int e = 0; e < D; ++e)
      ss += h2f(u[e]) * h2f(u[e]);
    const float denom = std::max(std::sqrt(ss), 1e-12f);
    const float sd = std::sqrt(static_cast<float>(D));
    for (int e = 0; e < D; ++e)
      dst[e] = h2f(f2h(h2f(u[e]) / denom * g[e] * sd));
  };
  double err2 = 0, ref2 = 0;
  std::vector<float> qv(D), kvec(D);
  std::vector<double> logits, acc(D);
  for (int b = 0; b < S; ++b) {
    const int lq = c.lq[b], lk = c.lk[b];
    const size_t qrow0 = c.varlen_q ? q_off[b] : static_cast<size_t>(b) * Lq;
    const size_t krow0 =
        c.varlen_k ? k_off[b]
                   : (c.kv_broadcast ? 0 : static_cast<size_t>(b) * Lk);
    for (int h = 0; h < H; ++h) {
      // keys of this sequence/head, normalized if asked
      std::vector<float> kk(static_cast<size_t>(lk) * D),
          vv(static_cast<size_t>(lk) * D);
      for (int j = 0; j < lk; ++j) {
        const uint16_t *kp = ksrc + k_base + (krow0 + j) * k_rs + h * hs;
        const uint16_t *vp = ksrc + v_base + (krow0 + j) * v_rs + h * hs;
        if (c.rms) {
          rmsnorm(kp, gk.data() + h * D, kvec);
          for (int e = 0; e < D; ++e)
            kk[static_cast<size_t>(j) * D + e] = kvec[e];
        } else {
          for (int e = 0; e < D; ++e)
            kk[static_cast<size_t>(j) * D + e] = h2f(kp[e]);
        }
        for (int e = 0; e < D; ++e)
          vv[static_cast<size_t>(j) * D + e] = h2f(vp[e]);
      }
      for (int i = 0; i < lq; ++i) {
        const uint16_t *qp = qsrc + q_base + (qrow0 + i) * q_rs + h * hs;
        if (c.rms)
          rmsnorm(qp, gq.data() + h * D, qv);
        else
          for (int e = 0; e < D; ++e)
            qv[e] = h2f(qp[e]);
        logits.assign(lk, 0.0);
        double mx = -1e300;
        for (int j = 0; j < lk; ++j) {
          double d = 0;
          for (int e = 0; e < D; ++e)
            d +=
                static_cast<double>(qv[e]) * kk[static_cast<size_t>(j) * D + e];
          logits[j] = d * scale;
          mx = std::max(mx, logits[j]);
        }
        double sum = 0;
        for (int j = 0; j < lk; ++j)
          sum += (logits[j] = std::exp(logits[j] - mx));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int j = 0; j < lk; ++j)
          for (int e = 0; e < D; ++e)
            acc[e] += logits[j] * vv[static_cast<size_t>(j) * D + e];
        for (int e = 0; e < D; ++e) {
          const double ref = lk > 0 ? acc[e] / sum : 0.0;
          const float got =
              h2f(out[(qrow0 + i) * H * D + static_cast<size_t>(h) * D + e]);
          if (!std::isfinite(got)) {
            ++res.nonfinite;
            continue;
          }
          const double d = got - ref;
          res.max_abs = std::max(res.max_abs, std::fabs(d));
          err2 += d * d;
          ref2 += ref * ref;
        }
      }
    }
  }
  res.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  res.ok = res.nonfinite == 0 && res.rel_l2 < 2e-3 && res.max_abs < 1e-2 &&
           flags_ok && (!fixed || c.peak_key < 0 || res.redone > 0);
  return res;
}

std::vector<Case> cases_for(int D) {
  std::vector<Case> v;
  {
    Case c;
    c.name = "dense-packed-qkv";
    c.D = D, c.H = 3, c.B = 2, c.lq = {333, 333}, c.lk = {333, 333},
    c.packed_qkv = true;
    v.push_back(c);
  }
  {
    Case c;
    c.name = "dense-packed-qkv-rms";
    c.D = D, c.H = 2, c.B = 1, c.lq = {517}, c.lk = {517}, c.packed_qkv = true,
    c.rms = true;
    v.push_back(c);
  }
  {
    Case c;
    c.name = "varlen-rms-prepass-k";
    c.D = D, c.H = 3, c.B = 3;
    c.lq = c.lk = {700, 33, 260};
    c.varlen_q = c.varlen_k = true, c.packed_qkv = true, c.rms = true,
    c.prepass_k = true;
    v.push_back(c);
  }
  {
    Case c;
    c.name = "cross-kv-broadcast";
    c.D = D, c.H = 2, c.B = 2, c.lq = {200, 200}, c.lk = {257, 257},
    c.kv_broadcast = true, c.scale = 0.1f;
    v.push_back(c);
  }
  {
    Case c;
    c.name = "dense-peaky-logits";
    c.D = D, c.H = 1, c.B = 1, c.lq = {256}, c.lk = {700}, c.q_amp = 4.f;
    v.push_back(c);
  }
  {
    Case c; // the first key tile far under a later key: FIXED_REF redoes
    c.name = "dense-late-peak";
    c.D = D, c.H = 2, c.B = 2, c.lq = {300, 300}, c.lk = {700, 700},
    c.q_amp = 2.f, c.peak_key = 500;
    v.push_back(c);
  }
  {
    Case c; // the same with large head-norm gains: a loose logit bound
    c.name = "dense-late-peak-rms-gain3";
    c.D = D, c.H = 2, c.B = 1, c.lq = {256}, c.lk = {600}, c.rms = true,
    c.gain_lo = 2.f, c.gain_hi = 4.f, c.peak_key = 300;
    v.push_back(c);
  }
  {
    Case c; // prepass k with large gains (k_norm_gamma bounds the logits)
    c.name = "dense-rms-prepass-k-gain3";
    c.D = D, c.H = 2, c.B = 2, c.lq = {1100, 1100}, c.lk = {1100, 1100},
    c.rms = true, c.prepass_k = true, c.gain_lo = 2.f, c.gain_hi = 4.f;
    v.push_back(c);
  }
  {
    Case c;
    c.name = "varlen-packed-rms";
    c.D = D, c.H = 2, c.B = 8;
    c.lq = c.lk = {1, 17, 64, 129, 300, 5, 512, 2};
    c.varlen_q = c.varlen_k = true, c.packed_qkv = true, c.rms = true;
    v.push_back(c);
  }
  {
    Case c;
    c.name = "varlen-q-varlen-k-empty";
    c.D = D, c.H = 2, c.B = 4;
    c.lq = {7, 130, 0, 64};
    c.lk = {50, 200, 10, 0};
    c.varlen_q = c.varlen_k = true;
    v.push_back(c);
  }
  {
    Case c;
    c.name = "varlen-q-dense-kv";
    c.D = D, c.H = 2, c.B = 3;
    c.lq = {100, 1, 257};
    c.lk = {300, 300, 300};
    c.varlen_q = true;
    v.push_back(c);
  }
  return v;
}

std::string read_file(const char *path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot open %s\n", path);
    std::exit(2);
  }
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  s.push_back('\0');
  return s;
}

} // namespace

int main(int argc, char **argv) {
  const char *paths[3] = {nullptr, nullptr, nullptr};
  std::string only_config;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--sm90")
      paths[0] = argv[i + 1];
    else if (a == "--sm80")
      paths[1] = argv[i + 1];
    else if (a == "--sm75")
      paths[2] = argv[i + 1];
    else if (a == "--config")
      only_config = argv[i + 1];
    else if (a == "--case")
      g_only_case = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  int major = 0, minor = 0;
  CK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                          dev));
  CK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                          dev));
  const int sm = major * 10 + minor;
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  char name[256];
  CK(cuDeviceGetName(name, sizeof(name), dev));
  std::printf("device: %s (sm_%d)\n", name, sm);

  int failures = 0, runs = 0;
  {
    trellis::AttentionKernels K;
    const int families[3] = {TRELLIS_ATTN_SM90A, TRELLIS_ATTN_SM80,
                             TRELLIS_ATTN_SM75};
    for (int f = 0; f < 3; ++f) {
      if (!paths[f])
        continue;
      if (families[f] == TRELLIS_ATTN_SM90A && sm != 90) {
        std::printf("skip %s: sm_90a code needs an sm_90 GPU\n", paths[f]);
        continue;
      }
      const std::string img = read_file(paths[f]);
      std::string err;
      if (K.load(img.data(), families[f], &err) != CUDA_SUCCESS) {
        std::fprintf(stderr, "load %s: %s\n", paths[f], err.c_str());
        return 2;
      }
    }
    uint64_t seed = 1;
    for (int i = 0; i < trellis_attn_num_configs; ++i) {
      const TrellisAttnConfig *cfg = &trellis_attn_configs[i];
      if (!K.loaded(cfg))
        continue;
      if (!only_config.empty() && only_config != cfg->name)
        continue;
      for (const Case &c : cases_for(cfg->head_dim)) {
        if (!g_only_case.empty() && g_only_case != c.name)
          continue;
        const Result r = run_case(K, cfg, c, seed++);
        ++runs;
        if (!r.ok)
          ++failures;
        std::printf("%-4s %-36s %-26s max_abs %.3e  rel_l2 %.3e  nonfinite %ld",
                    r.ok ? "ok" : "FAIL", cfg->name, c.name.c_str(), r.max_abs,
                    r.rel_l2, r.nonfinite);
        if (r.redone >= 0)
          std::printf("  redone CTAs %ld", r.redone);
        std::printf("\n");
      }
    }
  }
  std::printf("attn_test: %d checks, %d failed\n", runs, failures);
  return failures == 0 && runs > 0 ? 0 : 1;
}
