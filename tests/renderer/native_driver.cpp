// The native kernels without torch, called as bindings.cpp calls them (same argument structs,
// scratch buffers and order): SH colours, projection, binning, rasterization forward and
// backward, then the SH and projection backward. test_native_aarch64.py cross-compiles this
// with the kernel sources, runs it under qemu-aarch64 and compares its outputs with the
// extension's on this machine. One camera; the file formats are aarch64_scene.py's.
//
// usage: native_driver IN OUT
// IN: int32 N, W, H, tile_size, sh_degree, nthreads, then float32 means [N,3], quats [N,4],
//     scales [N,3], opacities [N], coeffs [N,K,3] (K = (degree+1)^2), viewmat [4,4], K [3,3],
//     campos [3], background [3], eps2d, near, far, radius_clip, v_colors_px [H,W,3],
//     v_alphas_px [H,W], v_depths [N].
// OUT: per result, in the order of aarch64_scene.OUTPUTS: int64 byte count, then the bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels.h"

namespace {

[[noreturn]] void die(const char *what) {
    std::fprintf(stderr, "native_driver: %s\n", what);
    std::exit(2);
}

template <class T>
std::vector<T> take(std::FILE *f, size_t n) {
    std::vector<T> v(n);
    if (n && std::fread(v.data(), sizeof(T), n, f) != n) die("input file too short");
    return v;
}

template <class T>
void put(std::FILE *f, const std::vector<T> &v) {
    const int64_t bytes = static_cast<int64_t>(v.size() * sizeof(T));
    if (std::fwrite(&bytes, sizeof bytes, 1, f) != 1 || (bytes && std::fwrite(v.data(), 1, bytes, f) != size_t(bytes)))
        die("cannot write the output file");
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 3) die("usage: native_driver IN OUT");
    std::FILE *in = std::fopen(argv[1], "rb");
    if (!in) die("cannot open the input file");
    const auto head = take<int32_t>(in, 6);
    const int64_t N = head[0];
    const int W = head[1], H = head[2], tile = head[3], degree = head[4], threads = head[5];
    const int K = (degree + 1) * (degree + 1), D = 3;
    const auto means = take<float>(in, N * 3), quats = take<float>(in, N * 4), scales = take<float>(in, N * 3);
    const auto opac = take<float>(in, N), coeffs = take<float>(in, N * K * 3);
    const auto viewmat = take<float>(in, 16), Ks = take<float>(in, 9), campos = take<float>(in, 3);
    const auto background = take<float>(in, 3), clip = take<float>(in, 4);
    const auto v_colors_px = take<float>(in, size_t(H) * W * D), v_alphas_px = take<float>(in, size_t(H) * W);
    const auto v_depths = take<float>(in, N);
    std::fclose(in);

    // the argument structs as bindings.cpp fills them, for C = 1 (designated initialisers: C++20)
    plr::ProjectArgs pa{.C = 1, .N = N, .means = means.data(), .quats = quats.data(), .scales = scales.data(),
                        .opacities = opac.data(), .viewmats = viewmat.data(), .Ks = Ks.data(), .width = W,
                        .height = H, .eps2d = clip[0], .near_plane = clip[1], .far_plane = clip[2],
                        .radius_clip = clip[3], .calc_compensations = false, .nthreads = threads};
    std::vector<int32_t> radii(N * 2);
    std::vector<float> means2d(N * 2), depths(N), conics(N * 3);
    plr::project_fwd(pa, radii.data(), means2d.data(), depths.data(), conics.data(), nullptr);

    // coefficients [1,N,K,3], contiguous
    const plr::ShArgs sa{.C = 1, .N = N, .K = K, .degree = degree, .means = means.data(), .campos = campos.data(),
                         .coeffs = coeffs.data(), .coeffs_cam_stride = N * K * 3, .radii = radii.data(),
                         .nthreads = threads};
    std::vector<float> colors(N * 3);
    plr::sh_fwd(sa, colors.data());

    const int tw = (W + tile - 1) / tile, th = (H + tile - 1) / tile;
    std::vector<plr::BoxHits> boxes(N);  // bin_count's scratch
    const plr::BinArgs ba{.C = 1, .N = N, .means2d = means2d.data(), .radii = radii.data(), .depths = depths.data(),
                          .conics = conics.data(), .opacities = opac.data(), .opac_cam_stride = N,
                          .boxes = boxes.data(), .width = W, .height = H, .tile_size = tile, .tile_w = tw,
                          .tile_h = th, .nthreads = threads};
    std::vector<int32_t> gauss_offsets(N + 1);
    const int64_t n = plr::bin_count(ba, gauss_offsets.data());
    std::vector<int32_t> tile_offsets(size_t(tw) * th + 1), flatten_ids(n), slot_by_pos(n);
    plr::bin_fill(ba, gauss_offsets.data(), tile_offsets.data(), flatten_ids.data(), slot_by_pos.data());

    plr::RasterArgs ra{.C = 1, .N = N, .D = D, .means2d = means2d.data(), .conics = conics.data(),
                       .colors = colors.data(), .colors_cam_stride = N * D, .opacities = opac.data(),
                       .opac_cam_stride = N, .backgrounds = background.data(), .width = W, .height = H,
                       .tile_size = tile, .tile_w = tw, .tile_h = th, .tile_offsets = tile_offsets.data(),
                       .flatten_ids = flatten_ids.data(), .nthreads = threads};
    const size_t px = size_t(H) * W;
    std::vector<float> out_c(px * D), out_a(px), out_T(px);
    std::vector<int32_t> last_ids(px), contrib(n);
    const int64_t evals =
        plr::raster_fwd(ra, out_c.data(), out_a.data(), out_T.data(), last_ids.data(), contrib.data());

    const int64_t vc[4] = {int64_t(px) * D, int64_t(W) * D, D, 1}, va[3] = {int64_t(px), W, 1};
    for (int i = 0; i < 4; ++i) ra.v_colors_stride[i] = vc[i];
    for (int i = 0; i < 3; ++i) ra.v_alphas_stride[i] = va[i];
    std::vector<float> v_means2d(N * 2), v_conics(N * 3), v_colors(N * D), v_opac(N), v_abs(N * 2);
    plr::raster_bwd(ra, out_T.data(), last_ids.data(), contrib.data(), v_colors_px.data(), v_alphas_px.data(),
                    gauss_offsets.data(), slot_by_pos.data(), v_means2d.data(), v_conics.data(), v_colors.data(),
                    v_opac.data(), v_abs.data());

    std::vector<float> v_coeffs(N * K * 3), v_means_sh(N * 3), v_campos(3);
    plr::sh_bwd(sa, colors.data(), v_colors.data(), v_coeffs.data(), v_means_sh.data(), v_campos.data());

    // bindings.cpp project_bwd: no opacities, zero clip planes, no compensations
    pa.opacities = nullptr;
    pa.near_plane = pa.far_plane = pa.radius_clip = 0.f;
    std::vector<float> v_means(N * 3), v_quats(N * 4), v_scales(N * 3), v_viewmat(16);
    plr::project_bwd(pa, radii.data(), conics.data(), nullptr, v_means2d.data(), v_depths.data(), v_conics.data(),
                     nullptr, v_means.data(), v_quats.data(), v_scales.data(), v_viewmat.data());

    std::FILE *out = std::fopen(argv[2], "wb");
    if (!out) die("cannot open the output file");
    put(out, radii), put(out, means2d), put(out, depths), put(out, conics), put(out, colors);
    put(out, gauss_offsets), put(out, tile_offsets), put(out, flatten_ids), put(out, slot_by_pos);
    put(out, out_c), put(out, out_a), put(out, out_T), put(out, last_ids), put(out, contrib);
    put(out, std::vector<int64_t>{evals});
    put(out, v_means2d), put(out, v_conics), put(out, v_colors), put(out, v_opac), put(out, v_abs);
    put(out, v_coeffs), put(out, v_means_sh), put(out, v_campos);
    put(out, v_means), put(out, v_quats), put(out, v_scales), put(out, v_viewmat);
    if (std::fclose(out) != 0) die("cannot write the output file");
    return 0;
}
