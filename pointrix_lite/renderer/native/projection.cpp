// EWA projection of 3D Gaussians (gsplat ProjectionEWA3DGSFused.cu, pinhole),
// forward and hand-written backward. Matrices are row-major m[row][col].
// Both run on blocks of kL Gaussians, one per SIMD lane (lanes.h): every lane
// evaluates the whole formula and culled lanes are masked afterwards; what
// needs libm (log, ceil for the radii) stays per lane in scalar code.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "pool.h"
#include "kernels.h"
#include "lanes.h"

namespace plr {
namespace {

template <class T>
struct M3T {
    T m[3][3];
};
typedef M3T<float> M3;

template <class T, class U>
inline M3T<T> mul(const M3T<U> &A, const M3T<T> &B) {
    M3T<T> R;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            R.m[i][j] = A.m[i][0] * B.m[0][j] + A.m[i][1] * B.m[1][j] + A.m[i][2] * B.m[2][j];
    return R;
}
template <class T>
inline M3T<T> mul(const M3T<T> &A, const M3 &B) {
    M3T<T> R;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            R.m[i][j] = A.m[i][0] * B.m[0][j] + A.m[i][1] * B.m[1][j] + A.m[i][2] * B.m[2][j];
    return R;
}
inline M3 mul(const M3 &A, const M3 &B) { return mul<float, float>(A, B); }

template <class T>
inline M3T<T> transpose(const M3T<T> &A) {
    M3T<T> R;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) R.m[i][j] = A.m[j][i];
    return R;
}

inline float rsqrt_exact(float x) { return 1.f / std::sqrt(x); }
#if defined(PLR_HAVE_VEC)
inline Lane rsqrt_exact(Lane x) { return 1.f / lsqrt(x); }
#endif

// q = (w, x, y, z), unnormalised
template <class T>
inline M3T<T> quat_to_rotmat(T w, T x, T y, T z) {
    T inv = rsqrt_exact(x * x + y * y + z * z + w * w);
    w *= inv, x *= inv, y *= inv, z *= inv;
    T x2 = x * x, y2 = y * y, z2 = z * z;
    T xy = x * y, xz = x * z, yz = y * z, wx = w * x, wy = w * y, wz = w * z;
    return M3T<T>{{{1.f - 2.f * (y2 + z2), 2.f * (xy - wz), 2.f * (xz + wy)},
                   {2.f * (xy + wz), 1.f - 2.f * (x2 + z2), 2.f * (yz - wx)},
                   {2.f * (xz - wy), 2.f * (yz + wx), 1.f - 2.f * (x2 + y2)}}};
}

// Covariance R S S R^T from R and the scales.
template <class T>
inline M3T<T> covariance_from(const M3T<T> &R, const T *s) {
    M3T<T> M;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) M.m[i][j] = R.m[i][j] * s[j];
    return mul(M, transpose(M));
}

template <class T>
inline T bcast_as(float s);
template <>
inline float bcast_as<float>(float s) { return s; }
#if defined(PLR_HAVE_VEC)
template <>
inline Lane bcast_as<Lane>(float s) { return bcast(s); }
#endif

struct Camera {
    M3 R;
    float t[3];
    float fx, fy, cx, cy;
    float lim_x_pos, lim_x_neg, lim_y_pos, lim_y_neg;
};

inline Camera camera(const float *vm, const float *K, int width, int height) {
    Camera c;
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) c.R.m[i][j] = vm[i * 4 + j];
        c.t[i] = vm[i * 4 + 3];
    }
    c.fx = K[0], c.cx = K[2], c.fy = K[4], c.cy = K[5];
    // gsplat clamps the Jacobian's x/z, y/z to 1.3x the field of view so
    // Gaussians far outside the image do not explode in size.
    float tan_fovx = 0.5f * width / c.fx, tan_fovy = 0.5f * height / c.fy;
    c.lim_x_pos = (width - c.cx) / c.fx + 0.3f * tan_fovx;
    c.lim_x_neg = c.cx / c.fx + 0.3f * tan_fovx;
    c.lim_y_pos = (height - c.cy) / c.fy + 0.3f * tan_fovy;
    c.lim_y_neg = c.cy / c.fy + 0.3f * tan_fovy;
    return c;
}

template <class T>
inline void to_camera(const Camera &c, const T *p, T *pc) {
    for (int i = 0; i < 3; ++i)
        pc[i] = c.R.m[i][0] * p[0] + c.R.m[i][1] * p[1] + c.R.m[i][2] * p[2] + c.t[i];
}

// 2x3 Jacobian of the pinhole projection at camera-space point pc (clamped).
template <class T>
inline void jacobian(const Camera &c, const T *pc, T J[2][3], T *tx, T *ty) {
    T x = pc[0], y = pc[1], z = pc[2];
    T rz = 1.f / z, rz2 = rz * rz;
    *tx = z * lmin<T>(bcast_as<T>(c.lim_x_pos), lmax<T>(bcast_as<T>(-c.lim_x_neg), x * rz));
    *ty = z * lmin<T>(bcast_as<T>(c.lim_y_pos), lmax<T>(bcast_as<T>(-c.lim_y_neg), y * rz));
    const T zero = bcast_as<T>(0.f);
    J[0][0] = c.fx * rz, J[0][1] = zero, J[0][2] = -c.fx * *tx * rz2;
    J[1][0] = zero, J[1][1] = c.fy * rz, J[1][2] = -c.fy * *ty * rz2;
}

// cov2d = J S J^T for a 2x3 J.
template <class T>
inline void project_cov(const T J[2][3], const M3T<T> &S, T cov[2][2]) {
    T JS[2][3];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
            JS[i][j] = J[i][0] * S.m[0][j] + J[i][1] * S.m[1][j] + J[i][2] * S.m[2][j];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
            cov[i][j] = JS[i][0] * J[j][0] + JS[i][1] * J[j][1] + JS[i][2] * J[j][2];
}

}  // namespace

void project_fwd(const ProjectArgs &a, int32_t *radii, float *means2d, float *depths,
                 float *conics, float *compensations) {
    std::vector<Camera> cams(a.C);
    for (int64_t c = 0; c < a.C; ++c) cams[c] = camera(a.viewmats + 16 * c, a.Ks + 9 * c, a.width, a.height);
    constexpr int64_t kChunk = 4096;  // a multiple of kL
    const int64_t per_cam = (a.N + kChunk - 1) / kChunk;
    parallel_items(a.C * per_cam, a.nthreads, [&] { return [&](int64_t item) {
        const int64_t cid = item / per_cam;
        const Camera &cam = cams[cid];
        const int64_t end = std::min(a.N, (item % per_cam + 1) * kChunk);
        alignas(64) float in[10 * kL];
        for (int64_t g0 = item % per_cam * kChunk; g0 < end; g0 += kL) {
            const int n = static_cast<int>(std::min<int64_t>(kL, end - g0));
            // every lane computes the whole formula (culled lanes too, their values are dropped below)
            to_lanes(a.means + 3 * g0, 3, n, 3, in);
            to_lanes(a.quats + 4 * g0, 4, n, 4, in + 3 * kL);
            to_lanes(a.scales + 3 * g0, 3, n, 3, in + 7 * kL);
            const Lane p[3] = {load(in), load(in + kL), load(in + 2 * kL)};
            const Lane sc[3] = {load(in + 7 * kL), load(in + 8 * kL), load(in + 9 * kL)};
            Lane pc[3];
            to_camera(cam, p, pc);
            M3T<Lane> R = quat_to_rotmat<Lane>(load(in + 3 * kL), load(in + 4 * kL), load(in + 5 * kL),
                                               load(in + 6 * kL));
            M3T<Lane> cov = covariance_from(R, sc);
            M3T<Lane> cov_c = mul(mul(cam.R, cov), transpose(cam.R));
            Lane J[2][3], tx, ty, c2[2][2];
            jacobian(cam, pc, J, &tx, &ty);
            project_cov(J, cov_c, c2);
            const Lane rz = 1.f / pc[2];
            alignas(64) float mx[kL], my[kL], z[kL], det[kL], comp[kL], ca[kL], cb[kL], cc[kL];
            store(mx, cam.fx * pc[0] * rz + cam.cx);
            store(my, cam.fy * pc[1] * rz + cam.cy);
            store(z, pc[2]);
            const Lane det_orig = c2[0][0] * c2[1][1] - c2[0][1] * c2[1][0];
            c2[0][0] += a.eps2d;
            c2[1][1] += a.eps2d;
            const Lane d = c2[0][0] * c2[1][1] - c2[0][1] * c2[1][0];
            store(det, d);
            store(comp, lsqrt(lmax(Lane{}, det_orig / d)));
            const Lane inv_det = 1.f / d;
            store(ca, c2[1][1]);  // cov2d xx, yy (the box) and the conic
            store(cc, c2[0][0]);
            store(cb, -c2[0][1] * inv_det);
            alignas(64) float con_a[kL], con_c[kL];
            store(con_a, c2[1][1] * inv_det);
            store(con_c, c2[0][0] * inv_det);
            for (int j = 0; j < n; ++j) {
                const int64_t idx = cid * a.N + g0 + j, gid = g0 + j;
                radii[2 * idx] = radii[2 * idx + 1] = 0;
                means2d[2 * idx] = means2d[2 * idx + 1] = 0.f;
                depths[idx] = 0.f;
                conics[3 * idx] = conics[3 * idx + 1] = conics[3 * idx + 2] = 0.f;
                if (compensations) compensations[idx] = 0.f;
                if (z[j] < a.near_plane || z[j] > a.far_plane) continue;
                if (det[j] <= 0.f) continue;
                float opac = a.opacities[gid];
                if (a.calc_compensations) opac *= comp[j];
                if (opac < kAlphaThreshold) continue;
                // opacity-aware box (arXiv 2402.00525, B.2)
                float extend = std::min(3.33f, std::sqrt(2.f * std::log(opac / kAlphaThreshold)));
                float rx = std::ceil(extend * std::sqrt(cc[j]));
                float ry = std::ceil(extend * std::sqrt(ca[j]));
                if (rx <= a.radius_clip && ry <= a.radius_clip) continue;
                if (mx[j] + rx <= 0 || mx[j] - rx >= a.width || my[j] + ry <= 0 || my[j] - ry >= a.height) continue;
                radii[2 * idx] = static_cast<int32_t>(rx);
                radii[2 * idx + 1] = static_cast<int32_t>(ry);
                means2d[2 * idx] = mx[j];
                means2d[2 * idx + 1] = my[j];
                depths[idx] = z[j];
                conics[3 * idx] = con_a[j];
                conics[3 * idx + 1] = cb[j];
                conics[3 * idx + 2] = con_c[j];
                if (compensations) compensations[idx] = comp[j];
            }
        }
    }; });
}

void project_bwd(const ProjectArgs &a, const int32_t *radii, const float *conics,
                 const float *compensations, const float *v_means2d, const float *v_depths,
                 const float *v_conics, const float *v_compensations, float *v_means,
                 float *v_quats, float *v_scales, float *v_viewmats) {
    const int64_t C = a.C, N = a.N;
    std::vector<Camera> cams(C);
    for (int64_t c = 0; c < C; ++c)
        cams[c] = camera(a.viewmats + 16 * c, a.Ks + 9 * c, a.width, a.height);
    // viewmat gradients are summed over Gaussians in fixed chunks (not per
    // thread) so the result does not depend on the thread count.
    constexpr int64_t kChunk = 1024;
    const int64_t n_chunks = (N + kChunk - 1) / kChunk;
    std::vector<float> vm_buf(v_viewmats ? static_cast<size_t>(n_chunks) * C * 12 : 0, 0.f);

    parallel_items(n_chunks, a.nthreads, [&] { return [&](int64_t chunk) {
        // accumulate locally, write once: neighbouring chunks share cache lines
        std::vector<float> vm_local(v_viewmats ? C * 12 : 0, 0.f);
        float *my_vm = v_viewmats ? vm_local.data() : nullptr;
        alignas(64) float in[10 * kL], cam_in[11 * kL], vis[kL], any_vis[kL];
        const int64_t end = std::min(N, (chunk + 1) * kChunk);
        for (int64_t g0 = chunk * kChunk; g0 < end; g0 += kL) {
            const int n = static_cast<int>(std::min<int64_t>(kL, end - g0));
            // every lane computes the whole formula; culled (Gaussian, camera) lanes are masked out
            to_lanes(a.means + 3 * g0, 3, n, 3, in);
            to_lanes(a.quats + 4 * g0, 4, n, 4, in + 3 * kL);
            to_lanes(a.scales + 3 * g0, 3, n, 3, in + 7 * kL);
            const Lane p[3] = {load(in), load(in + kL), load(in + 2 * kL)};
            const Lane qw = load(in + 3 * kL), qx = load(in + 4 * kL), qy = load(in + 5 * kL), qz = load(in + 6 * kL);
            const Lane s[3] = {load(in + 7 * kL), load(in + 8 * kL), load(in + 9 * kL)};
            const M3T<Lane> R = quat_to_rotmat<Lane>(qw, qx, qy, qz);
            const M3T<Lane> cov = covariance_from(R, s);
            Lane vmean[3] = {Lane{}, Lane{}, Lane{}};
            M3T<Lane> vcov;  // world-space covariance gradient, summed over cameras
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j) vcov.m[i][j] = Lane{};
            std::fill(any_vis, any_vis + kL, 0.f);
            for (int64_t c = 0; c < C; ++c) {
                const int64_t idx0 = c * N + g0;
                bool any = false;
                for (int j = 0; j < kL; ++j) {
                    const bool v = j < n && radii[2 * (idx0 + j)] > 0 && radii[2 * (idx0 + j) + 1] > 0;
                    vis[j] = v ? 1.f : 0.f;
                    any |= v;
                    if (v) any_vis[j] = 1.f;
                }
                if (!any) continue;
                const auto on = load(vis) > 0.f;
                const Camera &cam = cams[c];
                to_lanes(conics + 3 * idx0, 3, n, 3, cam_in);
                to_lanes(v_conics + 3 * idx0, 3, n, 3, cam_in + 3 * kL);
                to_lanes(v_means2d + 2 * idx0, 2, n, 2, cam_in + 6 * kL);
                to_lanes(v_depths + idx0, 1, n, 1, cam_in + 8 * kL);
                // conic = inverse(cov2d): d cov2d = -P dP P with P the conic
                const Lane P0 = load(cam_in), P1 = load(cam_in + kL), P2 = load(cam_in + 2 * kL);
                const Lane vP1h = load(cam_in + 4 * kL) * 0.5f;
                const Lane Pm[2][2] = {{P0, P1}, {P1, P2}};
                const Lane vPm[2][2] = {{load(cam_in + 3 * kL), vP1h}, {vP1h, load(cam_in + 5 * kL)}};
                Lane tmp[2][2], vc2[2][2];
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 2; ++j) tmp[i][j] = Pm[i][0] * vPm[0][j] + Pm[i][1] * vPm[1][j];
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 2; ++j) vc2[i][j] = -(tmp[i][0] * Pm[0][j] + tmp[i][1] * Pm[1][j]);
                if (v_compensations) {
                    // comp = sqrt(det(S) / det(S + eps I)), see gsplat add_blur_vjp
                    to_lanes(compensations + idx0, 1, n, 1, cam_in + 9 * kL);
                    to_lanes(v_compensations + idx0, 1, n, 1, cam_in + 10 * kL);
                    const Lane comp = load(cam_in + 9 * kL);
                    const Lane det_conic = Pm[0][0] * Pm[1][1] - Pm[0][1] * Pm[1][0];
                    const Lane v_sqr = load(cam_in + 10 * kL) * 0.5f / (comp + 1e-6f);
                    const Lane one_m = 1.f - comp * comp;
                    vc2[0][0] += v_sqr * (one_m * Pm[0][0] - a.eps2d * det_conic);
                    vc2[0][1] += v_sqr * (one_m * Pm[0][1]);
                    vc2[1][0] += v_sqr * (one_m * Pm[1][0]);
                    vc2[1][1] += v_sqr * (one_m * Pm[1][1] - a.eps2d * det_conic);
                }

                Lane pc[3];
                to_camera(cam, p, pc);
                const M3T<Lane> cov_c = mul(mul(cam.R, cov), transpose(cam.R));
                Lane J[2][3], tx, ty;
                jacobian(cam, pc, J, &tx, &ty);
                const Lane x = pc[0], y = pc[1], z = pc[2];
                const Lane rz = 1.f / z, rz2 = rz * rz, rz3 = rz2 * rz;
                const Lane vm0 = load(cam_in + 6 * kL), vm1 = load(cam_in + 7 * kL);

                // v_cov_c = J^T vc2 J
                Lane vcJ[2][3];
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 3; ++j) vcJ[i][j] = vc2[i][0] * J[0][j] + vc2[i][1] * J[1][j];
                M3T<Lane> vcov_c;
                for (int i = 0; i < 3; ++i)
                    for (int j = 0; j < 3; ++j) vcov_c.m[i][j] = J[0][i] * vcJ[0][j] + J[1][i] * vcJ[1][j];

                Lane vpc[3] = {cam.fx * rz * vm0, cam.fy * rz * vm1, -(cam.fx * x * vm0 + cam.fy * y * vm1) * rz2};
                // v_J = vc2 J S^T + vc2^T J S (S symmetric)
                Lane JS[2][3];
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 3; ++j)
                        JS[i][j] = J[i][0] * cov_c.m[0][j] + J[i][1] * cov_c.m[1][j] + J[i][2] * cov_c.m[2][j];
                Lane vJ[2][3];
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 3; ++j)
                        vJ[i][j] = (vc2[i][0] + vc2[0][i]) * JS[0][j] + (vc2[i][1] + vc2[1][i]) * JS[1][j];
                // inside the clamp: through x / z, else through z only
                const auto in_x = (x * rz <= cam.lim_x_pos) & (x * rz >= -cam.lim_x_neg);
                vpc[0] = in_x ? vpc[0] + -cam.fx * rz2 * vJ[0][2] : vpc[0];
                vpc[2] = in_x ? vpc[2] : vpc[2] + -cam.fx * rz3 * vJ[0][2] * tx;
                const auto in_y = (y * rz <= cam.lim_y_pos) & (y * rz >= -cam.lim_y_neg);
                vpc[1] = in_y ? vpc[1] + -cam.fy * rz2 * vJ[1][2] : vpc[1];
                vpc[2] = in_y ? vpc[2] : vpc[2] + -cam.fy * rz3 * vJ[1][2] * ty;
                vpc[2] += -cam.fx * rz2 * vJ[0][0] - cam.fy * rz2 * vJ[1][1] + 2.f * cam.fx * tx * rz3 * vJ[0][2] +
                          2.f * cam.fy * ty * rz3 * vJ[1][2];
                vpc[2] += load(cam_in + 8 * kL);

                // world <- camera: v_mean += R^T vpc, v_cov += R^T vcov_c R
                for (int i = 0; i < 3; ++i)
                    vmean[i] = on ? vmean[i] + (cam.R.m[0][i] * vpc[0] + cam.R.m[1][i] * vpc[1] + cam.R.m[2][i] * vpc[2])
                                  : vmean[i];
                const M3T<Lane> wv = mul(mul(transpose(cam.R), vcov_c), cam.R);
                for (int i = 0; i < 3; ++i)
                    for (int j = 0; j < 3; ++j) vcov.m[i][j] = on ? vcov.m[i][j] + wv.m[i][j] : vcov.m[i][j];

                if (my_vm) {
                    // v_R += vpc p^T + vcov_c R cov^T + vcov_c^T R cov ; v_t += vpc
                    const M3T<Lane> Rc = mul(cam.R, cov);
                    const M3T<Lane> A = mul(vcov_c, Rc), B = mul(transpose(vcov_c), Rc);
                    alignas(64) float terms[12][kL];
                    for (int i = 0; i < 3; ++i) {
                        for (int j = 0; j < 3; ++j) store(terms[i * 4 + j], vpc[i] * p[j] + A.m[i][j] + B.m[i][j]);
                        store(terms[i * 4 + 3], vpc[i]);
                    }
                    float *o = my_vm + c * 12;
                    for (int j = 0; j < n; ++j)  // Gaussian order: the sums do not depend on kL
                        if (vis[j] > 0.f)
                            for (int k = 0; k < 12; ++k) o[k] += terms[k][j];
                }
            }
            alignas(64) float out[10][kL];
            for (int i = 0; i < 3; ++i) store(out[i], vmean[i]);
            // covariance = M M^T, M = R S: v_M = (V + V^T) M, v_R = v_M S
            M3T<Lane> M, Vs, G;
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j) M.m[i][j] = R.m[i][j] * s[j];
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j) Vs.m[i][j] = vcov.m[i][j] + vcov.m[j][i];
            const M3T<Lane> vM = mul(Vs, M);
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j) G.m[i][j] = vM.m[i][j] * s[j];
            for (int j = 0; j < 3; ++j)
                store(out[3 + j], R.m[0][j] * vM.m[0][j] + R.m[1][j] * vM.m[1][j] + R.m[2][j] * vM.m[2][j]);
            // rotation matrix -> normalised quaternion -> raw quaternion
            const Lane inv = rsqrt_exact(qx * qx + qy * qy + qz * qz + qw * qw);
            const Lane w = qw * inv, x = qx * inv, y = qy * inv, z = qz * inv;
            const Lane vn[4] = {
                2.f * (x * (G.m[2][1] - G.m[1][2]) + y * (G.m[0][2] - G.m[2][0]) + z * (G.m[1][0] - G.m[0][1])),
                2.f * (-2.f * x * (G.m[1][1] + G.m[2][2]) + y * (G.m[1][0] + G.m[0][1]) +
                       z * (G.m[2][0] + G.m[0][2]) + w * (G.m[2][1] - G.m[1][2])),
                2.f * (x * (G.m[1][0] + G.m[0][1]) - 2.f * y * (G.m[0][0] + G.m[2][2]) +
                       z * (G.m[2][1] + G.m[1][2]) + w * (G.m[0][2] - G.m[2][0])),
                2.f * (x * (G.m[2][0] + G.m[0][2]) + y * (G.m[2][1] + G.m[1][2]) -
                       2.f * z * (G.m[0][0] + G.m[1][1]) + w * (G.m[1][0] - G.m[0][1]))};
            const Lane qn[4] = {w, x, y, z};
            const Lane d = vn[0] * qn[0] + vn[1] * qn[1] + vn[2] * qn[2] + vn[3] * qn[3];
            for (int i = 0; i < 4; ++i) store(out[6 + i], (vn[i] - d * qn[i]) * inv);
            for (int j = 0; j < n; ++j) {
                const int64_t g = g0 + j;
                const bool any = any_vis[j] > 0.f;  // no camera sees it: zero quat / scale gradients
                for (int i = 0; i < 3; ++i) v_means[3 * g + i] = out[i][j];
                for (int i = 0; i < 3; ++i) v_scales[3 * g + i] = any ? out[3 + i][j] : 0.f;
                for (int i = 0; i < 4; ++i) v_quats[4 * g + i] = any ? out[6 + i][j] : 0.f;
            }
        }
        if (v_viewmats) std::copy(vm_local.begin(), vm_local.end(), vm_buf.begin() + chunk * C * 12);
    }; });
    if (v_viewmats) {
        for (int64_t c = 0; c < C; ++c) {
            float *o = v_viewmats + 16 * c;
            for (int k = 0; k < 16; ++k) o[k] = 0.f;
            for (int64_t k = 0; k < n_chunks; ++k)
                for (int i = 0; i < 3; ++i)
                    for (int j = 0; j < 4; ++j) o[i * 4 + j] += vm_buf[(static_cast<size_t>(k) * C + c) * 12 + i * 4 + j];
        }
    }
}

}  // namespace plr
