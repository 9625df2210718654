//===- Gaussians.h - The Gaussian decoder's output and its files ----------===//
//
// One batch item of the Gaussian decoder's output (spec §7.2), kept as the
// *stored* fields of TRELLIS's Gaussian representation, and the two files
// trellisc writes from it:
//
//  * writeGaussianPly: the standard 3D-Gaussian-splatting binary PLY, exactly
//    as TRELLIS's `Gaussian.save_ply` writes it (spec §9.1);
//  * writeGaussianNpz: the five stored fields under their TRELLIS names
//    ("_xyz", "_features_dc", "_scaling", "_rotation", "_opacity").
//
// No LLVM here; errors are values (Status / Result).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_OUTPUT_GAUSSIANS_H
#define TRELLIS_OUTPUT_GAUSSIANS_H

#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <array>
#include <string>
#include <vector>

namespace trellis::output {

/// The constants of TRELLIS's Gaussian representation for the decoder
/// `slat_dec_gs_swin8_B_64l8gs32_fp16` (spec §7.2, Appendix B). The defaults
/// are the released model's values.
struct GaussianConstants {
  /// `scaling_bias`: softplus(s_b) = 0.004, so s_b = ln(e^0.004 - 1).
  double scalingBias = 0.004;
  /// `opacity_bias`: sigmoid(o_b) = 0.1, so o_b = ln(0.1 / 0.9).
  double opacityBias = 0.1;
  /// `mininum_kernel_size` (the "3D filter"): scale = sqrt(s^2 + 9e-4^2).
  double minKernelSize = 9e-4;
  /// aabb = (origin xyz, size xyz): position = _xyz * size + origin.
  std::array<float, 6> aabb = {-0.5f, -0.5f, -0.5f, 1.0f, 1.0f, 1.0f};

  /// s_b = softplus^-1(scalingBias) (-5.519460251195668 for the default).
  double scalingBiasRaw() const;
  /// o_b = logit(opacityBias) (-2.197224577336219 for the default).
  double opacityBiasRaw() const;
};

/// The stored Gaussian fields of one batch item (M Gaussians), all F32,
/// row-major. `xyz` is the stored `_xyz` in [0,1]^3 voxel units (voxel centre
/// plus the tanh offset, spec §7.2), not yet mapped through the aabb.
struct Gaussians {
  HostTensor xyz;        ///< `_xyz`          [M, 3]
  HostTensor featuresDc; ///< `_features_dc`  [M, 1, 3] (SH degree 0)
  HostTensor scaling;    ///< `_scaling`      [M, 3]   (pre-activation)
  HostTensor rotation; ///< `_rotation`     [M, 4]   (wxyz, before + (1,0,0,0))
  HostTensor opacity;  ///< `_opacity`      [M, 1]   (pre-activation)
  GaussianConstants constants;

  /// M, the number of Gaussians (from `xyz`; 0 if it is not set).
  int64_t size() const;
  /// Checks dtypes and shapes; the message names the field, what was expected
  /// and what was found.
  Status validate() const;
};

/// One row of the Gaussian PLY, in property order (spec §9.1).
struct GaussianPlyRow {
  float x, y, z;    ///< position after the aabb and the (x,-z,y) rotation
  float nx, ny, nz; ///< always 0
  float fDc[3];     ///< raw _features_dc
  float opacity;    ///< logit(sigmoid(_opacity + o_b)) = _opacity + o_b
  float scale[3];   ///< ln(sqrt(softplus(_scaling + s_b)^2 + filter^2))
  float rot[4];     ///< wxyz quaternion of T * R(_rotation + (1,0,0,0))
};
static_assert(sizeof(GaussianPlyRow) == 17 * sizeof(float));

/// The PLY property names, in order.
extern const std::array<const char *, 17> kGaussianPlyProperties;

/// The save_ply rotation T = [[1,0,0],[0,0,-1],[0,1,0]], row-major:
/// (x, y, z) -> (x, -z, y), a +90 degree turn about x applied to TRELLIS's
/// z-up coordinates.
extern const std::array<double, 9> kGaussianPlyTransform;

/// utils3d's `quaternion_to_matrix` (wxyz): the quaternion is first divided by
/// max(|q|, 1e-12), then R = I + 2 (v v^T - |v|^2 I + w [v]x). Row-major.
std::array<double, 9> quaternionToMatrix(const std::array<double, 4> &wxyz);

/// utils3d's `matrix_to_quaternion` (wxyz): component magnitudes from the
/// diagonal, the largest one (first on ties) taken positive, the other signs
/// from the off-diagonal sums/differences (sign(0) = 0), then normalized.
std::array<double, 4> matrixToQuaternion(const std::array<double, 9> &m);

/// The PLY rotation of one Gaussian: quaternion of T * R(raw + (1,0,0,0)).
std::array<double, 4> gaussianPlyRotation(const std::array<float, 4> &raw);

/// The PLY rows (what writeGaussianPly writes after the header).
Result<std::vector<GaussianPlyRow>> gaussianPlyRows(const Gaussians &g);

/// Writes the standard 3D-Gaussian-splatting binary little-endian PLY: one
/// `vertex` element, 17 float properties in kGaussianPlyProperties order, no
/// comments (the header plyfile writes for TRELLIS's save_ply).
Status writeGaussianPly(const std::string &path, const Gaussians &g);

/// Writes the five stored fields as an .npz with the keys "_xyz",
/// "_features_dc", "_scaling", "_rotation", "_opacity" (F32, shapes as
/// above). The constants are not stored: they are fixed by the decoder.
Status writeGaussianNpz(const std::string &path, const Gaussians &g,
                        bool compress = false);

} // namespace trellis::output

#endif // TRELLIS_OUTPUT_GAUSSIANS_H
