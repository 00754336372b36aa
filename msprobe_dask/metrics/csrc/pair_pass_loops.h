/* The loops of pair_pass.c, included once per instruction set: every name goes through NAMED (the
   including file defines it to add a suffix; F16C_LOADS where the set converts float16 in hardware) and
   Result, State, the kinds, the orders, DOTS, LANES and lanes_sum come from there. */

#undef BLOCK
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
#ifdef F16C_LOADS
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

/* One block of staged elements: the maxima and counts into `s`, and each element's four products added
   into its own lane `a[dot][j]` of the dot products n.b, n.n, b.b, d.d: with one rounding (fma) if
   `fused`, else rounded once as a product and once as a sum.
   The maxima of the absolute values are taken on their bits, which order non-negative floats as their
   values (and put a NaN above all: only NaN/Inf inputs make one, and Python then falls back). Where
   bench is not 0 a 0 is added in place of eps, which changes only a -0 in n into +0, and n - b is then
   -b either way (no branches, so that the loop vectorises). */
#define BLOCK(S, REAL, UINT)                                                                             \
    static inline void NAMED(block##S)(const double *restrict x, const double *restrict y, int count,   \
                                       double *restrict a0, double *restrict a1, double *restrict a2,   \
                                       double *restrict a3, int fused, State *restrict s, REAL e,        \
                                       REAL l1, REAL l5) {                                               \
        uint64_t max_abs = s->max_abs;                                                                  \
        UINT max_rel = (UINT)s->max_rel;                                                                \
        int64_t under1 = 0, under5 = 0;                                                                 \
        for (int j = 0; j < count; j++) {                                                               \
            double d = x[j] - y[j];                                                                     \
            if (fused) {                                                                                \
                a0[j] = fma(x[j], y[j], a0[j]);                                                         \
                a1[j] = fma(x[j], x[j], a1[j]);                                                         \
                a2[j] = fma(y[j], y[j], a2[j]);                                                         \
                a3[j] = fma(d, d, a3[j]);                                                               \
            } else {                                                                                    \
                a0[j] += x[j] * y[j];                                                                   \
                a1[j] += x[j] * x[j];                                                                   \
                a2[j] += y[j] * y[j];                                                                   \
                a3[j] += d * d;                                                                         \
            }                                                                                           \
            uint64_t ad = NAMED(double_bits)(fabs(d));                                                  \
            max_abs = ad > max_abs ? ad : max_abs;                                                      \
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

BLOCK(_f, float, uint32_t)
BLOCK(_d, double, uint64_t)

/* One run [first, first + size) of the dots, summed as OpenBLAS's ddot kernel for `order` sums it (see
   pair_pass.c): SkylakeX first takes 32-lane blocks and folds the lanes to 16; then 16-lane blocks; the
   16 lanes summed in the order's tree; then the last size mod 16 products one by one. */
#define RUN(NAME, NK, BK, S, REAL)                                                                      \
    static void NAME(const void *n, const void *b, Py_ssize_t first, Py_ssize_t size, int order,        \
                     State *s, double dots[DOTS], REAL e, REAL l1, REAL l5) {                            \
        double x[LANES], y[LANES], wide[DOTS][LANES] = {{0}}, lanes[DOTS][16];                           \
        Py_ssize_t with16 = size & -(Py_ssize_t)16, i = 0;                                              \
        Py_ssize_t wide_end = order == SKYLAKEX ? with16 & -(Py_ssize_t)LANES : 0;                      \
        for (; i < wide_end; i += LANES) {                                                              \
            NAMED(stage)(n, NK, first + i, LANES, x);                                                   \
            NAMED(stage)(b, BK, first + i, LANES, y);                                                   \
            NAMED(block##S)(x, y, LANES, wide[0], wide[1], wide[2], wide[3], 1, s, e, l1, l5);          \
        }                                                                                               \
        for (int k = 0; k < DOTS; k++)                                                                  \
            for (int q = 0; q < 4; q++)                                                                 \
                for (int l = 0; l < 4; l++)                                                             \
                    lanes[k][4 * q + l] = wide[k][8 * q + l] + wide[k][8 * q + 4 + l];                  \
        for (; i < with16; i += 16) {                                                                   \
            NAMED(stage)(n, NK, first + i, 16, x);                                                      \
            NAMED(stage)(b, BK, first + i, 16, y);                                                      \
            NAMED(block##S)(x, y, 16, lanes[0], lanes[1], lanes[2], lanes[3], 1, s, e, l1, l5);         \
        }                                                                                               \
        for (int k = 0; k < DOTS; k++) dots[k] = with16 ? lanes_sum(lanes[k], order) : 0.0;             \
        for (; i < size; i++) {                                                                         \
            NAMED(stage)(n, NK, first + i, 1, x);                                                       \
            NAMED(stage)(b, BK, first + i, 1, y);                                                       \
            NAMED(block##S)(x, y, 1, &dots[0], &dots[1], &dots[2], &dots[3], order == SKYLAKEX, s, e,  \
                            l1, l5);                                                                    \
        }                                                                                               \
    }

/* The whole pass: the runs one after the other, each run's dots added to the totals in order. */
#define PASS(NAME, NK, BK, S, REAL)                                                                     \
    RUN(CAT2(NAME, _run), NK, BK, S, REAL)                                                              \
    static Result NAME(const void *n, const void *b, const Py_ssize_t *ends, int runs, int order,       \
                       double eps, double t1, double t5) {                                               \
        Result res = {0};                                                                               \
        State s = {0};                                                                                  \
        Py_ssize_t first = 0;                                                                           \
        for (int r = 0; r < runs; r++) {                                                                \
            double dots[DOTS];                                                                          \
            CAT2(NAME, _run)(n, b, first, ends[r] - first, order, &s, dots, (REAL)eps, (REAL)t1,        \
                             (REAL)t5);                                                                 \
            for (int k = 0; k < DOTS; k++) res.dots[k] = res.dots[k] + dots[k];                         \
            first = ends[r];                                                                            \
        }                                                                                               \
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
