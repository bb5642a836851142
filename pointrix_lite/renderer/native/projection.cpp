// EWA projection of 3D Gaussians (gsplat ProjectionEWA3DGSFused.cu, pinhole),
// forward and hand-written backward. Matrices are row-major m[row][col].
#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "pool.h"
#include "kernels.h"

namespace plr {
namespace {

struct M3 {
    float m[3][3];
};

inline M3 mul(const M3 &A, const M3 &B) {
    M3 R;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            R.m[i][j] = A.m[i][0] * B.m[0][j] + A.m[i][1] * B.m[1][j] + A.m[i][2] * B.m[2][j];
    return R;
}

inline M3 transpose(const M3 &A) {
    M3 R;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) R.m[i][j] = A.m[j][i];
    return R;
}

inline M3 quat_to_rotmat(const float *q) {
    float w = q[0], x = q[1], y = q[2], z = q[3];
    float inv = 1.f / std::sqrt(x * x + y * y + z * z + w * w);
    w *= inv, x *= inv, y *= inv, z *= inv;
    float x2 = x * x, y2 = y * y, z2 = z * z;
    float xy = x * y, xz = x * z, yz = y * z, wx = w * x, wy = w * y, wz = w * z;
    return M3{{{1.f - 2.f * (y2 + z2), 2.f * (xy - wz), 2.f * (xz + wy)},
               {2.f * (xy + wz), 1.f - 2.f * (x2 + z2), 2.f * (yz - wx)},
               {2.f * (xz - wy), 2.f * (yz + wx), 1.f - 2.f * (x2 + y2)}}};
}

// Covariance R S S R^T; also returns R for the backward.
inline M3 covariance(const float *q, const float *s, M3 *rot) {
    M3 R = quat_to_rotmat(q);
    M3 M;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) M.m[i][j] = R.m[i][j] * s[j];
    if (rot) *rot = R;
    return mul(M, transpose(M));
}

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

inline void to_camera(const Camera &c, const float *p, float *pc) {
    for (int i = 0; i < 3; ++i)
        pc[i] = c.R.m[i][0] * p[0] + c.R.m[i][1] * p[1] + c.R.m[i][2] * p[2] + c.t[i];
}

// 2x3 Jacobian of the pinhole projection at camera-space point pc (clamped).
inline void jacobian(const Camera &c, const float *pc, float J[2][3], float *tx, float *ty) {
    float x = pc[0], y = pc[1], z = pc[2];
    float rz = 1.f / z, rz2 = rz * rz;
    *tx = z * std::min(c.lim_x_pos, std::max(-c.lim_x_neg, x * rz));
    *ty = z * std::min(c.lim_y_pos, std::max(-c.lim_y_neg, y * rz));
    J[0][0] = c.fx * rz, J[0][1] = 0.f, J[0][2] = -c.fx * *tx * rz2;
    J[1][0] = 0.f, J[1][1] = c.fy * rz, J[1][2] = -c.fy * *ty * rz2;
}

// cov2d = J S J^T for a 2x3 J.
inline void project_cov(const float J[2][3], const M3 &S, float cov[2][2]) {
    float JS[2][3];
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
    const int64_t total = a.C * a.N;
    parallel_chunks(total, 4096, a.nthreads, [&](int64_t begin, int64_t end) {
    for (int64_t idx = begin; idx < end; ++idx) {
        const int64_t cid = idx / a.N, gid = idx % a.N;
        radii[2 * idx] = radii[2 * idx + 1] = 0;
        means2d[2 * idx] = means2d[2 * idx + 1] = 0.f;
        depths[idx] = 0.f;
        conics[3 * idx] = conics[3 * idx + 1] = conics[3 * idx + 2] = 0.f;
        if (compensations) compensations[idx] = 0.f;

        Camera cam = camera(a.viewmats + 16 * cid, a.Ks + 9 * cid, a.width, a.height);
        float pc[3];
        to_camera(cam, a.means + 3 * gid, pc);
        if (pc[2] < a.near_plane || pc[2] > a.far_plane) continue;

        M3 cov = covariance(a.quats + 4 * gid, a.scales + 3 * gid, nullptr);
        M3 cov_c = mul(mul(cam.R, cov), transpose(cam.R));
        float J[2][3], tx, ty, c2[2][2];
        jacobian(cam, pc, J, &tx, &ty);
        project_cov(J, cov_c, c2);
        float rz = 1.f / pc[2];
        float mx = cam.fx * pc[0] * rz + cam.cx;
        float my = cam.fy * pc[1] * rz + cam.cy;

        float det_orig = c2[0][0] * c2[1][1] - c2[0][1] * c2[1][0];
        c2[0][0] += a.eps2d;
        c2[1][1] += a.eps2d;
        float det = c2[0][0] * c2[1][1] - c2[0][1] * c2[1][0];
        float comp = std::sqrt(std::max(0.f, det_orig / det));
        if (det <= 0.f) continue;
        float inv_det = 1.f / det;

        float opac = a.opacities[gid];
        if (a.calc_compensations) opac *= comp;
        if (opac < kAlphaThreshold) continue;
        // opacity-aware box (arXiv 2402.00525, B.2)
        float extend = std::min(3.33f, std::sqrt(2.f * std::log(opac / kAlphaThreshold)));
        float rx = std::ceil(extend * std::sqrt(c2[0][0]));
        float ry = std::ceil(extend * std::sqrt(c2[1][1]));
        if (rx <= a.radius_clip && ry <= a.radius_clip) continue;
        if (mx + rx <= 0 || mx - rx >= a.width || my + ry <= 0 || my - ry >= a.height) continue;

        radii[2 * idx] = static_cast<int32_t>(rx);
        radii[2 * idx + 1] = static_cast<int32_t>(ry);
        means2d[2 * idx] = mx;
        means2d[2 * idx + 1] = my;
        depths[idx] = pc[2];
        conics[3 * idx] = c2[1][1] * inv_det;
        conics[3 * idx + 1] = -c2[0][1] * inv_det;
        conics[3 * idx + 2] = c2[0][0] * inv_det;
        if (compensations) compensations[idx] = comp;
    }
    });
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
        for (int64_t g = chunk * kChunk; g < std::min(N, (chunk + 1) * kChunk); ++g) {
            const float *q = a.quats + 4 * g, *s = a.scales + 3 * g, *p = a.means + 3 * g;
            float vmean[3] = {0.f, 0.f, 0.f};
            M3 vcov{};  // world-space covariance gradient, summed over cameras
            bool any = false;
            M3 R, cov;
            for (int64_t c = 0; c < C; ++c) {
                const int64_t idx = c * N + g;
                if (radii[2 * idx] <= 0 || radii[2 * idx + 1] <= 0) continue;
                if (!any) {
                    cov = covariance(q, s, &R);
                    any = true;
                }
                const Camera &cam = cams[c];
                // conic = inverse(cov2d): d cov2d = -P dP P with P the conic
                const float *P = conics + 3 * idx;
                const float *vP = v_conics + 3 * idx;
                float Pm[2][2] = {{P[0], P[1]}, {P[1], P[2]}};
                float vPm[2][2] = {{vP[0], vP[1] * 0.5f}, {vP[1] * 0.5f, vP[2]}};
                float tmp[2][2], vc2[2][2];
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 2; ++j) tmp[i][j] = Pm[i][0] * vPm[0][j] + Pm[i][1] * vPm[1][j];
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 2; ++j) vc2[i][j] = -(tmp[i][0] * Pm[0][j] + tmp[i][1] * Pm[1][j]);
                if (v_compensations) {
                    // comp = sqrt(det(S) / det(S + eps I)), see gsplat add_blur_vjp
                    float comp = compensations[idx];
                    float det_conic = Pm[0][0] * Pm[1][1] - Pm[0][1] * Pm[1][0];
                    float v_sqr = v_compensations[idx] * 0.5f / (comp + 1e-6f);
                    float one_m = 1.f - comp * comp;
                    vc2[0][0] += v_sqr * (one_m * Pm[0][0] - a.eps2d * det_conic);
                    vc2[0][1] += v_sqr * (one_m * Pm[0][1]);
                    vc2[1][0] += v_sqr * (one_m * Pm[1][0]);
                    vc2[1][1] += v_sqr * (one_m * Pm[1][1] - a.eps2d * det_conic);
                }

                float pc[3];
                to_camera(cam, p, pc);
                M3 cov_c = mul(mul(cam.R, cov), transpose(cam.R));
                float J[2][3], tx, ty;
                jacobian(cam, pc, J, &tx, &ty);
                const float x = pc[0], y = pc[1], z = pc[2];
                const float rz = 1.f / z, rz2 = rz * rz, rz3 = rz2 * rz;
                const float vm0 = v_means2d[2 * idx], vm1 = v_means2d[2 * idx + 1];

                // v_cov_c = J^T vc2 J
                float vcJ[2][3];
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 3; ++j) vcJ[i][j] = vc2[i][0] * J[0][j] + vc2[i][1] * J[1][j];
                M3 vcov_c;
                for (int i = 0; i < 3; ++i)
                    for (int j = 0; j < 3; ++j) vcov_c.m[i][j] = J[0][i] * vcJ[0][j] + J[1][i] * vcJ[1][j];

                float vpc[3] = {cam.fx * rz * vm0, cam.fy * rz * vm1,
                                -(cam.fx * x * vm0 + cam.fy * y * vm1) * rz2};
                // v_J = vc2 J S^T + vc2^T J S (S symmetric)
                float JS[2][3];
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 3; ++j)
                        JS[i][j] = J[i][0] * cov_c.m[0][j] + J[i][1] * cov_c.m[1][j] + J[i][2] * cov_c.m[2][j];
                float vJ[2][3];
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 3; ++j)
                        vJ[i][j] = (vc2[i][0] + vc2[0][i]) * JS[0][j] + (vc2[i][1] + vc2[1][i]) * JS[1][j];
                if (x * rz <= cam.lim_x_pos && x * rz >= -cam.lim_x_neg)
                    vpc[0] += -cam.fx * rz2 * vJ[0][2];
                else
                    vpc[2] += -cam.fx * rz3 * vJ[0][2] * tx;
                if (y * rz <= cam.lim_y_pos && y * rz >= -cam.lim_y_neg)
                    vpc[1] += -cam.fy * rz2 * vJ[1][2];
                else
                    vpc[2] += -cam.fy * rz3 * vJ[1][2] * ty;
                vpc[2] += -cam.fx * rz2 * vJ[0][0] - cam.fy * rz2 * vJ[1][1] +
                          2.f * cam.fx * tx * rz3 * vJ[0][2] + 2.f * cam.fy * ty * rz3 * vJ[1][2];
                vpc[2] += v_depths[idx];

                // world <- camera: v_mean += R^T vpc, v_cov += R^T vcov_c R
                for (int i = 0; i < 3; ++i)
                    vmean[i] += cam.R.m[0][i] * vpc[0] + cam.R.m[1][i] * vpc[1] + cam.R.m[2][i] * vpc[2];
                M3 wv = mul(mul(transpose(cam.R), vcov_c), cam.R);
                for (int i = 0; i < 3; ++i)
                    for (int j = 0; j < 3; ++j) vcov.m[i][j] += wv.m[i][j];

                if (my_vm) {
                    // v_R += vpc p^T + vcov_c R cov^T + vcov_c^T R cov ; v_t += vpc
                    M3 Rc = mul(cam.R, cov);
                    M3 A = mul(vcov_c, Rc), B = mul(transpose(vcov_c), Rc);
                    float *o = my_vm + c * 12;
                    for (int i = 0; i < 3; ++i) {
                        for (int j = 0; j < 3; ++j) o[i * 4 + j] += vpc[i] * p[j] + A.m[i][j] + B.m[i][j];
                        o[i * 4 + 3] += vpc[i];
                    }
                }
            }
            float *vq = v_quats + 4 * g, *vs = v_scales + 3 * g, *vmo = v_means + 3 * g;
            for (int i = 0; i < 3; ++i) vmo[i] = vmean[i];
            if (!any) {
                vq[0] = vq[1] = vq[2] = vq[3] = 0.f;
                vs[0] = vs[1] = vs[2] = 0.f;
                continue;
            }
            // covariance = M M^T, M = R S: v_M = (V + V^T) M, v_R = v_M S
            M3 M, vM, G;
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j) M.m[i][j] = R.m[i][j] * s[j];
            M3 Vs;
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j) Vs.m[i][j] = vcov.m[i][j] + vcov.m[j][i];
            vM = mul(Vs, M);
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j) G.m[i][j] = vM.m[i][j] * s[j];
            for (int j = 0; j < 3; ++j)
                vs[j] = R.m[0][j] * vM.m[0][j] + R.m[1][j] * vM.m[1][j] + R.m[2][j] * vM.m[2][j];
            // rotation matrix -> normalised quaternion -> raw quaternion
            float w = q[0], x = q[1], y = q[2], z = q[3];
            float inv = 1.f / std::sqrt(x * x + y * y + z * z + w * w);
            w *= inv, x *= inv, y *= inv, z *= inv;
            float vn[4] = {
                2.f * (x * (G.m[2][1] - G.m[1][2]) + y * (G.m[0][2] - G.m[2][0]) + z * (G.m[1][0] - G.m[0][1])),
                2.f * (-2.f * x * (G.m[1][1] + G.m[2][2]) + y * (G.m[1][0] + G.m[0][1]) +
                       z * (G.m[2][0] + G.m[0][2]) + w * (G.m[2][1] - G.m[1][2])),
                2.f * (x * (G.m[1][0] + G.m[0][1]) - 2.f * y * (G.m[0][0] + G.m[2][2]) +
                       z * (G.m[2][1] + G.m[1][2]) + w * (G.m[0][2] - G.m[2][0])),
                2.f * (x * (G.m[2][0] + G.m[0][2]) + y * (G.m[2][1] + G.m[1][2]) -
                       2.f * z * (G.m[0][0] + G.m[1][1]) + w * (G.m[1][0] - G.m[0][1]))};
            float qn[4] = {w, x, y, z};
            float d = vn[0] * qn[0] + vn[1] * qn[1] + vn[2] * qn[2] + vn[3] * qn[3];
            for (int i = 0; i < 4; ++i) vq[i] = (vn[i] - d * qn[i]) * inv;
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
