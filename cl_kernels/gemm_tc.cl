// ---- the tensor-core GEMM (NVIDIA, compute capability 8.0+: the host appends this file to
// batch_layers.cl and adds -DGEMM_TC): gemm_fast_*'s arguments, NDRange, split over k, zeros past
// the edges and epilogues, with the products on the tensor cores (mma.sync through inline PTX).
// fp32 accuracy by "3xTF32" (as CUTLASS): each operand x splits into big = tf32(x) and small =
// x - big, and C accumulates small*big + big*small + big*big in fp32; small*small (about 2^-22 of
// the product) is dropped. The tensor cores add into C with truncation, so the error grows with
// the depth summed (on an H100: 8e-6 of max |C| at k_len 1024, 1e-5 at 1568; gemm_fast: 1e-6).
// The sum over k runs in the tensor cores' order, not 0, 1, ..., but the same inputs still give
// the same bits.
// A group's 128x128 tile of C: 8 warps of 2 (m) x 4 (n), each 64x32 as 4x4 m16n8k8 tiles. The
// slices of A and B (128 x 16, ft_fetch's loads) are double-buffered in __local memory as floats
// and split as a warp loads its fragments: per k step of 8, its B fragments, then for each m tile
// its A fragment and that tile's 12 mma (fewer live registers than all fragments at once).
#if defined(GEMM_TC) && defined(FT_LD)  // with gemm_fast_* (gpu-local, the large tiles), whose loads it uses
#define TC_LD 136  // an r-contiguous slice Xs[k][r]: rows 128 + 8, the fragments' t*TC_LD + g on distinct banks
#define TC_LDK 20  // a k-contiguous slice Xs[r][k]: rows 16 + 4, g*TC_LDK + t on distinct banks
#define TC_SLICE (128 * TC_LDK)  // a buffer (the larger of the two layouts)

// The 3xTF32 split: big = x rounded to tf32 (nearest, ties away: the low 13 bits zero), small = x - big
// (exact); the tensor cores read the top 19 bits of each, so small loses about 2^-22 of x.
inline void tc_split(float x, uint* big, uint* small) {
    *big = (as_uint(x) + 0x1000u) & 0xffffe000u;
    *small = as_uint(x - as_float(*big));
}

// c += a b for the warp's m16n8k8 tile, tf32 operands and fp32 sums. Lane 4g + t holds
// a = A(g, t), A(g+8, t), A(g, t+4), A(g+8, t+4); b = B(t, g), B(t+4, g);
// c = C(g, 2t), C(g, 2t+1), C(g+8, 2t), C(g+8, 2t+1).
inline void tc_mma(float* c, const uint* a, const uint* b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ft_fetch's two float4 of a 128 x 16 slice into __local: r-contiguous as Xs[k][r] (rows TC_LD),
// k-contiguous as Xs[r][k] (rows TC_LDK).
inline void tc_stash(const float4* v, __local float* Xs, int rcontig, int lid) {
    if (rcontig) {
        *(__local float4*)(Xs + (lid / 32) * TC_LD + 4 * (lid % 32)) = v[0];
        *(__local float4*)(Xs + (8 + lid / 32) * TC_LD + 4 * (lid % 32)) = v[1];
    } else {
        *(__local float4*)(Xs + (lid / 4) * TC_LDK + 4 * (lid % 4)) = v[0];
        *(__local float4*)(Xs + (64 + lid / 4) * TC_LDK + 4 * (lid % 4)) = v[1];
    }
}

inline void gemm_tc_body(int M, int N, int K, int k_len, __global const float* A, int a_off, int a_m, int a_k,
                         __global const float* B, int b_off, int b_k, int b_n, __global float* C, int c_off, int c_m,
                         int c_n, int c_z, int mode, int act, __global const float* E, int e_off, int a_vec, int b_vec,
                         const int a_mcontig, const int b_ncontig, __local float* As, __local float* Bs) {
    const int lid = (int)get_local_id(0), lane = lid % 32, g = lane / 4, t = lane % 4, z = (int)get_group_id(2);
    const int tm = (int)get_group_id(1) * 128, tn = (int)get_group_id(0) * 128;
    const int wm = lid / 128 * 64, wn = lid / 32 % 4 * 32;  // the warp's 64 x 32 of the tile
    a_off += z * k_len * a_k;
    b_off += z * k_len * b_k;
    c_off += z * c_z;
    K = min(k_len, K - z * k_len);
    // Element (r, k) of a staged slice: Xs[r*xr + k*xk].
    const int ar = a_mcontig ? 1 : TC_LDK, ak = a_mcontig ? TC_LD : 1;
    const int br = b_ncontig ? 1 : TC_LDK, bk = b_ncontig ? TC_LD : 1;
    float acc[4][4][4];  // [m tile][n tile][c]
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
    float4 ra[2], rb[2];
    ft_fetch(ra, A, a_off, a_m, a_k, M, K, tm, 0, a_mcontig, a_vec, lid);
    ft_fetch(rb, B, b_off, b_n, b_k, N, K, tn, 0, b_ncontig, b_vec, lid);
    tc_stash(ra, As, a_mcontig, lid);
    tc_stash(rb, Bs, b_ncontig, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    int cur = 0;
    for (int k0 = 0; k0 < K; k0 += 16) {
        const int more = k0 + 16 < K;
        if (more) {
            ft_fetch(ra, A, a_off, a_m, a_k, M, K, tm, k0 + 16, a_mcontig, a_vec, lid);
            ft_fetch(rb, B, b_off, b_n, b_k, N, K, tn, k0 + 16, b_ncontig, b_vec, lid);
        }
        __local const float* as = As + cur * TC_SLICE + (wm + g) * ar + t * ak;
        __local const float* bs = Bs + cur * TC_SLICE + (wn + g) * br + t * bk;
#pragma unroll
        for (int kk = 0; kk < 16; kk += 8) {
            uint b[4][2][2];  // [n tile][big, small][fragment register]
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h) tc_split(bs[j * 8 * br + (kk + h * 4) * bk], &b[j][0][h], &b[j][1][h]);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                uint a[2][4];  // [big, small][fragment register]
#pragma unroll
                for (int h = 0; h < 4; ++h)
                    tc_split(as[(i * 16 + h % 2 * 8) * ar + (kk + h / 2 * 4) * ak], &a[0][h], &a[1][h]);
#pragma unroll
                for (int j = 0; j < 4; ++j) tc_mma(acc[i][j], a[1], b[j][0]);
#pragma unroll
                for (int j = 0; j < 4; ++j) tc_mma(acc[i][j], a[0], b[j][1]);
#pragma unroll
                for (int j = 0; j < 4; ++j) tc_mma(acc[i][j], a[0], b[j][0]);
            }
        }
        if (more) {
            tc_stash(ra, As + (cur ^ 1) * TC_SLICE, a_mcontig, lid);
            tc_stash(rb, Bs + (cur ^ 1) * TC_SLICE, b_ncontig, lid);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        cur ^= 1;
    }
    // Each lane's pairs of neighbouring columns, as float2 where C's rows allow.
    const int c_vec = c_n == 1 && c_off % 2 == 0 && c_m % 2 == 0;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = tm + wm + i * 16 + h * 8 + g;
            if (m >= M) continue;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int n = tn + wn + j * 8 + 2 * t, at = m * c_m + n * c_n;
                const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                if (c_vec && n + 1 < N) {
                    *(__global float2*)(C + c_off + at) = (float2)(epilogue(v0, at, m, n, mode, act, E, e_off),
                                                                   epilogue(v1, at + 1, m, n + 1, mode, act, E, e_off));
                    continue;
                }
                if (n < N) C[c_off + at] = epilogue(v0, at, m, n, mode, act, E, e_off);
                if (n + 1 < N) C[c_off + at + c_n] = epilogue(v1, at + c_n, m, n + 1, mode, act, E, e_off);
            }
        }
}

#define GEMM_TC_KERNEL(NAME, A_M, B_N)                                                                              \
    __kernel __attribute__((reqd_work_group_size(256, 1, 1))) void NAME(                                           \
        int M, int N, int K, int k_len, __global const float* A, int a_off, int a_m, int a_k,                      \
        __global const float* B, int b_off, int b_k, int b_n, __global float* C, int c_off, int c_m, int c_n,      \
        int c_z, int mode, int act, __global const float* E, int e_off, int a_vec, int b_vec) {                    \
        __local float As[2 * TC_SLICE] __attribute__((aligned(16)));                                               \
        __local float Bs[2 * TC_SLICE] __attribute__((aligned(16)));                                               \
        gemm_tc_body(M, N, K, k_len, A, a_off, a_m, a_k, B, b_off, b_k, b_n, C, c_off, c_m, c_n, c_z, mode, act,   \
                     E, e_off, a_vec, b_vec, A_M, B_N, As, Bs);                                                    \
    }
GEMM_TC_KERNEL(gemm_tc_kk, 0, 0)  // as gemm_fast_kk, ...
GEMM_TC_KERNEL(gemm_tc_kn, 0, 1)
GEMM_TC_KERNEL(gemm_tc_mn, 1, 1)
GEMM_TC_KERNEL(gemm_tc_mk, 1, 0)
#endif
