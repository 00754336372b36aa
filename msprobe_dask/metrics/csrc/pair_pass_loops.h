/* The loops of pair_pass.c, included once per instruction set: every name goes through NAMED (the
   including file defines it to add a suffix; AVX2_LOOPS where the set has AVX2, FMA and F16C: the loops
   then take their vectors by intrinsics) and Result, State, the kinds, the orders, DOTS, LANES, STAGED
   and lanes_sum come from there. */

#undef DOTS_LOOP
#undef STATS
#undef SPAN_STATS_f
#undef SPAN_STATS_d
#undef RUN
#undef PASS
#undef PASSES

static inline float NAMED(as_float)(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t NAMED(float_bits)(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline uint64_t NAMED(double_bits)(double f) {
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float NAMED(f16_to_f32)(uint16_t h) {
    /* exact: the exponent rebiased, Inf/NaN moved to float32's top exponent, subnormals renormalised by
       a subtraction; selects rather than branches, so that the loops vectorise */
    const uint32_t top = 0x7c00u << 13;
    uint32_t o = ((uint32_t)(h & 0x7fffu) << 13) + ((127u - 15u) << 23);
    uint32_t exp = ((uint32_t)h << 13) & top;
    o += exp == top ? (128u - 16u) << 23 : 0;
    uint32_t sub = NAMED(float_bits)(NAMED(as_float)(o + (1u << 23)) - NAMED(as_float)(113u << 23));
    return NAMED(as_float)((exp == 0 ? sub : o) | (uint32_t)(h & 0x8000u) << 16);
}

/* Elements first..first+count-1 of a tensor of `kind`, widened exactly to float64 into `out`. */
static inline void NAMED(stage)(const void *p, int kind, Py_ssize_t first, int count, double *restrict out) {
    int j = 0;
    switch (kind) {
    case F16: {
        const uint16_t *h = (const uint16_t *)p + first;
#ifdef AVX2_LOOPS
        for (; j + 8 <= count; j += 8) {
            __m256 f = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + j)));
            _mm256_storeu_pd(out + j, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
            _mm256_storeu_pd(out + j + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
        }
#endif
        for (; j < count; j++) out[j] = (double)NAMED(f16_to_f32)(h[j]);
        break;
    }
    case BF16: {
        const uint16_t *h = (const uint16_t *)p + first;
        for (; j < count; j++) out[j] = (double)NAMED(as_float)((uint32_t)h[j] << 16);
        break;
    }
    case F32: {
        const float *f = (const float *)p + first;
        for (; j < count; j++) out[j] = (double)f[j];
        break;
    }
    default:
        memcpy(out, (const double *)p + first, (size_t)count * sizeof(double));
    }
}

/* The four products of each of `count` staged elements (a multiple of L) added into lane i mod L of the
   dot products n.b, n.n, b.b, d.d (`acc[dot][lane]`), each with one rounding (fma). With AVX2 one dot
   at a time over the block, so that its lanes stay in registers (8 of 16 for 32 lanes), and the largest
   |d| taken on the way (into `s`, on its bits as STATS takes it, in 4 chains so that their latency does
   not hold the loop; STATS then leaves it out); without AVX2 element by element. */
#ifdef AVX2_LOOPS
#define DOTS_LOOP(L)                                                                                    \
    static inline void NAMED(dots##L)(const double *restrict x, const double *restrict y, int count,    \
                                      double acc[DOTS][L], State *restrict s) {                         \
        const __m256i sign = _mm256_set1_epi64x(INT64_MAX);                                            \
        __m256i top[4];                                                                                 \
        for (int c = 0; c < 4; c++) top[c] = _mm256_set1_epi64x((int64_t)s->max_abs);                  \
        for (int k = 0; k < DOTS; k++) {                                                                \
            __m256d a[L / 4];                                                                           \
            for (int l = 0; l < L / 4; l++) a[l] = _mm256_loadu_pd(acc[k] + 4 * l);                    \
            for (int q = 0; q < count; q += L) {                                                        \
                for (int l = 0; l < L / 4; l++) {                                                       \
                    __m256d xv = _mm256_loadu_pd(x + q + 4 * l), yv = _mm256_loadu_pd(y + q + 4 * l);   \
                    if (k == 1) yv = xv;                                                                \
                    if (k == 2) xv = yv;                                                                \
                    if (k == 3) {                                                                       \
                        xv = yv = _mm256_sub_pd(xv, yv);                                                \
                        __m256i ad = _mm256_and_si256(_mm256_castpd_si256(xv), sign);                   \
                        __m256i *t = &top[l % 4];                                                       \
                        *t = _mm256_blendv_epi8(*t, ad, _mm256_cmpgt_epi64(ad, *t));                   \
                    }                                                                                   \
                    a[l] = _mm256_fmadd_pd(xv, yv, a[l]);                                               \
                }                                                                                       \
            }                                                                                           \
            for (int l = 0; l < L / 4; l++) _mm256_storeu_pd(acc[k] + 4 * l, a[l]);                    \
        }                                                                                               \
        int64_t lanes[16];                                                                              \
        for (int c = 0; c < 4; c++) _mm256_storeu_si256((__m256i *)(lanes + 4 * c), top[c]);          \
        for (int c = 0; c < 16; c++)                                                                    \
            s->max_abs = (uint64_t)lanes[c] > s->max_abs ? (uint64_t)lanes[c] : s->max_abs;             \
    }
#else
#define DOTS_LOOP(L)                                                                                    \
    static inline void NAMED(dots##L)(const double *restrict x, const double *restrict y, int count,    \
                                      double acc[DOTS][L], State *restrict s) {                         \
        (void)s;                                                                                        \
        for (int q = 0; q < count; q += L) {                                                            \
            for (int l = 0; l < L; l++) {                                                               \
                double xv = x[q + l], yv = y[q + l], d = xv - yv;                                       \
                acc[0][l] = fma(xv, yv, acc[0][l]);                                                     \
                acc[1][l] = fma(xv, xv, acc[1][l]);                                                     \
                acc[2][l] = fma(yv, yv, acc[2][l]);                                                     \
                acc[3][l] = fma(d, d, acc[3][l]);                                                       \
            }                                                                                           \
        }                                                                                               \
    }
#endif

DOTS_LOOP(16)
DOTS_LOOP(32)

/* One product of each dot added to `dots` (a run's last size mod 16 elements, one by one): with one
   rounding (fma) if `fused`, else rounded once as a product and once as a sum. */
static inline void NAMED(dots1)(double x, double y, int fused, double dots[DOTS]) {
    double d = x - y;
    if (fused) {
        dots[0] = fma(x, y, dots[0]);
        dots[1] = fma(x, x, dots[1]);
        dots[2] = fma(y, y, dots[2]);
        dots[3] = fma(d, d, dots[3]);
    } else {
        dots[0] += x * y;
        dots[1] += x * x;
        dots[2] += y * y;
        dots[3] += d * d;
    }
}

/* The maxima and counts of `count` staged elements (at most STAGED) into `s` (the largest |d| only if
   `with_abs`: AVX2's dots take it).
   The maxima of the absolute values are taken on their bits, which order non-negative floats as their
   values (and put a NaN above all: only NaN/Inf inputs make one, and Python then falls back). Where
   bench is not 0 a 0 is added in place of eps, which changes only a -0 in n into +0, and n - b is then
   -b either way (no branches, so that the loop vectorises). The counts of one block fit in 32 bits. */
#define STATS(S, REAL, UINT)                                                                            \
    static inline void NAMED(stats##S)(const double *restrict x, const double *restrict y, int count,   \
                                       int with_abs, State *restrict s, REAL e, REAL l1, REAL l5) {      \
        uint64_t max_abs = s->max_abs;                                                                  \
        UINT max_rel = (UINT)s->max_rel;                                                                \
        int32_t under1 = 0, under5 = 0;                                                                 \
        if (with_abs)                                                                                   \
            for (int j = 0; j < count; j++) {                                                           \
                uint64_t ad = NAMED(double_bits)(fabs(x[j] - y[j]));                                    \
                max_abs = ad > max_abs ? ad : max_abs;                                                  \
            }                                                                                           \
        for (int j = 0; j < count; j++) {                                                               \
            REAL xr = (REAL)x[j];                                                                       \
            REAL yr = (REAL)y[j];                                                                       \
            REAL z = yr == 0 ? e : 0;                                                                   \
            xr += z;                                                                                    \
            yr += z;                                                                                    \
            REAL r = REAL##_abs((xr - yr) / yr);                                                        \
            UINT rb = NAMED(REAL##_bits)(r);                                                            \
            max_rel = rb > max_rel ? rb : max_rel;                                                      \
            under1 += r < l1;                                                                           \
            under5 += r < l5;                                                                           \
        }                                                                                               \
        s->max_abs = max_abs;                                                                           \
        s->max_rel = max_rel;                                                                           \
        s->under1 += under1;                                                                            \
        s->under5 += under5;                                                                            \
    }

STATS(_f, float, uint32_t)
STATS(_d, double, uint64_t)

#ifdef AVX2_LOOPS
/* 8 elements of a float16, bfloat16 or float32 tensor from element `at`, as float32 (exactly). */
static inline __m256 NAMED(load8)(const void *p, int kind, Py_ssize_t at) {
    if (kind == F32) return _mm256_loadu_ps((const float *)p + at);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + at));
    if (kind == F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* STATS's relative error, its maximum and counts for float32 relative errors, 8 lanes at a time straight
   from the tensors (no float64 staging): `count` (a multiple of 8) elements from `first`, the same
   float32 arithmetic element by element. */
static inline void NAMED(stats8)(const void *n, int nk, const void *b, int bk, Py_ssize_t first, int count,
                                 State *restrict s, float e, float l1, float l5) {
    const __m256 zero = _mm256_setzero_ps(), ev = _mm256_set1_ps(e), v1 = _mm256_set1_ps(l1);
    const __m256 v5 = _mm256_set1_ps(l5), magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MAX));
    __m256i top = _mm256_set1_epi32((int32_t)(uint32_t)s->max_rel);
    __m256i c1 = _mm256_setzero_si256(), c5 = _mm256_setzero_si256();
    for (int j = 0; j < count; j += 8) {
        __m256 xr = NAMED(load8)(n, nk, first + j), yr = NAMED(load8)(b, bk, first + j);
        __m256 z = _mm256_and_ps(_mm256_cmp_ps(yr, zero, _CMP_EQ_OQ), ev);
        xr = _mm256_add_ps(xr, z);
        yr = _mm256_add_ps(yr, z);
        __m256 r = _mm256_and_ps(_mm256_div_ps(_mm256_sub_ps(xr, yr), yr), magnitude);
        top = _mm256_max_epu32(top, _mm256_castps_si256(r));
        c1 = _mm256_sub_epi32(c1, _mm256_castps_si256(_mm256_cmp_ps(r, v1, _CMP_LT_OQ)));
        c5 = _mm256_sub_epi32(c5, _mm256_castps_si256(_mm256_cmp_ps(r, v5, _CMP_LT_OQ)));
    }
    uint32_t tops[8];
    int32_t u1[8], u5[8];
    _mm256_storeu_si256((__m256i *)tops, top);
    _mm256_storeu_si256((__m256i *)u1, c1);
    _mm256_storeu_si256((__m256i *)u5, c5);
    uint32_t max_rel = (uint32_t)s->max_rel;
    for (int l = 0; l < 8; l++) {
        max_rel = tops[l] > max_rel ? tops[l] : max_rel;
        s->under1 += u1[l];
        s->under5 += u5[l];
    }
    s->max_rel = max_rel;
}
#endif

/* The maxima and counts of a staged block of `count` elements (a multiple of 16) from `first`. */
#ifdef AVX2_LOOPS
#define SPAN_STATS_f(NK, BK)                                                                            \
    if (NK != F64 && BK != F64)                                                                         \
        NAMED(stats8)(n, NK, b, BK, first + i, count, s, e, l1, l5);                                    \
    else                                                                                                \
        NAMED(stats_f)(x, y, count, 0, s, e, l1, l5);
#define SPAN_STATS_d(NK, BK) NAMED(stats_d)(x, y, count, 0, s, e, l1, l5);
#else
#define SPAN_STATS_f(NK, BK) NAMED(stats_f)(x, y, count, 1, s, e, l1, l5);
#define SPAN_STATS_d(NK, BK) NAMED(stats_d)(x, y, count, 1, s, e, l1, l5);
#endif

/* One run [first, first + size) of the dots, summed as OpenBLAS's ddot kernel for `order` sums it (see
   pair_pass.c): SkylakeX first takes 32-lane blocks and folds the lanes to 16; then 16-lane blocks; the
   16 lanes summed in the order's tree; then the last size mod 16 products one by one. The elements are
   staged (widened to float64) STAGED at a time, a multiple of 32, so that each span's blocks are
   whole. */
#define RUN(NAME, NK, BK, S, REAL)                                                                      \
    static void NAME(const void *n, const void *b, Py_ssize_t first, Py_ssize_t size, int order,        \
                     State *s, double dots[DOTS], REAL e, REAL l1, REAL l5) {                            \
        double x[STAGED], y[STAGED], wide[DOTS][LANES] = {{0}}, lanes[DOTS][16];                         \
        Py_ssize_t with16 = size & -(Py_ssize_t)16, i = 0;                                              \
        Py_ssize_t wide_end = order == SKYLAKEX ? with16 & -(Py_ssize_t)LANES : 0;                      \
        while (i < wide_end) {                                                                          \
            int count = (int)(wide_end - i < STAGED ? wide_end - i : STAGED);                           \
            NAMED(stage)(n, NK, first + i, count, x);                                                   \
            NAMED(stage)(b, BK, first + i, count, y);                                                   \
            NAMED(dots32)(x, y, count, wide, s);                                                        \
            SPAN_STATS##S(NK, BK)                                                                       \
            i += count;                                                                                 \
        }                                                                                               \
        for (int k = 0; k < DOTS; k++)                                                                  \
            for (int q = 0; q < 4; q++)                                                                 \
                for (int l = 0; l < 4; l++)                                                             \
                    lanes[k][4 * q + l] = wide[k][8 * q + l] + wide[k][8 * q + 4 + l];                  \
        while (i < with16) {                                                                            \
            int count = (int)(with16 - i < STAGED ? with16 - i : STAGED);                               \
            NAMED(stage)(n, NK, first + i, count, x);                                                   \
            NAMED(stage)(b, BK, first + i, count, y);                                                   \
            NAMED(dots16)(x, y, count, lanes, s);                                                       \
            SPAN_STATS##S(NK, BK)                                                                       \
            i += count;                                                                                 \
        }                                                                                               \
        for (int k = 0; k < DOTS; k++) dots[k] = with16 ? lanes_sum(lanes[k], order) : 0.0;             \
        if (i < size) {                                                                                 \
            int count = (int)(size - i);                                                                \
            NAMED(stage)(n, NK, first + i, count, x);                                                   \
            NAMED(stage)(b, BK, first + i, count, y);                                                   \
            for (int j = 0; j < count; j++) NAMED(dots1)(x[j], y[j], order == SKYLAKEX, dots);          \
            NAMED(stats##S)(x, y, count, 1, s, e, l1, l5);                                              \
        }                                                                                               \
    }

#ifndef ADD_RUNS
/* The runs one after the other (the call given, with first, count and dots), each run's dots added to
 * res's in order. */
#define ADD_RUNS(...)                                                                                   \
    Py_ssize_t first = 0;                                                                               \
    for (int r = 0; r < runs; r++) {                                                                    \
        double dots[DOTS];                                                                              \
        Py_ssize_t count = ends[r] - first;                                                             \
        __VA_ARGS__;                                                                                    \
        for (int k = 0; k < DOTS; k++) res.dots[k] = res.dots[k] + dots[k];                             \
        first = ends[r];                                                                                \
    }
#endif

/* The whole pass: the runs one after the other, each run's dots added to the totals in order. */
#define PASS(NAME, NK, BK, S, REAL)                                                                     \
    RUN(CAT2(NAME, _run), NK, BK, S, REAL)                                                              \
    static Result NAME(const void *n, const void *b, const Py_ssize_t *ends, int runs, int order,       \
                       double eps, double t1, double t5) {                                               \
        Result res = {0};                                                                               \
        State s = {0};                                                                                  \
        ADD_RUNS(CAT2(NAME, _run)(n, b, first, count, order, &s, dots, (REAL)eps, (REAL)t1, (REAL)t5))  \
        uint64_t abs_bits = s.max_abs;                                                                  \
        UINT_OF##S rel_bits = (UINT_OF##S)s.max_rel;                                                    \
        REAL rel_value;                                                                                 \
        memcpy(&res.max_abs, &abs_bits, sizeof res.max_abs);                                            \
        memcpy(&rel_value, &rel_bits, sizeof rel_value);                                                \
        res.max_rel = (double)rel_value;                                                                \
        res.under1 = (Py_ssize_t)s.under1;                                                              \
        res.under5 = (Py_ssize_t)s.under5;                                                              \
        return res;                                                                                     \
    }

/* One pass per (n kind, b kind, relative error's dtype): the kinds are constants in each. */
#define PASSES(S, REAL)                                                                                 \
    PASS(NAMED(p00##S), 0, 0, S, REAL) PASS(NAMED(p01##S), 0, 1, S, REAL)                               \
    PASS(NAMED(p02##S), 0, 2, S, REAL) PASS(NAMED(p03##S), 0, 3, S, REAL)                               \
    PASS(NAMED(p10##S), 1, 0, S, REAL) PASS(NAMED(p11##S), 1, 1, S, REAL)                               \
    PASS(NAMED(p12##S), 1, 2, S, REAL) PASS(NAMED(p13##S), 1, 3, S, REAL)                               \
    PASS(NAMED(p20##S), 2, 0, S, REAL) PASS(NAMED(p21##S), 2, 1, S, REAL)                               \
    PASS(NAMED(p22##S), 2, 2, S, REAL) PASS(NAMED(p23##S), 2, 3, S, REAL)                               \
    PASS(NAMED(p30##S), 3, 0, S, REAL) PASS(NAMED(p31##S), 3, 1, S, REAL)                               \
    PASS(NAMED(p32##S), 3, 2, S, REAL) PASS(NAMED(p33##S), 3, 3, S, REAL)                               \
    static const PassFn NAMED(passes##S)[4][4] = {                                                      \
        {NAMED(p00##S), NAMED(p01##S), NAMED(p02##S), NAMED(p03##S)},                                   \
        {NAMED(p10##S), NAMED(p11##S), NAMED(p12##S), NAMED(p13##S)},                                   \
        {NAMED(p20##S), NAMED(p21##S), NAMED(p22##S), NAMED(p23##S)},                                   \
        {NAMED(p30##S), NAMED(p31##S), NAMED(p32##S), NAMED(p33##S)}};

PASSES(_f, float)
PASSES(_d, double)
