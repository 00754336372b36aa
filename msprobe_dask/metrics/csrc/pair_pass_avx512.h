/* The pass of pair_pass.c with AVX-512, for a pair of float16 / bfloat16 / float32 tensors whose relative
   error is float32 (the usual pair): one loop over the two tensors' bytes, 16 elements at a time, with
   the same arithmetic element by element as pair_pass_loops.h (float64 widening, fma into lane i mod 32
   or 16 of each dot, the largest |d| and relative error on their bits, the counts): the 32 or 16 lanes
   of the four dots stay in 16 or 8 of the 32 registers, so nothing is staged. The last size mod 16
   elements of a run go through the generic loops. Included once, by pair_pass.c, after the generic
   loops; Result, State, the kinds, the orders and lanes_sum come from there. */

/* 16 elements of a float16, bfloat16 or float32 tensor from element `at`, as float32 (exactly). */
static inline __m512 load16_avx512(const void *p, int kind, Py_ssize_t at) {
    if (kind == F32) return _mm512_loadu_ps((const float *)p + at);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)p + at));
    if (kind == F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The float32 lanes as float64: elements 0-7 and 8-15. */
static inline __m512d low8_avx512(__m512 f) { return _mm512_cvtps_pd(_mm512_castps512_ps256(f)); }
static inline __m512d high8_avx512(__m512 f) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(f, 1)); }

typedef struct {
    __m512i top_abs, top_rel, under1, under5; /* bits of the largest |d| and relative error; counts */
} Lanes512;

/* The maxima and counts of 16 elements (float32 n and b, and their float64 differences d0, d1). */
static inline void stats16_avx512(__m512 xr, __m512 yr, __m512d d0, __m512d d1, Lanes512 *v, __m512 e,
                                  __m512 l1, __m512 l5) {
    const __m512i magnitude = _mm512_set1_epi64(INT64_MAX);
    __m512i a0 = _mm512_and_si512(_mm512_castpd_si512(d0), magnitude);
    __m512i a1 = _mm512_and_si512(_mm512_castpd_si512(d1), magnitude);
    v->top_abs = _mm512_max_epu64(v->top_abs, _mm512_max_epu64(a0, a1));
    __m512 z = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(yr, _mm512_setzero_ps(), _CMP_EQ_OQ), e);
    xr = _mm512_add_ps(xr, z);
    yr = _mm512_add_ps(yr, z);
    __m512 r = _mm512_abs_ps(_mm512_div_ps(_mm512_sub_ps(xr, yr), yr));
    v->top_rel = _mm512_max_epu32(v->top_rel, _mm512_castps_si512(r));
    const __m512i one = _mm512_set1_epi32(1);
    v->under1 = _mm512_mask_add_epi32(v->under1, _mm512_cmp_ps_mask(r, l1, _CMP_LT_OQ), v->under1, one);
    v->under5 = _mm512_mask_add_epi32(v->under5, _mm512_cmp_ps_mask(r, l5, _CMP_LT_OQ), v->under5, one);
}

/* The lanes' maxima into `s`, their counts added to it (and set to 0: 32-bit lanes). */
static inline void flush_avx512(Lanes512 *v, State *s) {
    uint64_t top_abs = _mm512_reduce_max_epu64(v->top_abs);
    uint32_t top_rel = _mm512_reduce_max_epu32(v->top_rel);
    s->max_abs = top_abs > s->max_abs ? top_abs : s->max_abs;
    s->max_rel = top_rel > s->max_rel ? top_rel : s->max_rel;
    s->under1 += (uint32_t)_mm512_reduce_add_epi32(v->under1);
    s->under5 += (uint32_t)_mm512_reduce_add_epi32(v->under5);
    v->under1 = v->under5 = _mm512_setzero_si512();
}

enum { FLUSH_EVERY = 1 << 20 }; /* elements between flushes: a count lane stays below 2^16 */

/* One run [first, first + size) as pair_pass_loops.h's RUN. */
static inline void run_avx512(const void *n, int nk, const void *b, int bk, Py_ssize_t first, Py_ssize_t size,
                              int order, State *s, double dots[DOTS], float e, float l1, float l5) {
    const __m512 ev = _mm512_set1_ps(e), v1 = _mm512_set1_ps(l1), v5 = _mm512_set1_ps(l5);
    Lanes512 v = {_mm512_set1_epi64((int64_t)s->max_abs), _mm512_set1_epi32((int32_t)(uint32_t)s->max_rel),
                  _mm512_setzero_si512(), _mm512_setzero_si512()};
    double wide[DOTS][LANES], lanes[DOTS][16];
    Py_ssize_t with16 = size & -(Py_ssize_t)16, i = 0;
    Py_ssize_t wide_end = order == SKYLAKEX ? with16 & -(Py_ssize_t)LANES : 0;
    __m512d a[DOTS][4];
    for (int k = 0; k < DOTS; k++)
        for (int q = 0; q < 4; q++) a[k][q] = _mm512_setzero_pd();
    while (i < wide_end) {
        Py_ssize_t stop = wide_end - i > FLUSH_EVERY ? i + FLUSH_EVERY : wide_end;
        for (; i < stop; i += 32) {
            for (int h = 0; h < 2; h++) {
                __m512 xr = load16_avx512(n, nk, first + i + 16 * h), yr = load16_avx512(b, bk, first + i + 16 * h);
                __m512d x0 = low8_avx512(xr), x1 = high8_avx512(xr), y0 = low8_avx512(yr), y1 = high8_avx512(yr);
                __m512d d0 = _mm512_sub_pd(x0, y0), d1 = _mm512_sub_pd(x1, y1);
                a[0][2 * h] = _mm512_fmadd_pd(x0, y0, a[0][2 * h]);
                a[0][2 * h + 1] = _mm512_fmadd_pd(x1, y1, a[0][2 * h + 1]);
                a[1][2 * h] = _mm512_fmadd_pd(x0, x0, a[1][2 * h]);
                a[1][2 * h + 1] = _mm512_fmadd_pd(x1, x1, a[1][2 * h + 1]);
                a[2][2 * h] = _mm512_fmadd_pd(y0, y0, a[2][2 * h]);
                a[2][2 * h + 1] = _mm512_fmadd_pd(y1, y1, a[2][2 * h + 1]);
                a[3][2 * h] = _mm512_fmadd_pd(d0, d0, a[3][2 * h]);
                a[3][2 * h + 1] = _mm512_fmadd_pd(d1, d1, a[3][2 * h + 1]);
                stats16_avx512(xr, yr, d0, d1, &v, ev, v1, v5);
            }
        }
        flush_avx512(&v, s);
    }
    for (int k = 0; k < DOTS; k++) {
        for (int q = 0; q < 4; q++) _mm512_storeu_pd(wide[k] + 8 * q, a[k][q]);
        for (int q = 0; q < 4; q++)
            for (int l = 0; l < 4; l++) lanes[k][4 * q + l] = wide[k][8 * q + l] + wide[k][8 * q + 4 + l];
        a[k][0] = _mm512_loadu_pd(lanes[k]);
        a[k][1] = _mm512_loadu_pd(lanes[k] + 8);
    }
    while (i < with16) {
        Py_ssize_t stop = with16 - i > FLUSH_EVERY ? i + FLUSH_EVERY : with16;
        for (; i < stop; i += 16) {
            __m512 xr = load16_avx512(n, nk, first + i), yr = load16_avx512(b, bk, first + i);
            __m512d x0 = low8_avx512(xr), x1 = high8_avx512(xr), y0 = low8_avx512(yr), y1 = high8_avx512(yr);
            __m512d d0 = _mm512_sub_pd(x0, y0), d1 = _mm512_sub_pd(x1, y1);
            a[0][0] = _mm512_fmadd_pd(x0, y0, a[0][0]);
            a[0][1] = _mm512_fmadd_pd(x1, y1, a[0][1]);
            a[1][0] = _mm512_fmadd_pd(x0, x0, a[1][0]);
            a[1][1] = _mm512_fmadd_pd(x1, x1, a[1][1]);
            a[2][0] = _mm512_fmadd_pd(y0, y0, a[2][0]);
            a[2][1] = _mm512_fmadd_pd(y1, y1, a[2][1]);
            a[3][0] = _mm512_fmadd_pd(d0, d0, a[3][0]);
            a[3][1] = _mm512_fmadd_pd(d1, d1, a[3][1]);
            stats16_avx512(xr, yr, d0, d1, &v, ev, v1, v5);
        }
        flush_avx512(&v, s);
    }
    flush_avx512(&v, s);
    for (int k = 0; k < DOTS; k++) {
        _mm512_storeu_pd(lanes[k], a[k][0]);
        _mm512_storeu_pd(lanes[k] + 8, a[k][1]);
        dots[k] = with16 ? lanes_sum(lanes[k], order) : 0.0;
    }
    if (i < size) { /* the last size mod 16 products one by one, and their maxima and counts */
        double x[16], y[16];
        int count = (int)(size - i);
        stage_base(n, nk, first + i, count, x);
        stage_base(b, bk, first + i, count, y);
        for (int j = 0; j < count; j++) dots1_base(x[j], y[j], order == SKYLAKEX, dots);
        stats_f_base(x, y, count, 1, s, e, l1, l5);
    }
}

/* The whole pass (pair_pass_loops.h's PASS) for float32 relative errors. */
#define PASS512(NAME, NK, BK)                                                                           \
    static Result NAME(const void *n, const void *b, const Py_ssize_t *ends, int runs, int order,       \
                       double eps, double t1, double t5) {                                               \
        Result res = {0};                                                                               \
        State s = {0};                                                                                  \
        ADD_RUNS(run_avx512(n, NK, b, BK, first, count, order, &s, dots, (float)eps, (float)t1,         \
                            (float)t5))                                                                 \
        uint32_t rel_bits = (uint32_t)s.max_rel;                                                        \
        float rel_value;                                                                                \
        memcpy(&res.max_abs, &s.max_abs, sizeof res.max_abs);                                           \
        memcpy(&rel_value, &rel_bits, sizeof rel_value);                                                \
        res.max_rel = (double)rel_value;                                                                \
        res.under1 = (Py_ssize_t)s.under1;                                                              \
        res.under5 = (Py_ssize_t)s.under5;                                                              \
        return res;                                                                                     \
    }

PASS512(p00_f_avx512, 0, 0) PASS512(p01_f_avx512, 0, 1) PASS512(p02_f_avx512, 0, 2)
PASS512(p10_f_avx512, 1, 0) PASS512(p11_f_avx512, 1, 1) PASS512(p12_f_avx512, 1, 2)
PASS512(p20_f_avx512, 2, 0) PASS512(p21_f_avx512, 2, 1) PASS512(p22_f_avx512, 2, 2)

/* By (n kind, b kind): float16, bfloat16, float32 only. */
static const PassFn passes_f_avx512[3][3] = {{p00_f_avx512, p01_f_avx512, p02_f_avx512},
                                             {p10_f_avx512, p11_f_avx512, p12_f_avx512},
                                             {p20_f_avx512, p21_f_avx512, p22_f_avx512}};
