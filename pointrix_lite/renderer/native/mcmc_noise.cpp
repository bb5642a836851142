// MCMC's exploration noise on the means, one pass over the Gaussians: the torch
// code (strategy/ops.py inject_noise_to_position) builds every covariance with
// ~30 elementwise ops, a stack and two batched 3x3 products, 21 ms per step at
// 200k Gaussians on 2 cores, a fifth of a training step; this is the CPU twin of
// kernels/mcmc_noise.py (CUDA) with the same arithmetic: M = R(q) diag(exp(s))
// stays in registers and Sigma eps = M (M^T eps).
#include <algorithm>
#include <cmath>
#include <cstdint>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "kernels.h"
#include "pool.h"

namespace plr {
namespace {

// Subnormal floats in and out of this thread's arithmetic count as zero while it lives. The gate
// sigmoid(100 (1 - o - 0.995)) falls below 1e-36 for opacities above ~0.83, where most trained
// Gaussians are: its products with the covariance are then subnormal, and each costs a microcode
// assist (~100 cycles on x86): 63 ms instead of 2 ms for 200k Gaussians at opacity 0.85. A flushed
// noise term is below 2^-126, which adds nothing to a mean unless that mean is itself below ~1e-31.
class FlushSubnormals {
  public:
    FlushSubnormals() {
#if defined(__x86_64__) || defined(__i386__)
        saved_ = _mm_getcsr();
        _mm_setcsr(saved_ | 0x8040u);  // FTZ (bit 15) and DAZ (bit 6)
#elif defined(__aarch64__)
        asm volatile("mrs %0, fpcr" : "=r"(saved_));
        asm volatile("msr fpcr, %0" : : "r"(saved_ | (uint64_t(1) << 24)));  // FZ
#endif
    }
    ~FlushSubnormals() {
#if defined(__x86_64__) || defined(__i386__)
        _mm_setcsr(saved_);
#elif defined(__aarch64__)
        asm volatile("msr fpcr, %0" : : "r"(saved_));
#endif
    }
    FlushSubnormals(const FlushSubnormals &) = delete;
    FlushSubnormals &operator=(const FlushSubnormals &) = delete;

  private:
#if defined(__aarch64__)
    uint64_t saved_ = 0;
#else
    unsigned saved_ = 0;
#endif
};

}  // namespace

void add_position_noise(const NoiseArgs &a) {
    // Independent rows: the chunking changes nothing in the result, only who computes it.
    parallel_chunks(a.N, 16384, a.nthreads, [&](int64_t begin, int64_t end) {
        const FlushSubnormals flush;  // per chunk: pool threads keep their own mode between tasks
        for (int64_t i = begin; i < end; ++i) {
            const float *q = a.quats + 4 * i;
            const float *ls = a.log_scales + 3 * i;
            const float *e = a.eps + 3 * i;
            // F.normalize's clamp, as the torch code and the Triton kernel: projection.cpp's
            // quat_to_rotmat has none (a zero quaternion gives NaN there, the identity here).
            const float norm = std::max(std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]), 1e-12f);
            const float w = q[0] / norm, x = q[1] / norm, y = q[2] / norm, z = q[3] / norm;
            const float s0 = std::exp(ls[0]), s1 = std::exp(ls[1]), s2 = std::exp(ls[2]);
            const float m00 = (1.f - 2.f * (y * y + z * z)) * s0, m01 = 2.f * (x * y - w * z) * s1,
                        m02 = 2.f * (x * z + w * y) * s2;
            const float m10 = 2.f * (x * y + w * z) * s0, m11 = (1.f - 2.f * (x * x + z * z)) * s1,
                        m12 = 2.f * (y * z - w * x) * s2;
            const float m20 = 2.f * (x * z - w * y) * s0, m21 = 2.f * (y * z + w * x) * s1,
                        m22 = (1.f - 2.f * (x * x + y * y)) * s2;
            const float opacity = 1.f / (1.f + std::exp(-a.logits[i]));
            const float gate = 1.f / (1.f + std::exp(-100.f * ((1.f - opacity) - 0.995f))) * a.scaler;
            const float e0 = e[0] * gate, e1 = e[1] * gate, e2 = e[2] * gate;
            const float v0 = m00 * e0 + m10 * e1 + m20 * e2;  // M^T eps
            const float v1 = m01 * e0 + m11 * e1 + m21 * e2;
            const float v2 = m02 * e0 + m12 * e1 + m22 * e2;
            float *p = a.means + 3 * i;
            p[0] += m00 * v0 + m01 * v1 + m02 * v2;
            p[1] += m10 * v0 + m11 * v1 + m12 * v2;
            p[2] += m20 * v0 + m21 * v1 + m22 * v2;
        }
    });
}

}  // namespace plr
