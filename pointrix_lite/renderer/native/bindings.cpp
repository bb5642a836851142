// Torch bindings: argument checks, output allocation, then plain kernels.
// The only translation unit that includes libtorch headers, and it bounds the build's wall time (the
// other files compile meanwhile on the other cores). Hence the narrow headers: ATen's Tensor and the
// few operators used, and torch's pybind11 casters. <torch/extension.h> (the whole C++ frontend and
// every ATen operator) took twice as long to compile for the same object code.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/from_blob.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/Parallel.h>

#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <strings.h>

#include "kernels.h"
#include "pool.h"
#include "scratch.h"

namespace {

using at::Tensor;

void check(const Tensor &t, const char *name, int64_t dim) {
    TORCH_CHECK(t.device().is_cpu(), name, " must be a CPU tensor");
    TORCH_CHECK(t.scalar_type() == at::kFloat, name, " must be float32");
    TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
    TORCH_CHECK(t.dim() == dim, name, " must have ", dim, " dims");
}

void check_i32(const Tensor &t, const char *name) {
    TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == at::kInt && t.is_contiguous(), name,
                " must be a contiguous CPU int32 tensor");
}

int threads() { return std::max(1, at::get_num_threads()); }

// Outputs from scratch.h's kept huge-page blocks (below 2 MB: at::empty). A
// fresh allocation of the SH coefficient gradient (38 MB at 200k Gaussians,
// SH 3) or of a 1080x1920 image costs a page fault per 4 KB page and the
// kernel's zeroing of every page, more time than computing it; training frees
// them (zero_grad, the end of the backward) and asks for the same sizes every
// step.
Tensor empty_large(at::IntArrayRef sizes, const at::TensorOptions &f) {
    int64_t numel = 1;
    for (int64_t s : sizes) numel *= s;
    const size_t bytes = static_cast<size_t>(numel) * f.dtype().itemsize();
    if (bytes < plr::kHugePage) return at::empty(sizes, f);
    size_t have = 0;
    void *p = plr::acquire_block(bytes, &have);
    if (!p) return at::empty(sizes, f);
    return at::from_blob(p, sizes, [have](void *q) { plr::release_block(q, have); }, f);
}

plr::ProjectArgs project_args(const Tensor &means, const Tensor &quats, const Tensor &scales,
                              const Tensor &opacities, const Tensor &viewmats, const Tensor &Ks,
                              int64_t width, int64_t height, double eps2d, double near_plane,
                              double far_plane, double radius_clip, bool calc_comp) {
    check(means, "means", 2);
    check(quats, "quats", 2);
    check(scales, "scales", 2);
    check(viewmats, "viewmats", 3);
    check(Ks, "Ks", 3);
    plr::ProjectArgs a;
    a.C = viewmats.size(0);
    a.N = means.size(0);
    a.means = means.data_ptr<float>();
    a.quats = quats.data_ptr<float>();
    a.scales = scales.data_ptr<float>();
    a.opacities = opacities.defined() ? opacities.data_ptr<float>() : nullptr;
    a.viewmats = viewmats.data_ptr<float>();
    a.Ks = Ks.data_ptr<float>();
    a.width = static_cast<int>(width);
    a.height = static_cast<int>(height);
    a.eps2d = static_cast<float>(eps2d);
    a.near_plane = static_cast<float>(near_plane);
    a.far_plane = static_cast<float>(far_plane);
    a.radius_clip = static_cast<float>(radius_clip);
    a.calc_compensations = calc_comp;
    a.nthreads = threads();
    return a;
}

std::vector<Tensor> project_fwd(const Tensor &means, const Tensor &quats, const Tensor &scales,
                                const Tensor &opacities, const Tensor &viewmats, const Tensor &Ks,
                                int64_t width, int64_t height, double eps2d, double near_plane,
                                double far_plane, double radius_clip, bool calc_comp) {
    check(opacities, "opacities", 1);
    auto a = project_args(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d,
                          near_plane, far_plane, radius_clip, calc_comp);
    auto f = means.options();
    Tensor radii = empty_large({a.C, a.N, 2}, f.dtype(at::kInt));
    Tensor means2d = empty_large({a.C, a.N, 2}, f);
    Tensor depths = empty_large({a.C, a.N}, f);
    Tensor conics = empty_large({a.C, a.N, 3}, f);
    Tensor comps = calc_comp ? empty_large({a.C, a.N}, f) : at::empty({0}, f);
    plr::project_fwd(a, radii.data_ptr<int32_t>(), means2d.data_ptr<float>(),
                     depths.data_ptr<float>(), conics.data_ptr<float>(),
                     calc_comp ? comps.data_ptr<float>() : nullptr);
    return {radii, means2d, depths, conics, comps};
}

std::vector<Tensor> project_bwd(const Tensor &means, const Tensor &quats, const Tensor &scales,
                                const Tensor &viewmats, const Tensor &Ks, int64_t width,
                                int64_t height, double eps2d, const Tensor &radii,
                                const Tensor &conics, const Tensor &comps, const Tensor &v_means2d,
                                const Tensor &v_depths, const Tensor &v_conics,
                                const Tensor &v_comps, bool calc_comp, bool viewmats_grad) {
    auto a = project_args(means, quats, scales, Tensor(), viewmats, Ks, width, height, eps2d, 0.,
                          0., 0., calc_comp);
    check_i32(radii, "radii");
    check(conics, "conics", 3);
    check(v_means2d, "v_means2d", 3);
    check(v_depths, "v_depths", 2);
    check(v_conics, "v_conics", 3);
    if (calc_comp) {
        check(comps, "compensations", 2);
        check(v_comps, "v_compensations", 2);
    }
    Tensor v_means = empty_large(means.sizes(), means.options()), v_quats = empty_large(quats.sizes(), quats.options()),
           v_scales = empty_large(scales.sizes(), scales.options());
    Tensor v_viewmats = viewmats_grad ? at::empty_like(viewmats) : at::empty({0}, means.options());
    plr::project_bwd(a, radii.data_ptr<int32_t>(), conics.data_ptr<float>(),
                     calc_comp ? comps.data_ptr<float>() : nullptr, v_means2d.data_ptr<float>(),
                     v_depths.data_ptr<float>(), v_conics.data_ptr<float>(),
                     calc_comp ? v_comps.data_ptr<float>() : nullptr, v_means.data_ptr<float>(),
                     v_quats.data_ptr<float>(), v_scales.data_ptr<float>(),
                     viewmats_grad ? v_viewmats.data_ptr<float>() : nullptr);
    return {v_means, v_quats, v_scales, v_viewmats};
}

// Returns tile_offsets [C*tiles+1], flatten_ids [n], gauss_offsets [C*N+1], slot_by_pos [n]
// (each intersection's index in Gaussian-major order, where the backward writes its gradient row).
std::vector<Tensor> bin_tiles(const Tensor &means2d, const Tensor &radii, const Tensor &depths,
                              const Tensor &conics, const Tensor &opacities, int64_t width,
                              int64_t height, int64_t tile_size) {
    check(means2d, "means2d", 3);
    check(depths, "depths", 2);
    check(conics, "conics", 3);
    TORCH_CHECK(opacities.dim() == 2 && opacities.scalar_type() == at::kFloat &&
                    opacities.stride(1) == 1,
                "opacities must be float32 [C,N] with contiguous rows");
    check_i32(radii, "radii");
    TORCH_CHECK(tile_size > 0, "tile_size must be positive");
    plr::BinArgs a;
    a.C = means2d.size(0);
    a.N = means2d.size(1);
    TORCH_CHECK(a.C * a.N < std::numeric_limits<int32_t>::max(), "too many Gaussians x cameras");
    a.means2d = means2d.data_ptr<float>();
    a.radii = radii.data_ptr<int32_t>();
    a.depths = depths.data_ptr<float>();
    a.conics = conics.data_ptr<float>();
    a.opacities = opacities.data_ptr<float>();
    a.opac_cam_stride = opacities.stride(0);
    a.width = static_cast<int>(width);
    a.height = static_cast<int>(height);
    a.tile_size = static_cast<int>(tile_size);
    a.tile_w = static_cast<int>((width + tile_size - 1) / tile_size);
    a.tile_h = static_cast<int>((height + tile_size - 1) / tile_size);
    TORCH_CHECK(a.tile_w < 65536 && a.tile_h < 65536, "more than 65535 tiles in a row or column");
    // every entry is written by bin_count: no zeroing
    const plr::Scratch boxes(sizeof(plr::BoxHits) * std::max<int64_t>(a.C * a.N, 1));
    a.boxes = boxes.as<plr::BoxHits>();
    a.nthreads = threads();
    auto i32 = means2d.options().dtype(at::kInt);
    Tensor gauss_offsets = empty_large({a.C * a.N + 1}, i32);
    int64_t n = plr::bin_count(a, gauss_offsets.data_ptr<int32_t>());
    TORCH_CHECK(n < std::numeric_limits<int32_t>::max(), "too many tile intersections: ", n);
    Tensor tile_offsets = empty_large({a.C * a.tile_w * a.tile_h + 1}, i32);
    Tensor flatten_ids = empty_large({n}, i32);
    Tensor slot_by_pos = empty_large({n}, i32);
    plr::bin_fill(a, gauss_offsets.data_ptr<int32_t>(), tile_offsets.data_ptr<int32_t>(),
                  flatten_ids.data_ptr<int32_t>(), slot_by_pos.data_ptr<int32_t>());
    return {tile_offsets, flatten_ids, gauss_offsets, slot_by_pos};
}

plr::RasterArgs raster_args(const Tensor &means2d, const Tensor &conics, const Tensor &colors,
                            const Tensor &opacities, const Tensor &backgrounds, int64_t width,
                            int64_t height, int64_t tile_size, const Tensor &tile_offsets,
                            const Tensor &flatten_ids) {
    check(means2d, "means2d", 3);
    check(conics, "conics", 3);
    check_i32(tile_offsets, "tile_offsets");
    check_i32(flatten_ids, "flatten_ids");
    // colors [C,N,D] and opacities [C,N] may be expanded over cameras (stride 0)
    TORCH_CHECK(colors.dim() == 3 && colors.scalar_type() == at::kFloat && colors.stride(2) == 1 &&
                    colors.stride(1) == colors.size(2),
                "colors must be float32 [C,N,D] with contiguous [N,D] rows");
    TORCH_CHECK(opacities.dim() == 2 && opacities.scalar_type() == at::kFloat &&
                    opacities.stride(1) == 1,
                "opacities must be float32 [C,N] with contiguous rows");
    plr::RasterArgs a;
    a.C = means2d.size(0);
    a.N = means2d.size(1);
    a.D = static_cast<int>(colors.size(2));
    a.means2d = means2d.data_ptr<float>();
    a.conics = conics.data_ptr<float>();
    a.colors = colors.data_ptr<float>();
    a.colors_cam_stride = colors.stride(0);
    a.opacities = opacities.data_ptr<float>();
    a.opac_cam_stride = opacities.stride(0);
    if (backgrounds.defined() && backgrounds.numel() > 0) {
        check(backgrounds, "backgrounds", 2);
        a.backgrounds = backgrounds.data_ptr<float>();
    } else {
        a.backgrounds = nullptr;
    }
    a.width = static_cast<int>(width);
    a.height = static_cast<int>(height);
    a.tile_size = static_cast<int>(tile_size);
    a.tile_w = static_cast<int>((width + tile_size - 1) / tile_size);
    a.tile_h = static_cast<int>((height + tile_size - 1) / tile_size);
    TORCH_CHECK(tile_offsets.numel() == a.C * a.tile_w * a.tile_h + 1, "tile_offsets size mismatch");
    a.tile_offsets = tile_offsets.data_ptr<int32_t>();
    a.flatten_ids = flatten_ids.data_ptr<int32_t>();
    a.nthreads = threads();
    return a;
}

// Returns colors [C,H,W,D], alphas [C,H,W,1], T_final [C,H,W], last_ids [C,H,W],
// contrib [n_isects] (rows each intersection was blended in), n_evals.
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, int64_t> raster_fwd(
    const Tensor &means2d, const Tensor &conics, const Tensor &colors, const Tensor &opacities,
    const Tensor &backgrounds, int64_t width, int64_t height, int64_t tile_size,
    const Tensor &tile_offsets, const Tensor &flatten_ids) {
    auto a = raster_args(means2d, conics, colors, opacities, backgrounds, width, height, tile_size,
                         tile_offsets, flatten_ids);
    auto f = means2d.options();
    Tensor out_c = empty_large({a.C, height, width, a.D}, f);
    Tensor out_a = empty_large({a.C, height, width, 1}, f);
    Tensor out_T = empty_large({a.C, height, width}, f);
    Tensor last = empty_large({a.C, height, width}, f.dtype(at::kInt));
    Tensor contrib = empty_large({flatten_ids.numel()}, f.dtype(at::kInt));
    int64_t evals = plr::raster_fwd(a, out_c.data_ptr<float>(), out_a.data_ptr<float>(),
                                    out_T.data_ptr<float>(), last.data_ptr<int32_t>(),
                                    contrib.data_ptr<int32_t>());
    return {out_c, out_a, out_T, last, contrib, evals};
}

// Returns v_means2d [C,N,2], v_conics [C,N,3], v_colors [C,N,D], v_opacities [C,N],
// v_means2d_abs [C,N,2] (empty unless absgrad).
std::vector<Tensor> raster_bwd(const Tensor &means2d, const Tensor &conics, const Tensor &colors,
                               const Tensor &opacities, const Tensor &backgrounds, int64_t width,
                               int64_t height, int64_t tile_size, const Tensor &tile_offsets,
                               const Tensor &flatten_ids, const Tensor &gauss_offsets,
                               const Tensor &slot_by_pos, const Tensor &T_final,
                               const Tensor &last_ids, const Tensor &contrib,
                               const Tensor &v_colors_px,
                               const Tensor &v_alphas_px, bool absgrad) {
    auto a = raster_args(means2d, conics, colors, opacities, backgrounds, width, height, tile_size,
                         tile_offsets, flatten_ids);
    check_i32(gauss_offsets, "gauss_offsets");
    check_i32(slot_by_pos, "slot_by_pos");
    check_i32(last_ids, "last_ids");
    check_i32(contrib, "contrib");
    TORCH_CHECK(contrib.numel() == flatten_ids.numel(), "contrib must have one entry per intersection");
    check(T_final, "T_final", 3);
    TORCH_CHECK(v_colors_px.scalar_type() == at::kFloat && v_colors_px.dim() == 4 &&
                    v_alphas_px.scalar_type() == at::kFloat && v_alphas_px.dim() == 4,
                "pixel gradients must be float32 [C,H,W,D] and [C,H,W,1]");
    for (int i = 0; i < 4; ++i) a.v_colors_stride[i] = v_colors_px.stride(i);
    for (int i = 0; i < 3; ++i) a.v_alphas_stride[i] = v_alphas_px.stride(i);
    auto f = means2d.options();
    Tensor v_means2d = empty_large({a.C, a.N, 2}, f);
    Tensor v_conics = empty_large({a.C, a.N, 3}, f);
    Tensor v_colors = empty_large({a.C, a.N, a.D}, f);
    Tensor v_opac = empty_large({a.C, a.N}, f);
    Tensor v_abs = absgrad ? empty_large({a.C, a.N, 2}, f) : at::empty({0}, f);
    plr::raster_bwd(a, T_final.data_ptr<float>(), last_ids.data_ptr<int32_t>(), contrib.data_ptr<int32_t>(),
                    v_colors_px.data_ptr<float>(), v_alphas_px.data_ptr<float>(),
                    gauss_offsets.data_ptr<int32_t>(), slot_by_pos.data_ptr<int32_t>(),
                    v_means2d.data_ptr<float>(), v_conics.data_ptr<float>(),
                    v_colors.data_ptr<float>(), v_opac.data_ptr<float>(),
                    absgrad ? v_abs.data_ptr<float>() : nullptr);
    return {v_means2d, v_conics, v_colors, v_opac, v_abs};
}

plr::ShArgs sh_args(int64_t degree, const Tensor &means, const Tensor &campos, const Tensor &coeffs,
                    const Tensor &radii) {
    check(means, "means", 2);
    check(campos, "campos", 2);
    check_i32(radii, "radii");
    TORCH_CHECK(degree >= 0 && degree <= 4, "sh_degree must be in 0..4");
    TORCH_CHECK(coeffs.scalar_type() == at::kFloat && coeffs.dim() == 4 && coeffs.size(3) == 3 &&
                    coeffs.stride(3) == 1 && coeffs.stride(2) == 3 && coeffs.stride(1) == 3 * coeffs.size(2),
                "SH coefficients must be float32 [C,N,K,3] with contiguous [N,K,3] blocks");
    plr::ShArgs a;
    a.C = campos.size(0);
    a.N = means.size(0);
    a.K = static_cast<int>(coeffs.size(2));
    a.degree = static_cast<int>(degree);
    TORCH_CHECK((degree + 1) * (degree + 1) <= a.K, "too few SH coefficients for sh_degree");
    a.means = means.data_ptr<float>();
    a.campos = campos.data_ptr<float>();
    a.coeffs = coeffs.data_ptr<float>();
    a.coeffs_cam_stride = coeffs.stride(0);
    a.radii = radii.data_ptr<int32_t>();
    a.nthreads = threads();
    return a;
}

Tensor sh_fwd(int64_t degree, const Tensor &means, const Tensor &campos, const Tensor &coeffs,
              const Tensor &radii) {
    auto a = sh_args(degree, means, campos, coeffs, radii);
    Tensor colors = empty_large({a.C, a.N, 3}, means.options());
    plr::sh_fwd(a, colors.data_ptr<float>());
    return colors;
}

// Returns v_coeffs ([N,K,3] if coeffs are shared over cameras, else [C,N,K,3]), v_means, v_campos.
std::vector<Tensor> sh_bwd(int64_t degree, const Tensor &means, const Tensor &campos,
                           const Tensor &coeffs, const Tensor &radii, const Tensor &colors,
                           const Tensor &v_colors) {
    auto a = sh_args(degree, means, campos, coeffs, radii);
    check(colors, "colors", 3);
    check(v_colors, "v_colors", 3);
    auto f = means.options();
    Tensor v_coeffs = a.coeffs_cam_stride == 0 ? empty_large({a.N, a.K, 3}, f) : empty_large({a.C, a.N, a.K, 3}, f);
    Tensor v_means = empty_large({a.N, 3}, f), v_campos = empty_large({a.C, 3}, f);
    plr::sh_bwd(a, colors.data_ptr<float>(), v_colors.data_ptr<float>(), v_coeffs.data_ptr<float>(),
                v_means.data_ptr<float>(), v_campos.data_ptr<float>());
    return {v_coeffs, v_means, v_campos};
}

}  // namespace

// ---- MCMC position noise (mcmc_noise.cpp) ---------------------------------------------------
namespace {

// In place on means [N,3]; the others as in NoiseArgs (logits any shape of N values).
void add_position_noise(Tensor means, const Tensor &quats, const Tensor &log_scales, const Tensor &logits,
                        const Tensor &eps, double scaler) {
    check(means, "means", 2);
    check(quats, "quats", 2);
    check(log_scales, "scales", 2);
    check(eps, "eps", 2);
    const int64_t n = means.size(0);
    TORCH_CHECK(logits.device().is_cpu() && logits.scalar_type() == at::kFloat && logits.is_contiguous() &&
                    logits.numel() == n, "opacity logits must be a contiguous float32 CPU tensor of N values");
    TORCH_CHECK(means.size(1) == 3 && quats.sizes() == at::IntArrayRef({n, 4}) &&
                    log_scales.sizes() == at::IntArrayRef({n, 3}) && eps.sizes() == at::IntArrayRef({n, 3}),
                "position noise needs means, scales, eps [N,3] and quats [N,4]");
    plr::NoiseArgs a{n, means.data_ptr<float>(), quats.data_ptr<float>(), log_scales.data_ptr<float>(),
                     logits.data_ptr<float>(), eps.data_ptr<float>(), static_cast<float>(scaler), threads()};
    plr::add_position_noise(a);
}

}  // namespace

// ---- SSIM loss (ssim.cpp) ------------------------------------------------------------------
namespace {

plr::SsimArgs ssim_args(const Tensor &x, const Tensor &y, const Tensor &taps, double c1, double c2,
                        bool valid) {
    check(x, "ssim img1", 3);
    check(y, "ssim img2", 3);
    check(taps, "ssim window", 1);
    TORCH_CHECK(x.sizes() == y.sizes(), "ssim images must have equal shapes");
    TORCH_CHECK(taps.size(0) % 2 == 1, "ssim window must have an odd number of taps");
    plr::SsimArgs a;
    a.P = x.size(0);
    a.H = static_cast<int>(x.size(1));
    a.W = static_cast<int>(x.size(2));
    a.K = static_cast<int>(taps.size(0));
    TORCH_CHECK(!valid || (a.H >= a.K && a.W >= a.K), "ssim 'valid' needs images of at least the window size");
    a.x = x.data_ptr<float>();
    a.y = y.data_ptr<float>();
    a.g = taps.data_ptr<float>();
    a.C1 = static_cast<float>(c1);
    a.C2 = static_cast<float>(c2);
    a.valid = valid;
    a.nthreads = threads();
    return a;
}

// A training mask [B,H,W] (bool or uint8, 0 = ignore) over images of `planes` planes [B*C,H,W]
// of H x W, or nullptr for None.
const uint8_t *ssim_mask(const c10::optional<Tensor> &mask, int64_t planes, int64_t H, int64_t W) {
    if (!mask.has_value()) return nullptr;
    const Tensor &m = *mask;
    TORCH_CHECK(m.device().is_cpu() && (m.scalar_type() == at::kBool || m.scalar_type() == at::kByte),
                "ssim mask must be a bool or uint8 CPU tensor");
    TORCH_CHECK(m.is_contiguous() && m.dim() == 3 && m.size(1) == H && m.size(2) == W && m.size(0) > 0 &&
                    planes % m.size(0) == 0,
                "ssim mask must be a contiguous [B,H,W] matching the images");
    return static_cast<const uint8_t *>(m.data_ptr());
}

// ssim_args plus the mask (a.mask stays nullptr for None).
plr::SsimArgs masked_ssim_args(const Tensor &x, const Tensor &y, const Tensor &taps, double c1, double c2,
                               bool valid, const c10::optional<Tensor> &mask) {
    auto a = ssim_args(x, y, taps, c1, c2, valid);
    a.mask = ssim_mask(mask, a.P, a.H, a.W);
    if (a.mask) a.mask_channels = static_cast<int>(a.P / mask->size(0));
    return a;
}

// x, y [P,H,W] -> (sum of the SSIM map, its partial-derivative maps d_mu, d_xx, d_xy [P,H,W]
// or empty when with_grad is false, sum of |x - y| when with_l1 else 0, the number of map values
// and of L1 values summed). With a mask [B,H,W] (x, y zeroed under it by ssim_planes) the sums,
// the counts and the derivatives skip the ignored pixels.
std::tuple<double, Tensor, Tensor, Tensor, double, int64_t, int64_t> ssim_fwd(
    const Tensor &x, const Tensor &y, const Tensor &taps, double c1, double c2, bool valid, bool with_grad,
    bool with_l1, const c10::optional<Tensor> &mask) {
    auto a = masked_ssim_args(x, y, taps, c1, c2, valid, mask);
    const size_t items = static_cast<size_t>(plr::ssim_items(a));
    std::vector<double> partial(items), l1_partial(with_l1 ? items : 0);
    Tensor d_mu = with_grad ? empty_large(x.sizes(), x.options()) : Tensor();
    Tensor d_xx = with_grad ? empty_large(x.sizes(), x.options()) : Tensor();
    Tensor d_xy = with_grad ? empty_large(x.sizes(), x.options()) : Tensor();
    plr::ssim_fwd(a, partial.data(), with_grad ? d_mu.data_ptr<float>() : nullptr,
                  with_grad ? d_xx.data_ptr<float>() : nullptr, with_grad ? d_xy.data_ptr<float>() : nullptr,
                  with_l1 ? l1_partial.data() : nullptr);
    double sum = 0.0, l1 = 0.0;
    for (double s : partial) sum += s;  // fixed order: independent of the thread count
    for (double s : l1_partial) l1 += s;
    int64_t map_count = 0, all_count = 0;
    plr::ssim_counts(a, &map_count, &all_count);
    return {sum, d_mu, d_xx, d_xy, l1, map_count, all_count};
}

// scale * d(sum of the map)/dx + l1_scale * sign(x - y): [P,H,W], or with
// out_channels = C > 0 the images' own layout [P/C,H,W,C]; 0 under the mask.
Tensor ssim_bwd(const Tensor &x, const Tensor &y, const Tensor &taps, double c1, double c2, bool valid,
                double scale, const Tensor &d_mu, const Tensor &d_xx, const Tensor &d_xy, double l1_scale,
                int64_t out_channels, const c10::optional<Tensor> &mask) {
    auto a = masked_ssim_args(x, y, taps, c1, c2, valid, mask);
    check(d_mu, "ssim d_mu", 3);
    check(d_xx, "ssim d_xx", 3);
    check(d_xy, "ssim d_xy", 3);
    TORCH_CHECK(out_channels >= 0 && (out_channels == 0 || a.P % out_channels == 0),
                "ssim out_channels must divide the number of planes");
    a.out_channels = static_cast<int>(out_channels);
    Tensor v_x = out_channels ? empty_large({a.P / out_channels, a.H, a.W, out_channels}, x.options())
                              : empty_large(x.sizes(), x.options());
    plr::ssim_bwd(a, static_cast<float>(scale), d_mu.data_ptr<float>(), d_xx.data_ptr<float>(),
                  d_xy.data_ptr<float>(), v_x.data_ptr<float>(), static_cast<float>(l1_scale));
    return v_x;
}

// Images [B,H,W,C] (float32, or uint8 holding value * 255; any strides) as
// the SSIM kernels' planes [B*C,H,W] float32, converted in parallel; 0 where
// the mask [B,H,W] (optional) is 0.
Tensor ssim_planes(const Tensor &img, const c10::optional<Tensor> &mask) {
    TORCH_CHECK(img.device().is_cpu() && img.dim() == 4, "ssim images must be [B,H,W,C] CPU tensors");
    TORCH_CHECK(img.scalar_type() == at::kFloat || img.scalar_type() == at::kByte, "ssim images must be float32 or uint8");
    const int64_t B = img.size(0), H = img.size(1), W = img.size(2), C = img.size(3);
    const uint8_t *keep = ssim_mask(mask, B, H, W);
    TORCH_CHECK(!keep || mask->size(0) == B, "ssim mask must have one [H,W] per image");
    Tensor out = empty_large({B * C, H, W}, img.options().dtype(at::kFloat));
    const int64_t st[4] = {img.stride(0), img.stride(1), img.stride(2), img.stride(3)};
    if (img.scalar_type() == at::kByte)
        plr::to_planes(img.data_ptr<uint8_t>(), st, B, H, W, C, out.data_ptr<float>(), threads(), keep);
    else
        plr::to_planes(img.data_ptr<float>(), st, B, H, W, C, out.data_ptr<float>(), threads(), keep);
    return out;
}

}  // namespace

// The ISA level this binary was compiled for, from the compiler's own macros
// (what -march=native or POINTRIX_NATIVE_ARCH actually enabled).
static std::string isa() {
#if defined(PLR_SCALAR)
    return "scalar (no vector extensions)";
#elif defined(__AVX512F__)
    return "x86-64-v4 (AVX-512)";
#elif defined(__AVX2__) && defined(__FMA__)
    return "x86-64-v3 (AVX2+FMA)";
#elif defined(__AVX__)
    return "x86-64 (AVX)";
#elif defined(__SSE4_2__)
    return "x86-64-v2 (SSE4.2)";
#elif defined(__x86_64__)
    return "x86-64 (SSE2)";
#elif defined(__aarch64__)
    return "aarch64 (NEON)";
#else
    return "generic vectors";
#endif
}

// pool.h's helpers as torch's intra-op threads: each of the n runs fn once.
// Under OpenMP, at::parallel_for's pragma is compiled into this file: built
// without -fopenmp (_build.py's portable fallback) it would run them one after
// another on the caller, so that build keeps its own pool.
#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
constexpr bool kTorchThreads = false;
#else
constexpr bool kTorchThreads = true;
#endif
void torch_threads(int n, void (*fn)(void *), void *ctx) {
    at::parallel_for(0, n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) fn(ctx);
    });
}

// Whether torch's OpenMP workers spin between parallel ops: unless
// OMP_WAIT_POLICY is PASSIVE (libgomp read it when torch loaded it; `import
// pointrix_lite` before torch sets it). Spinning workers hold the cores that
// helpers of our own would need, so the extension works through them; sleeping
// ones leave the cores to our pool, which, unlike an OpenMP region, never waits
// for a helper that starts late (docs/native.md, "Threads", has the figures).
bool omp_workers_spin() {
    const char *policy = std::getenv("OMP_WAIT_POLICY");
    return !(policy && strcasecmp(policy, "passive") == 0);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    if (kTorchThreads && omp_workers_spin()) plr::set_thread_runner(&torch_threads);
    m.def("isa", &isa);
    m.def("project_fwd", &project_fwd);
    m.def("project_bwd", &project_bwd);
    m.def("bin_tiles", &bin_tiles);
    m.def("scratch_kept", [] {
        size_t blocks = 0, bytes = 0;
        uint64_t requests = 0;
        plr::kept_blocks(&blocks, &bytes, &requests);
        return std::make_tuple(static_cast<int64_t>(blocks), static_cast<int64_t>(bytes),
                               static_cast<int64_t>(requests));
    });
    m.def("raster_fwd", &raster_fwd);
    m.def("raster_bwd", &raster_bwd);
    m.def("sh_fwd", &sh_fwd);
    m.def("sh_bwd", &sh_bwd);
    m.def("ssim_fwd", &ssim_fwd);
    m.def("ssim_bwd", &ssim_bwd);
    m.def("ssim_planes", &ssim_planes);
    m.def("add_position_noise", &add_position_noise);
}
